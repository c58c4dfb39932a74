"""course_lib.check catches wrong kernels and accepts right ones."""

import math

import numpy as np
import pytest
import torch

from course_lib import check, correctness
from course_lib.correctness import CPU_SHAPES, GPU_SHAPES, default_shapes, tolerance
from course_lib.gemm import new_output, prepare, random_inputs
from numba import cuda, float32  # noqa: E402 - after course_lib, which chooses the simulator


def _right(a, b):
    ops = prepare(a, b, stage="right", dtypes=("fp32", "fp16", "bf16"))
    c = new_output(ops.M, ops.N, ops.a.dtype, ops.a.device)
    c[:] = (ops.a.double() @ ops.b.double()).to(c.dtype)
    return ops.give_back(c)


def test_right_kernel_passes_every_dtype():
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        report = check(_right, dtype)
        assert len(report.results) == len(CPU_SHAPES)
        assert all(r.rel_error <= r.tolerance for r in report.results)
        assert "check passed" in repr(report)


def test_a_result_in_fp16_subnormals_is_not_called_wrong():
    """C[1, 5] = -2.41399e-05 against -2.41641e-05 (fp16's subnormal spacing there is 2^-24): a right
    kernel failed a fresh clone's CI once on such an element at K = 1."""
    from course_lib.correctness import element_bound

    a = torch.tensor([[-2.41641e-05 / 0.5]], dtype=torch.float16)
    b = torch.tensor([[0.5]], dtype=torch.float16)
    ref = a.double() @ b.double()
    got = (ref + 2.43e-08).to(torch.float16).double()
    assert float((got - ref).abs()) <= float(element_bound(a, b, ref, "fp16"))


def test_off_by_one_at_the_edge_is_caught():
    def off_by_one(a, b):  # the last row is computed from the wrong row of a
        c = _right(a, b)
        if a.shape[0] > 1:
            c[-1] = a[-2] @ b
        return c

    with pytest.raises(AssertionError) as e:
        check(off_by_one, shapes=[(33, 17, 40)])
    msg = str(e.value)
    assert "M=33, N=17, K=40" in msg and "worst element C[32," in msg and "reference" in msg


def test_unwritten_element_is_caught_by_poisoning():
    def forgets_one(a, b):
        ops = prepare(a, b, stage="forgets", dtypes=("fp32",))
        c = new_output(ops.M, ops.N, ops.a.dtype, ops.a.device)
        full = ops.a @ ops.b
        c[:, :-1] = full[:, :-1]  # never writes the last column
        return c

    with pytest.raises(AssertionError, match=r"not finite.*never wrote"):
        check(forgets_one, shapes=[(5, 6, 7)])


def test_unwritten_element_would_pass_without_poisoning():
    # The reason for poisoning: memory recycled from a correct earlier result hides the bug.
    a, b = torch.randn(4, 3), torch.randn(3, 5)
    stale = a @ b
    c = stale.clone()
    c[:, :-1] = (a @ b)[:, :-1]
    assert torch.equal(c, stale)


def test_transposed_result_is_caught():
    with pytest.raises(AssertionError, match="returned shape"):
        check(lambda a, b: (a @ b).T.contiguous(), shapes=[(3, 5, 7)])
    with pytest.raises(AssertionError, match="relative error"):
        check(lambda a, b: (a @ b).T.contiguous(), shapes=[(6, 6, 6)])


def test_wrong_output_dtype_is_caught():
    with pytest.raises(AssertionError, match="returned torch.float64, expected torch.float32"):
        check(lambda a, b: a.double() @ b.double(), shapes=[(3, 5, 7)])
    with pytest.raises(AssertionError, match="expected torch.bfloat16"):
        check(lambda a, b: a.float() @ b.float(), "bf16", shapes=[(3, 5, 7)])


def test_nan_output_is_caught_even_in_unpoisoned_callables():
    with pytest.raises(AssertionError, match="not finite"):
        check(lambda a, b: torch.full((a.shape[0], b.shape[1]), math.nan), shapes=[(2, 2, 2)])


def test_seed_reproduces_inputs_and_is_named_on_failure():
    seen = []

    def spy(a, b):
        seen.append(a.clone())
        return a @ b

    check(spy, shapes=[(3, 4, 5)], seed=7)
    check(spy, shapes=[(3, 4, 5)], seed=7)
    check(spy, shapes=[(3, 4, 5)])
    assert torch.equal(seen[0], seen[1]) and not torch.equal(seen[0], seen[2])
    with pytest.raises(AssertionError, match=r"seed=11\)"):
        check(lambda a, b: a @ b + 1, shapes=[(3, 4, 5)], seed=11)


def test_default_shapes_cover_the_awkward_cases():
    shapes = default_shapes()
    assert (1, 1, 1) in shapes
    assert any(m == 1 and n > 1 for m, n, _ in shapes)  # skinny
    assert any(n == 1 and m > 1 for m, n, _ in shapes)  # tall
    assert any(all(v % 8 for v in s) for s in shapes)  # off every tile size the course uses
    assert all(v % 16 == 0 for s in default_shapes(16) for v in s)


def test_tolerance_grows_with_k_and_depends_on_dtype():
    assert tolerance("fp32", 64) == 1e-5 < tolerance("fp32", 8192) < 1e-4
    assert tolerance("tf32", 512) == 2e-3 and tolerance("bf16", 512) == 1e-2
    # like sqrt(K / 1024) beyond K = 1024 (every CPU shape has K <= 1024, so only this can tell)
    assert tolerance("fp32", 4096) == pytest.approx(2e-5) and tolerance("fp32", 16384) == pytest.approx(4e-5)


def test_the_shapes_include_a_rank_one_update_of_a_whole_matrix():
    # K = 1 with M, N > 1: every element of C is one product (a loop that never runs its body twice).
    for shapes in (CPU_SHAPES, GPU_SHAPES):
        assert any(k == 1 and m > 1 and n > 1 for m, n, k in shapes)


def test_the_reference_is_computed_in_float64_from_the_rounded_inputs():
    # A reference computed in the inputs' own precision would agree exactly with a 16-bit GEMM.
    report = check(lambda a, b: a @ b, "fp16", shapes=[(33, 17, 40)], seed=0)
    assert report.max_rel_error > 0


def _tf32_truncated(x: torch.Tensor) -> torch.Tensor:
    """fp32 values with the 13 mantissa bits TF32 lacks set to zero (what Triton's tl.dot feeds wgmma)."""
    return (x.contiguous().view(torch.int32) & ~0x1FFF).view(torch.float32)


def test_tf32_tolerance_admits_truncated_operands():
    # Worst case for one product: both operands lose just under 2^-10 of their value.
    x = torch.tensor([[1.0 + 2.0**-10 - 2.0**-23]], dtype=torch.float32)
    exact = x.double() @ x.double()
    truncated = _tf32_truncated(x).double() @ _tf32_truncated(x).double()
    worst = float((exact - truncated).abs() / exact.abs())
    assert 1.9e-3 < worst <= tolerance("tf32", 1)
    # and a GEMM that truncates like the hardware passes check on random inputs of every CPU shape
    report = check(lambda a, b: (_tf32_truncated(a).double() @ _tf32_truncated(b).double()).float(), "tf32", seed=5)
    assert report.worst.rel_error <= report.worst.tolerance


def test_numpy_in_numpy_out():
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    assert isinstance(_right(a, b), np.ndarray)


def test_every_registered_stage_has_its_own_title():
    # Charts and tables label stages by title: two variants with one title cannot be told apart.
    from course_lib import registry

    titles = [s.title for s in registry.stages()]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)


# ---- the element-wise bound ------------------------------------------------------------------
def _computed_as_a_kernel_would(a: torch.Tensor, b: torch.Tensor, dtype: str) -> torch.Tensor:
    """C as a right kernel computes it: fp32 sums (TF32: truncated operands), rounded to C's type."""
    if dtype == "tf32":
        return _tf32_truncated(a) @ _tf32_truncated(b)
    return (a.float() @ b.float()).to(a.dtype)


def _problem(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, dtype: str):
    ref = a.double() @ b.double()
    return correctness._value_problem(c.double(), ref, a, b, dtype, tolerance(dtype, a.shape[1]))[1]


def _one_wrong_element(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C with its largest element (where rounding allows the most) off by 3.0."""
    wrong = c.clone()
    i, j = divmod(int(torch.argmax((a.double() @ b.double()).abs())), c.shape[1])
    wrong[i, j] = (wrong[i, j].double() + 3.0).to(c.dtype)
    return wrong


def test_one_wrong_element_fails_where_the_norm_alone_lets_it_pass():
    # The example that passed before: bf16, 1000 x 1003 x 517, one element off by 3.0.
    a, b = random_inputs(1000, 1003, 517, "bf16", seed=0)
    c = _computed_as_a_kernel_would(a, b, "bf16")
    assert _problem(c, a, b, "bf16") is None
    wrong = _one_wrong_element(c, a, b)
    ref = a.double() @ b.double()
    assert float(torch.linalg.norm(wrong.double() - ref) / torch.linalg.norm(ref)) < tolerance("bf16", 517)
    assert "1 element wrong by more than rounding explains" in _problem(wrong, a, b, "bf16")


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "tf32", "fp16", "bf16"])
def test_one_wrong_element_fails_in_every_dtype_at_every_size_check_uses(dtype):
    for M, N, K in GPU_SHAPES:  # the CPU shapes and the GPU's, up to 4095 x 4097 x 1023
        a, b = random_inputs(M, N, K, dtype, seed=M + N + K)
        c = _computed_as_a_kernel_would(a, b, dtype)
        assert _problem(c, a, b, dtype) is None, (dtype, (M, N, K), "a right result must pass")
        i, j = divmod(int(torch.argmax((a.double() @ b.double()).abs())), N)
        problem = _problem(_one_wrong_element(c, a, b), a, b, dtype)  # by the norm (small C) or element
        assert problem is not None and (f"worst element C[{i}, {j}]" in problem or f"worst C[{i}, {j}]" in problem), (
            dtype, (M, N, K), problem)


def test_the_element_bound_grows_with_k_and_the_type():
    a, b = random_inputs(8, 8, 64, "fp32", seed=1)
    ref = a.double() @ b.double()
    bounds = {d: float(correctness.element_bound(a, b, ref, d).max()) for d in ("fp32", "tf32", "fp16", "bf16")}
    assert bounds["fp32"] < bounds["fp16"] < bounds["bf16"] and bounds["fp32"] < bounds["tf32"]
    a2, b2 = torch.ones(1, 4096), torch.ones(4096, 1)  # s = sqrt(K): the bound grows with K
    ref2 = a2.double() @ b2.double()
    assert float(correctness.element_bound(a2, b2, ref2, "fp32")) > 50 * float(correctness.element_bound(a2[:, :1], b2[:1], a2[:, :1].double() @ b2[:1].double(), "fp32"))


def test_every_failing_shape_is_listed():
    def wrong_unless_square(a, b):
        c = a @ b
        if a.shape[0] != b.shape[1]:
            c = c + 1
        return c

    with pytest.raises(correctness.CheckFailure) as e:
        check(wrong_unless_square, shapes=[(3, 3, 4), (3, 5, 7), (6, 6, 2), (2, 9, 9)])
    assert [f.shape for f in e.value.failures] == [(3, 5, 7), (2, 9, 9)]
    assert "is wrong for 2 of 4 shapes" in str(e.value)


def test_partial_sums_rounded_in_16_bits_are_allowed_only_where_a_stage_says_so():
    # What cuBLAS bf16 did on the H200 (split-K partial sums added in bf16): errors of about 2 u s.
    a, b = random_inputs(200, 300, 517, "bf16", seed=3)
    ref = a.double() @ b.double()
    s = torch.sqrt((a.double() ** 2) @ (b.double() ** 2))
    c = (ref + 1.9 * 2.0**-8 * s * torch.sign(torch.randn(ref.shape, generator=torch.Generator().manual_seed(0),
                                                                    dtype=torch.float64))).to(torch.bfloat16)
    assert "wrong by more than rounding explains" in correctness._value_problem(c.double(), ref, a, b, "bf16", 1.0)[1]
    assert correctness._value_problem(c.double(), ref, a, b, "bf16", 1.0, rounds_partial_sums=True)[1] is None
    from course_lib.registry import get_stage
    assert get_stage("cublas").rounds_partial_sums and not get_stage("triton_fast").rounds_partial_sums


def test_a_failure_carries_what_was_found_as_fields():
    def forgets_the_last_column(a, b):
        ops = prepare(a, b, stage="forgets", dtypes=("fp32",))
        c = new_output(ops.M, ops.N, ops.a.dtype, ops.a.device)
        c[:, :-1] = (ops.a @ ops.b)[:, :-1]
        return c

    with pytest.raises(correctness.CheckFailure) as e:
        check(forgets_the_last_column, shapes=[(5, 6, 7)])
    f = e.value.failures[0]
    assert (f.elements, f.non_finite, f.never_written, f.from_unwritten_shared, f.stray) == (30, 5, 5, 0, ())
    assert f.note == correctness.NAN_NOTE and f.why == f"{f.finding}; {f.note}" and "5 of 30" in f.finding


@cuda.jit
def half_a_tile(a, b, c):  # fills only the first 8 columns of its tile, reads all 16
    tile = cuda.shared.array((16, 16), float32)
    col, row = cuda.grid(2)
    if cuda.threadIdx.x < 8:
        tile[cuda.threadIdx.y, cuda.threadIdx.x] = float32(1.0)
    cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = tile[cuda.threadIdx.y, 15 - cuda.threadIdx.x]


def test_a_numba_kernel_reading_unwritten_shared_memory_is_named():
    from course_lib.kernels import naive

    with pytest.raises(correctness.CheckFailure) as e:
        check(lambda a, b: naive.launch(half_a_tile, a, b, block=(16, 16)), shapes=[(4, 16, 3)])
    f = e.value.failures[0]
    assert f.never_written == 0 and f.non_finite == f.from_unwritten_shared == 32  # columns 0-7 of C read columns 15-8
    (read,) = f.unwritten_shared
    assert read.array == "tile" and read.cause == "unfilled" and read.index[1] >= 8
    assert "none wrote it before the block ended" in f.finding and "starts as NaN" in f.note
