"""The exercises of notebooks 04 and 05 (course_lib.exercises.coalescing_and_triton and
.triton_fast_kernel): each puzzle's reference solution passes, its unfilled starter gets the same
"not solved yet" every run, and realistic wrong solutions fail with a message that names the mistake;
each question's likely wrong answers print what they mean."""

import re

import pytest
import torch
import triton
import triton.language as tl

from course_lib import check
from course_lib.exercises import coalescing_and_triton as ex04
from course_lib.exercises import triton_fast_kernel as ex05
from course_lib.exercises._triton import COLUMN_SLICE, TRANSPOSED, GemmCase, dot_precisions
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.model import schedules

MAX_LINE = 100  # what JupyterLab's output area shows without wrapping (tests/test_notebook_structure.py)


def _run(capsys, puzzle, answer) -> tuple[bool, str]:
    """(verdict, what the check printed, its lines joined into one line of words)."""
    verdict = puzzle.check(answer)
    out = capsys.readouterr().out
    assert all(len(line) <= MAX_LINE for line in out.splitlines()), out
    return bool(verdict), " ".join(out.split())


# ==== notebook 04, puzzle 1: the vector add ======================================================
# The starter exactly as the notebook gives it (its TODO lines unfilled).
@triton.jit
def _add_starter(
    # Pointers to vectors
    x_ptr, y_ptr, out_ptr,
    # Length of the vectors
    n,
    # Meta-parameters
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)   # which program: 0, 1, ..., ceil(n / BLOCK) - 1
    # TODO 1: offsets = the indices of the BLOCK elements this program owns (tl.arange)
    # TODO 2: mask = which of those offsets lie inside the vectors
    # TODO 3: load x and y at x_ptr + offsets and y_ptr + offsets, with the mask
    # TODO 4: store x + y at out_ptr + offsets, with the mask


@triton.jit
def _add_no_mask(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))


@triton.jit
def _add_mask_off_by_one(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets <= n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _add_pid_not_times_block(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) + tl.arange(0, BLOCK)  # programs overlap instead of tiling the vector
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _add_only_the_first_block(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)  # the program id forgotten: every program does block 0
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _add_subtracts(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) - tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _add_typo(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.stor(out_ptr + offsets, offsets)  # noqa: not a Triton function


def test_vector_add_reference_solves_it(capsys):
    ok, out = _run(capsys, ex04.vector_add, c04.vector_add_kernel)
    assert ok and f"Solved: right on all {len(ex04.VECTOR_CASES)} sizes" in out
    assert "outside x, y and out" in out


def test_vector_add_starter_is_not_solved_and_says_the_same_every_run(capsys):
    runs = [_run(capsys, ex04.vector_add, _add_starter) for _ in range(2)]
    assert runs[0] == runs[1]
    ok, out = runs[0]
    assert not ok
    assert "Not solved yet: on every size out was never written" in out and "Fill in the TODO lines" in out
    _, out = _run(capsys, ex04.vector_add, None)
    assert "no kernel yet" in out


def test_vector_add_without_a_mask_reads_and_writes_past_the_end(capsys):
    ok, out = _run(capsys, ex04.vector_add, _add_no_mask)
    assert not ok
    # every size that is not a multiple of the block is listed, with what the guard saw
    wrong = [case for case in ex04.VECTOR_CASES if case.n % case.block]
    assert f"right on {len(ex04.VECTOR_CASES) - len(wrong)} of {len(ex04.VECTOR_CASES)} sizes" in out
    flat = " ".join(out.split())
    for case in wrong:
        assert f"{ex04._show_vector_case(case)}: read" in flat, case
    assert "n = 1: read 127 elements past the end of x and of y; wrote 127 elements past the end of out" in out
    assert "n = 129: read 127 elements past the end of x and of y" in out
    assert f"not a multiple of BLOCK (mostly {ex04.VECTOR_PUZZLE_BLOCK})" in out


def test_vector_add_off_by_one_mask_is_named(capsys):
    ok, out = _run(capsys, ex04.vector_add, _add_mask_off_by_one)
    assert not ok
    assert "n = 100: read 1 element past the end of x and of y; wrote 1 element past the end of out" in out
    assert "Off by one" in out and "n - 1" in out
    assert "n = 128:" not in out  # a whole number of blocks: offset n is never reached


def test_the_vector_add_diagnoses_read_what_was_found_not_its_words():
    """The diagnoses read the guard's findings: on a GPU only the write one element past the end
    shows (a changed guard region, side unknown), and it gets the same note as the interpreter's read."""
    from course_lib.exercises._triton import CaseResult
    from course_lib.instruments.guard import Violation

    off_by_one = ex04.vector_add.diagnoses[1]
    gpu = {100: CaseResult("wrote 1 element outside out (into the memory around it)",
                           (Violation("out", "write", "", 1, 0, (100,)),), 100), 128: CaseResult()}
    cpu = {100: CaseResult("read 1 element past the end of x and of y",
                           (Violation("x", "read", "after", 1, 1, (100,)),), 100), 128: CaseResult()}
    two = {100: CaseResult("read 2 elements past the end of x", (Violation("x", "read", "after", 2, 2, (100,)),), 100)}
    assert off_by_one(gpu) == off_by_one(cpu) and off_by_one(cpu).startswith("Off by one:")
    assert off_by_one(two) is None


def test_stray_sentences_merge_arrays_and_keep_a_slice_s_wider_matrix_whole():
    from course_lib.exercises._triton import _strays, stored_name
    from course_lib.instruments.guard import Violation

    wide = stored_name("x", COLUMN_SLICE)
    found = [Violation("x", "read", "after", 3, 3, (5,)), Violation("y", "read", "after", 3, 9, (5,)),
             Violation(wide, "read", "after", 1, 1, (3, 39)), Violation("out", "write", "", 2, 0, (5,))]
    assert _strays(found, {wide}) == [
        "read 3 elements past the end of x and of y (up to 9 beyond its last element)",
        f"read 1 element past the end of {wide}, which is 3 x 39",
        "wrote 2 elements outside out (into the memory around it)",
    ]


@triton.jit
def _add_mask_one_short(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n - 1  # one short: the last element is never written
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def test_vector_add_mask_one_short_is_named_not_blamed_on_other(capsys):
    """A fresh learner's mistake: the masked-off loads have no other=, but what is wrong is the store
    that never reaches the last element; the NaN left there is the poison, not a computed NaN."""
    ok, out = _run(capsys, ex04.vector_add, _add_mask_one_short)
    assert not ok
    assert "n = 100: never wrote 1 of 100 elements of out (first out[99]" in " ".join(out.split())
    assert "Off by one the other way" in out and "offsets < n" in " ".join(out.split())
    assert "other=" not in out


@pytest.mark.parametrize("kernel", [_add_pid_not_times_block, _add_only_the_first_block])
def test_vector_add_programs_that_miss_their_block_never_write_elements(capsys, kernel):
    ok, out = _run(capsys, ex04.vector_add, kernel)
    assert not ok
    assert re.search(r"n = 1000: never wrote \d+ of 1000 elements of out \(first out\[\d+\]", out), out
    assert "n = 100:" not in out  # one program: nothing to miss
    assert f"Only sizes of more than one block (BLOCK = {ex04.VECTOR_PUZZLE_BLOCK}, or the larger block named)" in out
    assert "pid * BLOCK" in out


def test_vector_add_wrong_values_and_a_kernel_that_does_not_run(capsys):
    ok, out = _run(capsys, ex04.vector_add, _add_subtracts)
    assert not ok and re.search(r"n = 1: 1 of 1 elements wrong, worst out\[0\] = \S+, expected \S+", out)
    ok, out = _run(capsys, ex04.vector_add, _add_typo)
    assert not ok and "your kernel did not run" in out and "stor" in out


# ==== deep_dives/triton_lab, optional puzzle: the sums of a matrix's columns =====================
# (notebook 04 shows the row sums, c04.row_sums_kernel, as a worked example; the learner turns it around)
BR, BC = ex04.COLUMN_SUMS_BLOCK_R, ex04.COLUMN_SUMS_BLOCK_C


@triton.jit
def _sums_starter(
    # Pointers: x is the R x C matrix, out the C sums
    x_ptr, out_ptr,
    # Matrix dimensions
    R, C,
    # Strides of x: elements to step to the next row (first) or the next column (second)
    stride_xr, stride_xc,
    # Meta-parameters
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)   # the columns this program sums
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)                # one fp32 sum per column
    # TODO 1: loop down the rows in tiles of BLOCK_R (R need not be a multiple of BLOCK_R)
    # TODO 2:   load the BLOCK_R x BLOCK_C tile at the tile's rows and at cols (use both strides),
    #           masked at the rows past R and the columns past C, with other=0.0
    # TODO 3:   add each column of the tile to acc (acc += tl.sum(tile, axis=0))
    # TODO 4: store acc at out_ptr + cols, masked


@triton.jit
def _sums_no_tail_mask(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc,
                       mask=cols[None, :] < C, other=0.0)  # the rows past R are read
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_row_stride_forgotten(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_first_tile_only(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R)
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(tile, axis=0), mask=cols < C)


@triton.jit
def _sums_one_big_block(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, 512)  # a learner's "load the whole column": no loop, 512 rows at most
    mask = (rows[:, None] < R) & (cols[None, :] < C)
    tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
    tl.store(out_ptr + cols, tl.sum(tile, axis=0), mask=cols < C)


@triton.jit
def _sums_acc_overwritten(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc = tl.sum(tile, axis=0)  # = instead of +=: only the last tile counts
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_whole_tiles_only(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for t in range(0, R // BLOCK_R):  # the tail tile is never visited
        rows = t * BLOCK_R + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_no_store_mask(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc)


@triton.jit
def _sums_of_rows(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=1)  # 04's axis, copied: sums along the rows of each tile
    tl.store(out_ptr + cols, acc, mask=cols < C)


def test_column_sums_reference_solves_it(capsys):
    ok, out = _run(capsys, ex04.column_sums, ex04.column_sums_kernel)
    assert ok and f"Solved: right on all {len(ex04.column_sums.cases)} shapes" in out and "outside x and out" in out
    # some of them hand x over stored transposed or as a slice of a wider matrix
    assert {case.layout for case in ex04.column_sums.cases if case.layout} == {TRANSPOSED, COLUMN_SLICE}


def test_column_sums_starter_is_not_solved_and_says_the_same_every_run(capsys):
    runs = [_run(capsys, ex04.column_sums, _sums_starter) for _ in range(2)]
    assert runs[0] == runs[1]
    ok, out = runs[0]
    assert not ok and "Not solved yet: on every shape out was never written" in out


def test_column_sums_without_the_tail_mask_reads_past_x(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_no_tail_mask)
    assert not ok
    tails = [s for s in ex04.column_sums.cases if s[0] % BR]
    assert f"right on {len(ex04.column_sums.cases) - len(tails)} of" in out
    assert "x 31 x 3: read 3 elements past the end of x" in out  # row 32 of the tile, the one past R: 3 columns
    assert f"not a multiple of BLOCK_R (mostly {BR})" in out and "the tail" in out


def test_column_sums_whole_tiles_only_is_the_tail_too(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_whole_tiles_only)
    assert not ok and "elements wrong" in out and f"not a multiple of BLOCK_R (mostly {BR})" in out
    assert "past the end" not in out


def test_column_sums_wrong_stride_gives_wrong_values(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_row_stride_forgotten)
    assert not ok
    assert re.search(r"x 100 x 40: \d+ of 40 elements wrong, worst out\[\d+\] = \S+, expected \S+", out), out
    assert "x 1 x 1:" not in out  # one row: its stride is never used


@pytest.mark.parametrize("kernel", [_sums_first_tile_only, _sums_acc_overwritten])
def test_column_sums_that_keep_one_tile_are_named(capsys, kernel):
    ok, out = _run(capsys, ex04.column_sums, kernel)
    assert not ok and "elements wrong" in out
    assert f"taller than one tile (BLOCK_R = {BR} rows, or the tile named)" in out and "every tile" in out
    assert "x 31 x 3:" not in out


def test_column_sums_without_a_loop_fail_on_a_tall_x_and_are_told_to_walk(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_one_big_block)  # a fresh learner's kernel passed before
    assert not ok and "x 4099 x 3:" in out
    assert "Only the shapes taller than 257 rows are wrong: your kernel covers a fixed number of rows" in out


def test_column_sums_without_a_store_mask_write_past_out(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_no_store_mask)
    assert not ok
    assert f"x 33 x 17: wrote {2 * BC - 17} elements past the end of out" in out  # 2 programs of 16 columns
    assert f"not a multiple of BLOCK_C (mostly {BC})" in out


def test_column_sums_with_04s_axis_do_not_run_and_say_why(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_of_rows)  # BLOCK_R row sums added to BLOCK_C columns
    assert not ok and "your kernel did not run" in out
    assert f"incompatible dimensions at index 0: {BC} and {BR}" in out
    assert "Check the axis of each tl.sum" in out  # what a fresh learner needed to read the error


@triton.jit
def _sums_strides_ignored(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=mask, other=0.0)  # row r at r * C
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_column_stride_ignored(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :], mask=mask, other=0.0)  # columns assumed adjacent
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_mask_dimensions_swapped(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < C) & (cols[None, :] < R)  # the rows cut at C, the columns at R
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@pytest.mark.parametrize("kernel", [_sums_strides_ignored, _sums_column_stride_ignored])
def test_column_sums_that_ignore_the_strides_fail_on_strided_x(capsys, kernel):
    ok, out = _run(capsys, ex04.column_sums, kernel)
    assert not ok
    for R, C in ex04.COLUMN_SUMS_SHAPES:  # right on every row-major x
        assert f"x {R} x {C}:" not in out
    assert re.search(r"x 100 x 40 stored transposed, strides \(1, 100\): \d+ of 40 elements wrong", out), out
    assert "wrong where x is stored transposed or is a column slice" in out and "use both strides" in out
    # a slice's rows lie further apart than C; its columns are adjacent, as a row-major x's
    slice_wrong = re.search(r"x 33 x 17 a column slice, strides \(\d+, 1\):", out) is not None
    assert slice_wrong == (kernel is _sums_strides_ignored), out


def test_column_sums_with_the_mask_dimensions_swapped_fail(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_mask_dimensions_swapped)
    assert not ok and "x 31 x 3:" in out and "elements wrong" in out


def test_row_sums_library_kernel_takes_any_strides_and_dtype():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(70, 45, generator=gen)
    for t in (x, x.T, x[::2, 3:]):  # contiguous, transposed, sliced
        assert torch.allclose(c04.row_sums(t).double(), t.double().sum(dim=1), rtol=1e-5, atol=1e-5)
    got = c04.row_sums(x.to(torch.bfloat16))
    assert got.dtype == torch.bfloat16
    assert torch.allclose(got.double(), x.to(torch.bfloat16).double().sum(dim=1), rtol=2e-2, atol=1e-1)
    with pytest.raises(ValueError, match="2-D matrix"):
        c04.row_sums(x[0])
    with pytest.raises(ValueError, match="power of two"):
        c04.row_sums(x, block_c=48)


# ==== notebook 04, puzzle 3: the masked GEMM with its K tail ====================================
@triton.jit
def _gemm_starter(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions: A is M x K, B is K x N, C is M x N
    M, N, K,
    # Strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)   # rows of A and of C
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)   # columns of B and of C
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # TODO 1: loop over the K-slices k0 = 0, BLOCK_K, 2 * BLOCK_K, ... (K need not be a multiple)
    # TODO 2:   load A's BLOCK_M x BLOCK_K block at (rows, k0 + ks), masked at rows past M and k past K,
    #           and B's BLOCK_K x BLOCK_N block at (k0 + ks, cols), masked at k past K and cols past N;
    #           other=0.0 in both
    # TODO 3:   acc = tl.dot(a, b, acc, input_precision="ieee")   # "ieee": exact fp32, not TF32
    # TODO 4: store acc into C at (rows, cols), masked


@triton.jit
def _gemm_whole_slices_only(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, K // BLOCK_K):  # the old exercise's bug: the K tail is never visited
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak, mask=rows[:, None] < M, other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn, mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_masks_forget_k(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # the loop is fixed, but the masks stop at M and N only
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak, mask=rows[:, None] < M, other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn, mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_b_not_cut_at_k(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # A is masked at K, B only at N (a reader's slip)
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn, mask=cols[None, :] < N, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_no_store_mask(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                        stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc)


@triton.jit
def _gemm_a_stride_for_b(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_am + cols[None, :] * stride_bn,  # A's row stride, K, not B's, N
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def test_masked_gemm_reference_solves_it(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, ex04.masked_gemm_kernel)
    assert ok and f"right on all {len(ex04.masked_gemm.cases)} cases" in out and "Solved" in out
    assert "exact fp32" in out and "input_precision" not in out
    # and through course_lib.check directly, as the library's own kernel
    check(ex04.as_gemm(ex04.masked_gemm_kernel), "fp32", shapes=[(33, 17, 40), (5, 3, 1)], seed=0)


def test_masked_gemm_starter_is_not_solved_and_says_the_same_every_run(capsys):
    runs = [_run(capsys, ex04.masked_gemm, _gemm_starter) for _ in range(2)]
    assert runs[0] == runs[1]
    ok, out = runs[0]
    assert not ok and "Not solved yet: on every shape C was never written" in out and "TODO" in out


def _k_tails():
    return [s for s in ex04.GEMM_SHAPES if s[2] % ex04.GEMM_PUZZLE_BLOCK]


def _cases():
    return [GemmCase(*c) for c in ex04.masked_gemm.cases]


def test_masked_gemm_whole_k_slices_only_is_the_k_tail(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_whole_slices_only)
    assert not ok
    for shape in _k_tails():  # every failing shape listed, and only those
        assert f"{shape}: relative error" in out, shape
    tails = [c for c in _cases() if c.K % ex04.GEMM_PUZZLE_BLOCK]
    assert f"right on {len(_cases()) - len(tails)} of {len(_cases())} cases" in out
    assert f"not a multiple of BLOCK_K = {ex04.GEMM_PUZZLE_BLOCK}: the K tail" in out
    assert "the loop stops before the last, partial K-slice" in out and "read past" not in out.split("right on")[0]
    assert out.index("the K tail") < out.index("wrong on these")  # the likely cause comes before the list


def test_masked_gemm_only_b_not_cut_at_k_names_b(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_b_not_cut_at_k)
    assert not ok and "the K tail" in out
    assert "Only B was read past its end: B's load needs the mask at K" in out
    assert "A's columns" not in out and "the loop stops" not in out


def test_masked_gemm_masks_not_cut_at_k_read_past_a_and_b(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_masks_forget_k)
    assert not ok
    # A's last row reads k = 40..63 (24 past its end); B's rows 40..63, 17 columns: 24 x 17 = 408
    assert ("(33, 17, 40): read 24 elements past the end of A, which is 33 x 40; "
            "read 408 elements past the end of B, which is 40 x 17") in out
    for shape in _k_tails():
        assert f"{shape}: read" in out, shape
    assert "the K tail" in out and "A and B were both read past their ends" in out


def test_masked_gemm_without_a_store_mask_writes_past_c(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_no_store_mask)
    assert not ok
    assert "(33, 17, 40): wrote 542 elements past the end of C, which is 33 x 17" in out
    assert "the edges of C" in out
    assert "(32, 32, 64):" not in out  # whole tiles: nothing to mask


def test_masked_gemm_wrong_stride_is_caught(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_a_stride_for_b)
    assert not ok
    assert "(1, 45, 19): relative error" in out  # wrong values where the wrong rows stay inside B
    assert "(33, 17, 40): read" in out and "past the end of B" in out


# Realistic wrong GEMMs the CPU cannot tell from right ones by their values alone: strides ignored
# (right on row-major operands), K loops that stop after a fixed number of slices (right while K is
# small), and tl.dot without exact fp32 (the interpreter multiplies in fp32 whatever it is asked).
@triton.jit
def _gemm_strides_ignored(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + cols[None, :], mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_a_strides_ignored(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_three_k_slices(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, 3):  # "K is at most 96 here": three slices of 32
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_sum_overwritten(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, input_precision="ieee")  # a learner's slip: each slice replaces the sum
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def test_masked_gemm_a_sum_each_slice_replaces_is_told_to_add(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_sum_overwritten)
    assert not ok and "Only shapes whose K is more than 32 (1 K-slice of BLOCK_K = 32)" in out
    assert "replaces acc instead of adding to it" in out


@triton.jit
def _gemm_k_up_to_64(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, 64, BLOCK_K):  # a bound copied from a test shape instead of K
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_without_precision(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)  # TF32 on a GPU
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_tf32(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
               stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_allow_tf32(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, allow_tf32=True)  # an older tutorial's spelling
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


# Wrong GEMMs the checks were not designed around: they must fail all the same.
@triton.jit
def _gemm_k_mask_off_by_one(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                            stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] <= K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] <= K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_b_mask_on_m(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                      stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < M), other=0.0)  # B's columns cut at M
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _gemm_fp16_sums(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                    stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)  # "half the registers"
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee").to(tl.float16)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def test_masked_gemm_cases_cover_strides_and_long_k():
    cases = _cases()
    for operand in "ABC":
        assert any(c.strided == (operand,) for c in cases), operand  # each operand strided on its own
    assert {c.a for c in cases} >= {TRANSPOSED, COLUMN_SLICE} and {c.b for c in cases} >= {TRANSPOSED, COLUMN_SLICE}
    assert TRANSPOSED in {c.c for c in cases}
    assert max(c.K for c in cases) >= 4 * ex04.GEMM_PUZZLE_BLOCK  # a loop capped at three slices fails


def test_masked_gemm_strides_ignored_is_named(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_strides_ignored)
    assert not ok
    row_major = [c for c in _cases() if not c.strided]
    assert f"right on {len(row_major)} of {len(_cases())} cases" in out
    assert "(33, 17, 40), A stored transposed, strides (1, 33): relative error" in out
    assert "(24, 40, 33), C stored transposed, strides (1, 24): relative error" in out
    assert ("wrong where A, B and C are stored otherwise (transposed, or a column slice of a wider matrix): "
            "your kernel steps through A, B and C as if their rows were packed one after another") in out
    assert "a_ptr + i * stride_am + k * stride_ak" in out


def test_masked_gemm_a_strides_ignored_names_a(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_a_strides_ignored)
    assert not ok
    assert "(20, 50, 96), B stored transposed" not in out and "(24, 40, 33), C stored transposed" not in out
    assert "wrong where A is stored otherwise" in out and "steps through A as if its rows" in out


@pytest.mark.parametrize("kernel, words", [
    (_gemm_three_k_slices, "Only shapes whose K is more than 96 (3 K-slices of BLOCK_K = 32) are wrong"),
    (_gemm_k_up_to_64, "Only shapes whose K is more than 64 (2 K-slices of BLOCK_K = 32) are wrong"),
])
def test_masked_gemm_k_loop_that_stops_early_is_named(capsys, kernel, words):
    ok, out = _run(capsys, ex04.masked_gemm, kernel)
    assert not ok and words in out and "your loop over K stops early" in out and "ceil(K / BLOCK_K)" in out
    assert "(40, 33, 150): relative error" in out


@pytest.mark.parametrize("kernel, words", [
    (_gemm_without_precision, "`tl.dot(a, b)` names no input_precision, so on a GPU with tensor cores Triton "
                              "multiplies fp32 inputs in TF32"),
    (_gemm_tf32, '`tl.dot(a, b, acc, input_precision=\'tf32\')` asks for input_precision="tf32": on a GPU '
                 "with tensor cores it multiplies in TF32"),
    (_gemm_allow_tf32, "`tl.dot(a, b, acc, allow_tf32=True)` says allow_tf32=True, the old name of "
                       'input_precision="tf32"'),
])
def test_masked_gemm_without_exact_fp32_is_not_solved(capsys, kernel, words):
    ok, out = _run(capsys, ex04.masked_gemm, kernel)
    assert not ok
    assert f"right on all {len(_cases())} cases" in out  # the interpreter multiplies in fp32 regardless
    assert words in out
    assert ("TF32 keeps 10 of the 23 mantissa bits of each input: relative errors around 1e-3 instead of 1e-6 "
            "in exact fp32, far beyond check's fp32 tolerance of 1e-5") in out
    assert "on this CPU the results cannot show it; on a GPU they would" in out
    assert 'Write input_precision="ieee"' in out and "Right on every case here, but not solved yet" in out
    assert "Solved" not in out


def test_masked_gemm_with_fp16_sums_is_named(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_fp16_sums)
    assert not ok and f"right on 0 of {len(_cases())} cases" in out
    assert re.search(r"Wrong on every case by a little: relative errors from \de-0\d to \de-0\d", out), out
    assert "a type narrower than fp32" in out and "Your kernel names tl.float16" in out


@pytest.mark.parametrize("kernel, words", [
    (_gemm_k_mask_off_by_one, "(33, 17, 40): read 1 element past the end of A, which is 33 x 40"),
    (_gemm_b_mask_on_m, "(33, 17, 40): read 15 elements past the end of B, which is 40 x 17"),
])
def test_masked_gemm_other_mask_mistakes_fail(capsys, kernel, words):
    ok, out = _run(capsys, ex04.masked_gemm, kernel)
    assert not ok and words in out and "Solved" not in out


# How the check reads tl.dot's precision: a name for the string, a helper that multiplies, tf32x3.
PRECISION: tl.constexpr = tl.constexpr("ieee")


@triton.jit
def _tile_product(a, b, acc, precision: tl.constexpr):
    return tl.dot(a, b, acc, input_precision=precision)


@triton.jit
def _tile_product_default(a, b, acc):
    return tl.dot(a, b, acc)


@triton.jit
def _dots(a_ptr, BLOCK: tl.constexpr):
    x = tl.load(a_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :])
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    acc = tl.dot(x, x, acc, input_precision=PRECISION)
    acc = _tile_product(x, x, acc, "ieee")
    acc = _tile_product(x, x, acc, precision="tf32x3")
    acc = _tile_product_default(x, x, acc)
    acc = tl.dot(x, x, acc, "ieee")
    tl.store(a_ptr, acc)


def test_dot_precisions_reads_names_helpers_and_positions():
    found = dot_precisions(_dots)
    assert [p for _, p, _ in found] == ["ieee", "ieee", "tf32x3", "tf32", "ieee"]
    assert [how for _, _, how in found] == ["input_precision"] * 3 + ["default", "input_precision"]
    assert dot_precisions(ex04.masked_gemm_kernel) == [('tl.dot(a, b, acc, input_precision=\'ieee\')', "ieee",
                                                        "input_precision")]


def test_a_puzzle_without_an_answer_says_so(capsys):
    for puzzle in (ex04.vector_add, ex04.column_sums, ex04.masked_gemm):
        ok, out = _run(capsys, puzzle, None)
        assert not ok and "no kernel yet" in out


def _shown(solution) -> str:
    """What a puzzle's solution() shows: its source, or what its reveal button shows once pressed."""
    if hasattr(solution, "button"):
        import json

        solution.button.click()
        return json.dumps(solution.output.outputs)
    return solution.data


def test_solutions_show_the_course_kernels():
    assert "def vector_add_kernel" in _shown(ex04.vector_add.solution())
    assert "def column_sums_kernel" in _shown(ex04.column_sums.solution())
    assert "def masked_gemm_kernel" in _shown(ex04.masked_gemm.solution())
    assert "def grouped_order" in _shown(ex05.grouped_order.solution())


# ==== notebook 05: the grouped order ============================================================
def _order_starter(pid, num_pid_m, num_pid_n, group_m):
    # TODO 1: band = the band of group_m tile rows that program pid falls in
    #         (a band holds group_m * num_pid_n tiles); first_m = its first tile row
    # TODO 2: rows = the tile rows of this band: group_m, or fewer in a shorter last band
    # TODO 3: walk down the band's columns: pid_m = first_m + ..., pid_n = ...
    return None   # return pid_m, pid_n


def _order_learner(pid, num_pid_m, num_pid_n, group_m):
    band, within = divmod(pid, group_m * num_pid_n)
    first_m = band * group_m
    rows = min(num_pid_m - first_m, group_m)
    return first_m + within % rows, within // rows


def _order_divides_by_group_m(pid, num_pid_m, num_pid_n, group_m):
    band, within = divmod(pid, group_m * num_pid_n)
    rows = min(num_pid_m - band * group_m, group_m)
    return band * group_m + within % rows, within // group_m  # the short band's columns go wrong


def test_grouped_order_solutions_pass(capsys):
    for fn in (ex05.grouped_order.reference, _order_learner):
        ok, out = _run(capsys, ex05.grouped_order, fn)
        assert ok and "solved" in out and f"right on all {len(ex05._cases())} cases" in out


def test_grouped_order_starter_and_none(capsys):
    runs = [_run(capsys, ex05.grouped_order, _order_starter) for _ in range(2)]
    assert runs[0] == runs[1]
    ok, out = runs[0]
    assert not ok and "not solved yet: your function returns None" in out and "TODO" in out
    ok, out = _run(capsys, ex05.grouped_order, None)
    assert not ok and "no function yet" in out


def _order_rows_capped_at_8(pid, num_pid_m, num_pid_n, group_m):
    band, within = divmod(pid, group_m * num_pid_n)
    first_m = band * group_m
    rows = min(num_pid_m - first_m, group_m, 8)  # "a band is at most 8 rows", from the picture
    return first_m + within % rows, within // rows


def test_grouped_order_cases_include_groups_above_8():
    grids = ex05.ORDER_GRIDS
    assert any(g == 16 for _, _, g in grids)
    assert any(g > 8 and m > g and m % g for m, _, g in grids)  # a big group with a short last band


@pytest.mark.parametrize("fn, meaning", [
    (ex05._group_capped_at_8, "right while group_m <= 8; with larger groups (the course's TF32 configuration "
                              "uses 16) your bands stop at 8 tile rows"),
    (schedules.row_major_order, "this is row-major order"),
    (ex05._column_major, "column-major order over the whole grid"),
    (ex05._band_not_shortened, "the last band has fewer than group_m rows"),
    (ex05._column_bands, "bands of group_m tile columns"),
])
def test_grouped_order_likely_wrong_answers_are_diagnosed(capsys, fn, meaning):
    ok, out = _run(capsys, ex05.grouped_order, fn)
    assert not ok and meaning in out
    assert re.search(r"program \d+ of a \d+ x \d+ grid of tiles, group_m = \d+: yours gives \(\d+, \d+\), "
                     r"the model \(\d+, \d+\)", out), out


def test_grouped_order_right_only_for_small_groups_is_named(capsys):
    ok, out = _run(capsys, ex05.grouped_order, _order_rows_capped_at_8)
    assert not ok and re.search(r"not yet — wrong on \d+ of \d+ cases", out)
    assert "group_m = 12:" in out or "group_m = 16:" in out
    assert "Right wherever group_m <= 8, wrong only for larger groups" in out


def test_grouped_order_other_mistakes_are_counted(capsys):
    ok, out = _run(capsys, ex05.grouped_order, _order_divides_by_group_m)
    assert not ok and re.search(r"not yet — wrong on \d+ of \d+ cases", out)
    assert "Wrong only on programs of a shorter last band" in out
    ok, out = _run(capsys, ex05.grouped_order, lambda pid, m, n, g: (pid // 0, 0))
    assert not ok and "raised ZeroDivisionError" in out


# ==== the questions ============================================================================
QUESTIONS = [
    (ex04.fewest_passes_padded, 8),
    (ex04.passes_swizzled, 2),
    (ex05.grouped_blocks, 25),
    (ex05.tiles, 512),
    (ex05.programs_with_one_more, 116),
]


@pytest.mark.parametrize("question, want", QUESTIONS, ids=lambda q: getattr(q, "what", ""))
def test_question_expected_value(capsys, question, want):
    assert question.expected() == want
    assert question.check(want) and "is right" in capsys.readouterr().out
    assert not question.check(None) and "no answer yet" in capsys.readouterr().out


@pytest.mark.parametrize("question, want", QUESTIONS, ids=lambda q: getattr(q, "what", ""))
def test_question_wrong_answers_say_what_they_mean(capsys, question, want):
    assert len(question.wrong) >= 2
    values = []
    for value, meaning in question.wrong:
        v = value(want) if callable(value) else value
        assert v != want, meaning
        values.append(v)
        assert not question.check(v)
        out = " ".join(capsys.readouterr().out.split())
        assert " ".join(meaning.split()) in out, (v, out)
    assert len(set(values)) == len(values), f"two wrong answers with one value: {values}"
    assert not question.check(want + 1000) and "Hint:" in capsys.readouterr().out


# ==== the starters above are the notebooks' =====================================================
@pytest.mark.parametrize("notebook, cell, starter, name", [
    ("04_coalescing_and_triton", "x4a1c0a01", _add_starter, "my_add_kernel"),
    ("deep_dives/triton_lab", "c22b-3f7e0a61", _sums_starter, "my_column_sums_kernel"),
    ("04_coalescing_and_triton", "x4a1c0c01", _gemm_starter, "my_gemm_kernel"),
    ("05_triton_fast_kernel", "x5b2d0a01", _order_starter, "my_grouped_order"),
])
def test_the_starters_tested_here_are_the_notebooks(notebook, cell, starter, name):
    import inspect

    import nbformat

    from course_lib.notebooks import NOTEBOOK_DIR

    nb = nbformat.read(NOTEBOOK_DIR / f"{notebook}.ipynb", as_version=4)
    source = next(c.source for c in nb.cells if c.get("id") == cell)
    fn = getattr(starter, "fn", starter)  # a Triton kernel's Python function
    assert source.strip() == inspect.getsource(fn).replace(f"def {fn.__name__}(", f"def {name}(").strip()


def test_grouped_order_returned_the_wrong_way_round_is_named(capsys):
    from course_lib.exercises import triton_fast_kernel

    assert not triton_fast_kernel.grouped_order.check(lambda p, m, n, g: schedules.grouped_order(p, m, n, g)[::-1])
    assert "returned the wrong way round" in " ".join(capsys.readouterr().out.split())


# ==== kernels with a block size written as a number, or one block's name for another =============
# (a fresh tester's: each was solved while every case launched with the puzzles' own blocks)
@triton.jit
def _add_block_typed_as_128(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * 128 + tl.arange(0, 128)  # the puzzle's BLOCK, written as a number
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _sums_rows_step_32(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, 32):  # BLOCK_R written as a number
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_drop_a_row_when_tall(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr,
                               BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    last = R - 1 if R > 4000 else R  # stands for any bug that loses one row of a tall x
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < last) & (cols[None, :] < C)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _gemm_k_steps_by_block_m(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                             stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_M):  # BLOCK_M where BLOCK_K belongs
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def test_a_vector_add_with_its_block_written_as_a_number_is_refused(capsys):
    ok, out = _run(capsys, ex04.vector_add, _add_block_typed_as_128)
    assert not ok
    assert f"Right when the launch's BLOCK is {ex04.VECTOR_PUZZLE_BLOCK}, wrong when it is larger" in out
    assert "n = 1000, launched with BLOCK = 256: never wrote" in out
    assert f"right on {len(ex04.VECTOR_SIZES)} of {len(ex04.VECTOR_CASES)} sizes" in out


def test_column_sums_with_a_tile_written_as_a_number_are_refused(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_rows_step_32)
    assert not ok
    assert "Right with the puzzle's tiles" in out and "written as a number" in out
    for R, C, block_r, block_c in ex04.COLUMN_SUMS_OTHER_TILES:
        assert f"x {R} x {C}, launched with BLOCK_R = {block_r}, BLOCK_C = {block_c}:" in out


def test_column_sums_that_lose_one_row_of_a_tall_x_are_refused_in_every_column(capsys):
    """The bound follows the puzzle's order of additions (at most BLOCK_R - 1 + ceil(R / BLOCK_R) per
    element), not any order at all: a bound of R - 1 roundings let a 4099-row column that lost a row
    pass at some seeds."""
    ok, out = _run(capsys, ex04.column_sums, _sums_drop_a_row_when_tall)
    assert not ok and "x 4099 x 3: 3 of 3 elements wrong" in out
    tall = ex04.SumsCase(4099, 3)
    x = torch.randn(4099, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    bound = ex04._column_sums_bound(tall, x.sum(dim=0), x)
    assert bool((bound < 0.05).all()), bound  # a lost row of N(0, 1) values is larger at all but ~4 % of rows


def test_a_gemm_with_one_block_name_for_another_is_refused(capsys):
    ok, out = _run(capsys, ex04.masked_gemm, _gemm_k_steps_by_block_m)
    assert not ok
    assert f"Right when BLOCK_M = BLOCK_N = BLOCK_K = {ex04.GEMM_PUZZLE_BLOCK}, wrong where the launch makes them differ" in out
    assert "launched with BLOCK_M, BLOCK_N, BLOCK_K = 32, 16, 64" in out


# ==== wrong answers a fresh adversarial learner found (2026-12-05) =================================
@triton.jit
def _add_atomic_unmasked(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)
    tl.atomic_add(out_ptr + offsets, tl.load(y_ptr + offsets, mask=mask, other=0.0))  # no mask: past out


@triton.jit
def _add_with_break(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for i in range(0, 4):
        if i > 0:
            break  # the interpreter runs it; Triton's compiler has no break
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


@triton.jit
def _sums_acc_python_float(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr,
                           BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = 0.0  # a float, then a block: the compiler refuses the change of type in the loop
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        acc += tl.sum(tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0),
                      axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _sums_by_dot(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((16, BLOCK_C), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc = tl.dot(tl.full((16, BLOCK_R), 1.0, tl.float32), tile, acc)  # TF32 on a GPU
    tl.store(out_ptr + cols, tl.sum(acc, axis=0) / 16, mask=cols < C)


def test_an_unmasked_atomic_past_out_is_seen(capsys):
    ok, out = _run(capsys, ex04.vector_add, _add_atomic_unmasked)
    assert not ok and "past the end of out" in out and "tl.atomic_" in out


def test_what_the_interpreter_runs_but_a_gpu_compiler_refuses_is_not_solved(capsys):
    """The interpreter runs `break` and an accumulator that turns from a float into a block; the
    check gives the kernel to Triton's compiler front end and says what it refuses. The course's own
    column sums (tl.sum, a @triton.jit function of the language) still pass after those ran."""
    ok, out = _run(capsys, ex04.vector_add, _add_with_break)
    assert not ok and "right on all" in out and "Break" in out and "no break in a kernel" in out
    ok, out = _run(capsys, ex04.column_sums, _sums_acc_python_float)
    assert not ok and "Loop-carried variable acc" in out and "tl.zeros" in out
    ok, out = _run(capsys, ex04.column_sums, ex04.column_sums_kernel)
    assert ok, out


def test_column_sums_by_a_dot_must_ask_for_exact_fp32(capsys):
    ok, out = _run(capsys, ex04.column_sums, _sums_by_dot)
    assert not ok and "TF32" in out and 'input_precision="ieee"' in out and "this puzzle must compute" in out


def test_input_precision_is_read_in_any_case_as_triton_reads_it():
    @triton.jit
    def k(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
        r = tl.arange(0, N)
        a = tl.load(a_ptr + r[:, None] * N + r[None, :])
        tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, a, input_precision="IEEE"))

    assert [p for _, p, _ in dot_precisions(k)] == ["ieee"]


@pytest.mark.parametrize("wrap", [lambda p: tuple(float(v) for v in p), lambda p: torch.tensor(p, dtype=torch.float64),
                                  lambda p: (p[0], bool(p[1])) if p[1] in (0, 1) else p],
                         ids=["floats", "float tensor", "bool for 0 or 1"])
def test_grouped_order_takes_integers_only(capsys, wrap):
    """Whole floats and bools compare equal to the model's ints, but no Triton kernel indexes a tile
    with them."""
    ok, out = _run(capsys, ex05.grouped_order, lambda *case: wrap(schedules.grouped_order(*case)))
    assert not ok and "tile indices are integers" in out and "//" in out


# Right answers in styles the compiler check must not refuse (a fresh tester's, 2026-12-05): tensor
# methods (x.sum), helpers reached through a module, a precision named by a local constexpr.
@triton.jit
def _sums_by_method(x_ptr, out_ptr, R, C, stride_xr, stride_xc, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        acc += tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0).sum(axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < C)


@triton.jit
def _add_through_a_module(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, c04.vector_add_module_helper(tl.load(x_ptr + offsets, mask=mask),
                                                             tl.load(y_ptr + offsets, mask=mask)), mask=mask)


def test_right_kernels_in_other_styles_pass_the_compiler_check(capsys, monkeypatch):
    ok, out = _run(capsys, ex04.column_sums, _sums_by_method)
    assert ok, out

    @triton.jit
    def add(a, b):
        return a + b

    monkeypatch.setattr(c04, "vector_add_module_helper", add, raising=False)  # a helper in another module
    ok, out = _run(capsys, ex04.vector_add, _add_through_a_module)
    assert ok, out
    ok, out = _run(capsys, ex04.column_sums, _sums_by_method)  # again, after those ran
    assert ok, out


def test_a_local_constexpr_names_the_precision():
    @triton.jit
    def k(a_ptr, c_ptr, N: tl.constexpr):
        P: tl.constexpr = "ieee"
        r = tl.arange(0, N)
        a = tl.load(a_ptr + r[:, None] * N + r[None, :])
        tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, a, input_precision=P))

    assert [p for _, p, _ in dot_precisions(k)] == ["ieee"]
