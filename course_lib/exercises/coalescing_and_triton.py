"""Exercises of notebook ``04_coalescing_and_triton``: three Triton kernels written by you, a ladder
from the vector add through a loop over tiles (the sums of a matrix's rows) to the masked GEMM with
its K tail; and the bank passes of the article's transposed kernel, padded or swizzled (asked in
``deep_dives/triton_lab``, section 6, which imports this module too).

The first two puzzles' solutions are the course's own kernels (``c04.vector_add_kernel``,
``c04.row_sums_kernel``); the masked GEMM's, :func:`masked_gemm_kernel`, is only a solution (the
course's tiled GEMM is ``c04.tiled_matmul_kernel``), so it lives here with the launch that makes a
learner's kernel a GEMM, :func:`as_gemm`."""

from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from course_lib import dtypes
from course_lib.gemm import new_array, prepare
from course_lib.exercises import Question
from course_lib.exercises._triton import (
    COLUMN_SLICE,
    ROW_MAJOR,
    TRANSPOSED,
    GemmCase,
    TritonGemmPuzzle,
    TritonPuzzle,
    fails_every_time,
    fails_exactly_above,
    fails_exactly_where,
    fails_only_strided,
    fails_only_where,
    layout_text,
)
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.model import banks

FP32_UNIT_ROUNDOFF = dtypes.FP32.unit_roundoff

# ---- puzzle 1: the vector add -------------------------------------------------------------------
# Small blocks, so that the hidden sizes span many programs: 1, sizes below one block, one off each
# side of it, whole multiples of it, and a few larger ones that are multiples of nothing.
VECTOR_PUZZLE_BLOCK = 128
VECTOR_SIZES = (1, 100, 127, 128, 129, 256, 385, 1000, 5000)

vector_add = TritonPuzzle(
    title="Your vector add",
    launch=lambda kernel, x, y: c04.vector_add(x, y, block=VECTOR_PUZZLE_BLOCK, kernel=kernel),
    inputs=lambda n, gen: {"x": torch.randn(n, generator=gen), "y": torch.randn(n, generator=gen)},
    expected=lambda x, y: x + y,
    # fp32 rounds x + y once: within one unit roundoff of the exact sum.
    bound=lambda ref, x, y: FP32_UNIT_ROUNDOFF * ref.abs(),
    cases=VECTOR_SIZES,
    show=lambda n: f"n = {n}",
    diagnoses=[
        fails_every_time(
            lambda found: found.one_past_the_end,
            "Off by one: every time one element past the end. The last valid offset is n - 1, so the "
            "mask must be false from offset n on."),
        fails_every_time(
            lambda found: found.never_written == 1,
            "Off by one the other way: on every size the last element, offset n - 1, is never written. "
            "The mask must be true for every offset below n: offsets < n."),
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
# The kernel takes x's strides, so x also comes stored transposed and as a column slice of a wider
# matrix (R, C, layout): a kernel that steps through x as if its rows were packed one after another
# is right on every row-major x and wrong on these.
ROW_SUMS_STRIDED = ((40, 100, TRANSPOSED), (33, 7, TRANSPOSED), (17, 33, COLUMN_SLICE), (5, 64, COLUMN_SLICE))


def _show_row_sums_case(case) -> str:
    R, C, *layout = case
    return f"x {R} x {C}" + (layout_text("", R, C, layout[0]) if layout else "")


def _row_sums_bound(ref: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """fp32 sums of C terms, in any order: within (C - 1) unit roundoffs of the sum of |x| (Higham,
    "Accuracy and Stability of Numerical Algorithms", sec. 4.2), plus the rounding of the result."""
    C = x.shape[1]
    return FP32_UNIT_ROUNDOFF * (ref.abs() + max(C - 1, 1) * x.abs().sum(dim=1))


row_sums = TritonPuzzle(
    title="Your row sums",
    launch=lambda kernel, x: c04.row_sums(x, kernel, block_r=c04.ROW_BLOCK, block_c=c04.COL_BLOCK),
    inputs=lambda case, gen: {"x": torch.randn(case[0], case[1], generator=gen)},
    expected=lambda x: x.sum(dim=1),
    bound=_row_sums_bound,
    cases=ROW_SUMS_SHAPES + ROW_SUMS_STRIDED,
    show=_show_row_sums_case,
    unit="shapes",
    layouts=lambda case: {"x": case[2]} if len(case) > 2 else {},
    diagnoses=[
        fails_only_where(
            lambda s: len(s) > 2,
            "Right on every row-major x, wrong where x is stored transposed or is a column slice of a "
            "wider matrix: your kernel steps through x as if its rows were packed one after another. "
            "Element (r, c) of x lies at x_ptr + r * stride_xr + c * stride_xc, whatever the layout: "
            "use both strides."),
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
# BLOCK_M = BLOCK_N = BLOCK_K of the puzzle's launch: the smallest tile tl.dot takes is 16, and 32
# leaves K tails and edges of C at every awkward shape the check runs.
GEMM_PUZZLE_BLOCK = 32


@triton.jit
def masked_gemm_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions: A is M x K, B is K x N, C is M x N
    M, N, K,
    # Strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """The masked GEMM, reference solution: masks at every edge, and a K loop that also covers the
    last, partial K-slice (the K tail)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # ceil(K / BLOCK_K) blocks, not K // BLOCK_K
        k = kb * BLOCK_K + ks
        # Every edge a block can cross is masked: rows past M, columns past N, and k past K in the
        # last slice; masked-off elements read as 0.0, which adds nothing to the sums.
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # exact fp32: checked against fp32's tolerance
    # Rows past M and columns past N of the last tiles are not written: they are outside C.
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def as_gemm(kernel: Any, c_layout: str = ROW_MAJOR, block: int = GEMM_PUZZLE_BLOCK) -> Callable[[object, object], object]:
    """Wrap a kernel with the signature of :func:`masked_gemm_kernel` (a learner's, or the solution)
    as an fp32 GEMM ``fn(a, b) -> c`` that ``course_lib.check`` can test: one program per
    ``block`` x ``block`` tile of C. A and B go in with the strides they have; C is row-major, or,
    with ``c_layout=TRANSPOSED``, the transposed view of a row-major N x M array."""
    def gemm(a: object, b: object) -> object:
        ops = prepare(a, b, stage="exercise", dtypes=("fp32",))
        if c_layout == TRANSPOSED:
            c = new_array((ops.N, ops.M), torch.float32, ops.a.device).t()
        else:
            c = new_array((ops.M, ops.N), torch.float32, ops.a.device)
        grid = (triton.cdiv(ops.M, block), triton.cdiv(ops.N, block))
        kernel[grid](ops.a, ops.b, c, ops.M, ops.N, ops.K, *ops.a.stride(), *ops.b.stride(), *c.stride(),
                     BLOCK_M=block, BLOCK_N=block, BLOCK_K=block)
        return ops.give_back(c)

    gemm.__name__ = getattr(kernel, "__name__", "kernel")  # what check's messages call it
    return gemm


# check's awkward shapes (1 x 1 x 1, sizes off every tile, one row, one column, K = 1), plus shapes
# whose K is a whole number of K-slices, and two whose M and N are whole tiles: a kernel wrong only
# on the K tail, or only at the edges of C, fails on its own set of shapes. Two span four K-slices or
# more (a K loop that stops after a fixed number of slices fails there). In GEMM_STRIDED, A and B are
# somewhere stored transposed and somewhere column slices of wider matrices, and C somewhere stored
# transposed: the kernel takes their strides, and must follow them.
GEMM_SHAPES = ((1, 1, 1), (3, 5, 7), (33, 17, 40), (1, 45, 19), (37, 1, 21), (9, 11, 1),
               (32, 32, 64), (20, 50, 96), (64, 32, 33), (40, 24, 32), (16, 48, 128), (40, 33, 150))
GEMM_STRIDED = (GemmCase(33, 17, 40, a=TRANSPOSED), GemmCase(20, 50, 96, b=TRANSPOSED),
                GemmCase(37, 21, 45, a=COLUMN_SLICE, b=COLUMN_SLICE), GemmCase(24, 40, 33, c=TRANSPOSED),
                GemmCase(17, 40, 70, a=COLUMN_SLICE, b=TRANSPOSED, c=TRANSPOSED))


def _strides_note(operands: list[str]) -> str:
    names = " and ".join(operands) if len(operands) < 3 else "A, B and C"
    return (f"Right wherever A, B and C are row-major; wrong where {names} {'is' if len(operands) == 1 else 'are'} "
            "stored otherwise (transposed, or a column slice of a wider matrix): your kernel steps through "
            f"{names} as if {'its' if len(operands) == 1 else 'their'} rows were packed one after another. "
            "Element (i, k) of A lies at a_ptr + i * stride_am + k * stride_ak, and B and C likewise: use "
            "the strides, whatever the layout.")


def _k_stops_early_note(k: int) -> str:
    slices = -(-k // GEMM_PUZZLE_BLOCK)
    note = (f"Only shapes whose K is more than {k} ({slices} K-slice{'s' if slices > 1 else ''} of "
            f"BLOCK_K = {GEMM_PUZZLE_BLOCK}) are wrong: your loop over K stops early. It must "
            "take every K-slice, ceil(K / BLOCK_K) of them, however many that is.")
    if slices == 1:  # right on one slice only: a loop that stops, or a sum that never builds up
        note += (" Or each slice's product replaces acc instead of adding to it: acc = tl.dot(a, b, acc, ...) "
                 "adds the product to acc; tl.dot(a, b) alone is this slice's product only.")
    return note


masked_gemm = TritonGemmPuzzle(
    title="Your masked GEMM",
    launch=as_gemm,
    cases=GEMM_SHAPES + GEMM_STRIDED,
    precision="ieee",
    diagnoses=[
        fails_only_strided(_strides_note),
        fails_exactly_above(
            lambda case: case[2],
            lambda k: _k_stops_early_note(k)),
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
    reveal=masked_gemm_kernel,
)


# ---- deep_dives/triton_lab's exercise: the bank passes of the transposed kernel, padded or swizzled
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
        (2, "2 passes would need the 16 distinct lanes to start in banks spread over all 32. Work out "
         "lane t's starting word, 4t x pitch, for a pitch of 4p words: which banks can it fall in?"),
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
