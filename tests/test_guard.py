"""Guard regions: a kernel that reads or writes outside its arrays is found, every run, and named,
on both CPU backends (numba's simulator and Triton's interpreter)."""

import re

import pytest
import torch
import triton
import triton.language as tl
from numba import cuda, float32

from course_lib import check
from course_lib.correctness import CheckFailure
from course_lib.gemm import new_output, prepare
from course_lib.instruments import guard
from course_lib.kernels import naive

REPEATS = 5  # "every time": the same planted bug is reported on every run


@cuda.jit
def _reads_one_row_too_far(a, b, c):
    col, row = cuda.grid(2)
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row + 1, k] * b[k, col]  # the last row reads past the end of a
        c[row, col] = acc


@cuda.jit
def _writes_past_the_edge(a, b, c):
    col, row = cuda.grid(2)
    if row < c.shape[0]:  # half a bounds check: columns past N are written too
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, min(col, b.shape[1] - 1)]
        c[row, col] = acc


def _numba_failure(kernel, shape) -> str:
    with pytest.raises(CheckFailure) as e:
        check(lambda a, b: naive.launch(kernel, a, b), shapes=[shape])
    return str(e.value)


def test_numba_read_outside_an_array_is_named_every_run():
    for _ in range(REPEATS):
        msg = _numba_failure(_reads_one_row_too_far, (5, 3, 4))
        assert "read A[5, 0], but A is 5 x 4" in msg, msg
        assert "thread (" in msg and "of block (0, 0)" in msg
        assert "acc += a[row + 1, k] * b[k, col]" in msg  # the source line
        assert "on a GPU this read raises no error" in msg
        assert "tid=" not in msg and "ctaid=" not in msg  # the simulator's own prefix is gone


def test_numba_write_outside_c_is_named_every_run():
    for _ in range(REPEATS):
        msg = _numba_failure(_writes_past_the_edge, (4, 5, 3))
        assert re.search(r"thread \(\d+, \d+\) of block \(0, 0\) wrote C\[\d, ([5-9]|1[0-5])\], but C is 4 x 5", msg), msg
        assert "on a GPU this write raises no error" in msg


def test_a_bare_simulator_index_error_is_one_sentence():
    err = IndexError("tid=[3, 1, 0] ctaid=[0, 2, 0]: index 7 is out of bounds for axis 1 with size 7")
    text = guard.describe_index_error(err)
    assert text.startswith("thread (3, 1) of block (0, 2) indexed outside an array (index 7 is out")
    assert "on a GPU" in text


@triton.jit
def _gemm_k_tail_unmasked(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    # One program per tile of C; the K loop runs to the end but its masks forget the K tail.
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        ks = k0 + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=rows[:, None] < M, other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_store_unmasked(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        ks = k0 + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=cols[None, :] < N)  # rows past M written


def _triton_gemm(kernel):
    def run(a, b):
        ops = prepare(a, b, stage="planted", dtypes=("fp32",), contiguous=True)
        c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
        kernel[(triton.cdiv(ops.M, 16), triton.cdiv(ops.N, 16))](ops.a, ops.b, c, ops.M, ops.N, ops.K, BLOCK=16)
        return c
    return run


def test_triton_read_past_the_end_is_named_every_run():
    for _ in range(REPEATS):
        with pytest.raises(CheckFailure) as e:
            check(_triton_gemm(_gemm_k_tail_unmasked), shapes=[(5, 6, 20)])
        msg = str(e.value)
        # A's last row reads k = 20..31: 12 elements past its end; B's rows 20..31: 12 x 6 = 72
        assert "read 12 elements past the end of A, which is 5 x 20" in msg, msg
        assert "read 72 elements past the end of B, which is 20 x 6" in msg, msg


def test_triton_write_outside_c_is_named_every_run():
    for _ in range(REPEATS):
        with pytest.raises(CheckFailure) as e:
            check(_triton_gemm(_gemm_store_unmasked), shapes=[(5, 6, 20)])
        msg = str(e.value)
        # rows 5..15 of the one 16 x 16 tile, columns 0..5: 11 x 6 = 66 elements past C's end
        assert "wrote 66 elements past the end of C, which is 5 x 6" in msg, msg


def test_a_kernel_that_changes_its_operand_is_caught():
    def scribbles(a, b):
        c = a @ b
        a[0, 0] = 1e6
        return c

    with pytest.raises(CheckFailure, match="changed the operand A"):
        check(scribbles, shapes=[(3, 4, 5)])


def test_guard_regions_do_not_nest_and_leave_nothing_behind():
    with guard.guarded():
        with pytest.raises(RuntimeError, match="does not nest"):
            with guard.guarded():
                pass
    assert guard.active() is None
    c = new_output(2, 3, torch.float32, "cpu")  # outside a check: a plain, unguarded tensor
    assert c.untyped_storage().nbytes() == 2 * 3 * 4


@triton.jit
def _gemm_loads_without_other(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr):
    # Masks everywhere, but the K tail's masked-off elements are left to Triton: undefined.
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        ks = k0 + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + rows[:, None] * K + ks[None, :], mask=(rows[:, None] < M) & (ks[None, :] < K))
        b = tl.load(b_ptr + ks[:, None] * N + cols[None, :], mask=(ks[:, None] < K) & (cols[None, :] < N))
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def test_triton_loads_without_other_are_undefined_and_caught():
    # The interpreter gives zeros where a GPU may give anything: during a check they are NaN.
    with pytest.raises(CheckFailure, match="masked loads without other= read elements that Triton leaves undefined"):
        check(_triton_gemm(_gemm_loads_without_other), shapes=[(5, 6, 20)])
    check(_triton_gemm(_gemm_loads_without_other), shapes=[(16, 16, 32)])  # no masked-off element: right


@pytest.mark.parametrize("where", ["first before", "last before", "first after", "last after"])
def test_a_changed_guard_element_is_found_at_either_end_of_either_region(where):
    """Every element of both guard regions is compared with its fill: a write into the first or the
    last element of the region before or after C is named (an off-by-one in the comparison is not)."""
    n = 12
    with guard.guarded() as g:
        g.output((3, 4), torch.float32, "cpu", name="C")
        storage = g.buffers[-1].storage
        index = {"first before": 0, "last before": guard.GUARD_ELEMENTS - 1,
                 "first after": guard.GUARD_ELEMENTS + n, "last after": storage.numel() - 1}[where]
        storage[index] = 1.0
        found = g.violations()
    assert [v.describe() for v in found] == ["wrote 1 element outside C (into the memory around it)"], (where, found)
    assert found == [guard.Violation("C", "write", "", 1, 0, (3, 4))]


def test_an_untouched_guard_reports_nothing():
    with guard.guarded() as g:
        g.output((3, 4), torch.float32, "cpu", name="C")
        g.place(torch.ones(2, 2), "A")
        assert g.violations() == []
