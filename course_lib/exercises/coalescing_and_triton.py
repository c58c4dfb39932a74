"""Exercises of notebook ``04_coalescing_and_triton``: three Triton kernels written by you, a ladder
from the vector add through a loop over tiles (the sums of a matrix's rows) to the masked GEMM with
its K tail; and the bank passes of the article's transposed kernel, padded or swizzled."""

from __future__ import annotations

import torch

from course_lib.exercises import Question
from course_lib.exercises._triton import (
    TritonGemmPuzzle,
    TritonPuzzle,
    fails_every_time_with,
    fails_exactly_where,
    fails_only_where,
)
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.kernels.coalescing_and_triton.exercises import EXERCISE_BLOCK
from course_lib.viz import banks

FP32_UNIT_ROUNDOFF = 2.0**-24

# ---- puzzle 1: the vector add -------------------------------------------------------------------
# Small blocks, so that the hidden sizes span many programs: 1, sizes below one block, one off each
# side of it, whole multiples of it, and a few larger ones that are multiples of nothing.
VECTOR_PUZZLE_BLOCK = 128
VECTOR_SIZES = (1, 100, 127, 128, 129, 256, 385, 1000, 5000)

vector_add = TritonPuzzle(
    title="Your vector add",
    launch=lambda kernel, x, y: c04.vector_add(x, y, block=VECTOR_PUZZLE_BLOCK, kernel=kernel),
    inputs=lambda n, gen: {"x": torch.randn(n, generator=gen), "y": torch.randn(n, generator=gen)},
    reference=lambda x, y: x + y,
    # fp32 rounds x + y once: within one unit roundoff of the exact sum.
    bound=lambda ref, x, y: FP32_UNIT_ROUNDOFF * ref.abs(),
    cases=VECTOR_SIZES,
    show=lambda n: f"n = {n}",
    diagnoses=[
        fails_every_time_with(
            ("read 1 element past the end", "wrote 1 element outside"),  # the interpreter; a GPU
            "Off by one: every time one element past the end. The last valid offset is n - 1, so the "
            "mask must be false from offset n on."),
        fails_exactly_where(
            lambda n: n % VECTOR_PUZZLE_BLOCK != 0,
            f"Every size it gets wrong is not a multiple of BLOCK = {VECTOR_PUZZLE_BLOCK}: the last "
            "program's block hangs over the end of the vectors, and only a mask on the loads and the "
            "store keeps it inside."),
        fails_only_where(
            lambda n: n > VECTOR_PUZZLE_BLOCK,
            f"Only sizes of more than one block (BLOCK = {VECTOR_PUZZLE_BLOCK}) are wrong: the programs "
            "after the first do not find their own elements. Program pid owns the BLOCK elements from "
            "pid * BLOCK on."),
    ],
    reveal=c04.vector_add_kernel,
)

# ---- puzzle 2: a loop over tiles - the sums of a matrix's rows ----------------------------------
# Shapes (R, C): columns below one tile, exactly one and several tiles, one column past a tile, and
# row counts on both sides of the rows per program. Each bug below fails on its own set of them.
ROW_SUMS_SHAPES = ((1, 1), (3, 31), (5, 32), (16, 64), (17, 33), (40, 100), (2, 257), (64, 96), (33, 7))


def _row_sums_bound(ref: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """fp32 sums of C terms, in any order: within (C - 1) unit roundoffs of the sum of |x| (Higham,
    "Accuracy and Stability of Numerical Algorithms", sec. 4.2), plus the rounding of the result."""
    C = x.shape[1]
    return FP32_UNIT_ROUNDOFF * (ref.abs() + max(C - 1, 1) * x.abs().sum(dim=1))


row_sums = TritonPuzzle(
    title="Your row sums",
    launch=lambda kernel, x: c04.row_sums(x, kernel, block_r=c04.ROW_BLOCK, block_c=c04.COL_BLOCK),
    inputs=lambda shape, gen: {"x": torch.randn(*shape, generator=gen)},
    reference=lambda x: x.sum(dim=1),
    bound=_row_sums_bound,
    cases=ROW_SUMS_SHAPES,
    show=lambda shape: f"x {shape[0]} x {shape[1]}",
    unit="shapes",
    diagnoses=[
        fails_exactly_where(
            lambda s: s[1] % c04.COL_BLOCK != 0,
            f"Every shape it gets wrong has a column count C that is not a multiple of BLOCK_C = "
            f"{c04.COL_BLOCK}: the last tile of each row, the tail, is left out or read past the row's "
            "end. The loop must reach it, and its mask must cut the columns at C."),
        fails_only_where(
            lambda s: s[1] > c04.COL_BLOCK,
            f"Only shapes wider than one tile (BLOCK_C = {c04.COL_BLOCK} columns) are wrong: every tile "
            "of a row must be added to acc, not only one of them."),
        fails_exactly_where(
            lambda s: s[0] % c04.ROW_BLOCK != 0,
            f"Every shape it gets wrong has a row count R that is not a multiple of BLOCK_R = "
            f"{c04.ROW_BLOCK}: the last program's rows hang over the end of x and of out, and the "
            "masks of the loads and of the store must cut them at R."),
        fails_only_where(
            lambda s: s[0] > c04.ROW_BLOCK,
            f"Only matrices of more than one block of rows (BLOCK_R = {c04.ROW_BLOCK}) are wrong: "
            "program pid owns the rows from pid * BLOCK_R on."),
    ],
    reveal=c04.row_sums_kernel,
)

# ---- puzzle 3: the masked GEMM, with its K tail ------------------------------------------------
GEMM_PUZZLE_BLOCK = EXERCISE_BLOCK  # BLOCK_M = BLOCK_N = BLOCK_K of c04.exercise_gemm's launch
# check's awkward shapes (1 x 1 x 1, sizes off every tile, one row, one column, K = 1), plus shapes
# whose K is a whole number of K-slices, and two whose M and N are whole tiles: a kernel wrong only
# on the K tail, or only at the edges of C, fails on its own set of shapes.
GEMM_SHAPES = ((1, 1, 1), (3, 5, 7), (33, 17, 40), (1, 45, 19), (37, 1, 21), (9, 11, 1),
               (32, 32, 64), (20, 50, 96), (64, 32, 33), (40, 24, 32))

masked_gemm = TritonGemmPuzzle(
    title="Your masked GEMM",
    launch=lambda kernel: c04.exercise_gemm(kernel, block=GEMM_PUZZLE_BLOCK),
    shapes=GEMM_SHAPES,
    diagnoses=[
        fails_exactly_where(
            lambda s: s[2] % GEMM_PUZZLE_BLOCK != 0,
            f"Every shape it gets wrong has a K that is not a multiple of BLOCK_K = {GEMM_PUZZLE_BLOCK}: "
            "the K tail. The loop must also take the last, partial K-slice, and the masks must cut "
            "A's columns and B's rows at K."),
        fails_exactly_where(
            lambda s: s[0] % GEMM_PUZZLE_BLOCK != 0 or s[1] % GEMM_PUZZLE_BLOCK != 0,
            f"Every shape it gets wrong has an M or an N that is not a multiple of the tile "
            f"({GEMM_PUZZLE_BLOCK}): the edges of C. Rows past M and columns past N must be masked off "
            "in the loads and in the store."),
    ],
    reveal=c04.exercise_tail_solution_kernel,
)


# ---- exercise: the bank passes of the transposed kernel, padded or swizzled ---------------------
PADDED_PITCHES = range(64, 129, 4)  # words per stored row; multiples of 4 keep the 16-byte loads aligned


def _passes(**kw) -> int:
    return banks.bank_access(*c04.article_b_tile_addresses("transposed", **kw)).wavefronts


fewest_passes_padded = Question(
    what="(a) fewest passes",
    expected=lambda: min(_passes(pitch=p) for p in PADDED_PITCHES),
    hint="lane t's column starts 4t stored rows in: with a pitch of 4p words, in which banks can it start?",
    wrong=[
        (lambda want: _passes(pitch=64), "that is the unpadded pitch of 64 words, and every pitch that is "
         "a multiple of 8 words; try a pitch that is a multiple of 4 but not of 8."),
        (2, "2 passes would need the lanes to start in banks all over the 32; with a pitch that is a "
         "multiple of 4 words they only start in bank 0 or bank 16."),
        (1, "one pass delivers 128 bytes (32 banks of 4 bytes), and the warp's 16 distinct lanes load "
         "16 bytes each: 256 bytes need at least 2 passes."),
    ],
)

passes_swizzled = Question(
    what="(b) passes with the swizzle",
    expected=lambda: _passes(swizzle=True),
    hint="the XOR moves lane t's chunk by (t mod 8) chunks of 4 banks",
    wrong=[
        (lambda want: _passes(pitch=64), "that is the layout without the swizzle: the XOR moves each "
         "lane's 16 bytes to another group of 4 banks."),
        (lambda want: min(_passes(pitch=p) for p in PADDED_PITCHES), "that is the best padding; the "
         "swizzle spreads the lanes further."),
        (1, "one pass delivers 128 bytes, and the warp's load is 256 bytes: at least 2 passes."),
    ],
)
