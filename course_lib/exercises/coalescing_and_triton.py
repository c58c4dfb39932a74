"""Exercises of notebook ``04_coalescing_and_triton``: two Triton kernels written by you, the vector
add and the masked GEMM with its K tail (the loop over tiles between them, the sums of a matrix's
rows, is 04's worked example); and of ``deep_dives/triton_lab``, which imports this module too: that
loop written by you, turned around (the sums of a matrix's columns, section 7), and the bank passes
of the article's transposed kernel, padded or swizzled (section 6).

The vector add's solution is the course's own kernel (``c04.vector_add_kernel``); the column sums'
and the masked GEMM's, :func:`column_sums_kernel` and :func:`masked_gemm_kernel`, are only solutions
(the course's nearest kernels are ``c04.row_sums_kernel`` and ``c04.tiled_matmul_kernel``), so they
live here, the GEMM's with the launch that makes a learner's kernel a GEMM, :func:`as_gemm`."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import triton
import triton.language as tl

from course_lib import dtypes
from course_lib.gemm import new_array, prepare
from course_lib.exercises import NumberQuestion
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
# side of it, whole multiples of it, and a few larger ones that are multiples of nothing. Two sizes
# are also launched with larger blocks: a kernel with 128 written where BLOCK belongs leaves most of
# each larger block unwritten (a smaller block would not show it: its programs' blocks overlap).
VECTOR_PUZZLE_BLOCK = 128


class VectorCase(NamedTuple):
    """A hidden case of the vector add: the length, and the launch's BLOCK."""

    n: int
    block: int = VECTOR_PUZZLE_BLOCK


VECTOR_SIZES = (1, 100, 127, 128, 129, 256, 385, 1000, 5000)
VECTOR_CASES = tuple(VectorCase(n) for n in VECTOR_SIZES) + (VectorCase(1000, 256), VectorCase(5000, 512))


def _show_vector_case(case: VectorCase) -> str:
    return f"n = {case.n}" + (f", launched with BLOCK = {case.block}" if case.block != VECTOR_PUZZLE_BLOCK else "")


vector_add = TritonPuzzle(
    title="Your vector add",
    launch=lambda kernel, x, y, block=VECTOR_PUZZLE_BLOCK: c04.vector_add(x, y, block=block, kernel=kernel),
    launch_options=lambda case: {"block": case.block},
    inputs=lambda case, gen: {"x": torch.randn(case.n, generator=gen), "y": torch.randn(case.n, generator=gen)},
    expected=lambda x, y: x + y,
    # fp32 rounds x + y once: within one unit roundoff of the exact sum.
    bound=lambda case, ref, x, y: FP32_UNIT_ROUNDOFF * ref.abs(),
    cases=VECTOR_CASES,
    show=_show_vector_case,
    diagnoses=[
        fails_only_where(
            lambda case: case.block != VECTOR_PUZZLE_BLOCK,
            f"Right when the launch's BLOCK is {VECTOR_PUZZLE_BLOCK}, wrong when it is larger: your kernel has "
            "the block size written as a number. Use the meta-parameter BLOCK wherever the block size "
            "appears (pid * BLOCK, tl.arange(0, BLOCK)): the wrapper chooses it."),
        fails_every_time(
            lambda found: found.one_past_the_end,
            "Off by one: every time one element past the end. The last valid offset is n - 1, so the "
            "mask must be false from offset n on."),
        fails_every_time(
            lambda found: found.never_written == 1,
            "Off by one the other way: on every size the last element, offset n - 1, is never written. "
            "The mask must be true for every offset below n: offsets < n."),
        fails_exactly_where(
            lambda case: case.n % case.block != 0,
            f"Every size it gets wrong is not a multiple of BLOCK (mostly {VECTOR_PUZZLE_BLOCK}): the last "
            "program's block hangs over the end of the vectors, and only a mask on the loads and the "
            "store (and on any tl.atomic_ call) keeps it inside."),
        fails_only_where(
            lambda case: case.n > case.block,
            f"Only sizes of more than one block (BLOCK = {VECTOR_PUZZLE_BLOCK}, or the larger block named) "
            "are wrong: the programs after the first do not find their own elements. Program pid owns the "
            "BLOCK elements from pid * BLOCK on."),
    ],
    reveal=c04.vector_add_kernel,
)

# ---- puzzle 2 (deep_dives/triton_lab, optional): a loop over tiles - the sums of a matrix's columns
# Notebook 04 shows the row sums (c04.row_sums_kernel) as a worked example; the learner writes the
# same loop turned around: one program owns COLUMN_SUMS_BLOCK_C columns and walks down them in tiles
# of COLUMN_SUMS_BLOCK_R rows. The launch is the row sums' with the grid over the columns.
COLUMN_SUMS_BLOCK_R = 32  # rows per tile: the loop takes ceil(R / BLOCK_R) steps down a column
COLUMN_SUMS_BLOCK_C = 16  # columns per program
# Shapes (R, C): rows below one tile, exactly one and several tiles, one row past a tile, and column
# counts on both sides of the columns per program. Each bug below fails on its own set of them.
# (4099, 3) is taller than any one block a kernel might load whole: a kernel without the loop fails there.
COLUMN_SUMS_SHAPES = ((1, 1), (31, 3), (32, 5), (64, 16), (33, 17), (100, 40), (257, 2), (96, 64), (7, 33),
                      (4099, 3))
# The kernel takes x's strides, so x also comes stored transposed and as a column slice of a wider
# matrix (R, C, layout): a kernel that steps through x as if its rows were packed one after another
# is right on every row-major x and wrong on these.
COLUMN_SUMS_STRIDED = ((100, 40, TRANSPOSED), (7, 33, TRANSPOSED), (33, 17, COLUMN_SLICE), (64, 5, COLUMN_SLICE))
# Two shapes are also launched with other tiles (BLOCK_R, BLOCK_C): a kernel with 32 or 16 written
# where BLOCK_R or BLOCK_C belongs, or one name where the other belongs, is wrong there. Both tiles
# leave a tail in R and in C, as (257, 40) and (100, 33) do with the puzzle's own.
COLUMN_SUMS_OTHER_TILES = ((257, 40, 64, 32), (100, 33, 16, 8))


class SumsCase(NamedTuple):
    """A hidden case of the column sums: x's shape and layout, and the launch's tile."""

    R: int
    C: int
    layout: str = ROW_MAJOR
    block_r: int = COLUMN_SUMS_BLOCK_R
    block_c: int = COLUMN_SUMS_BLOCK_C

    @property
    def other_tile(self) -> bool:
        return (self.block_r, self.block_c) != (COLUMN_SUMS_BLOCK_R, COLUMN_SUMS_BLOCK_C)


COLUMN_SUMS_CASES = (tuple(SumsCase(*s) for s in COLUMN_SUMS_SHAPES + COLUMN_SUMS_STRIDED)
                     + tuple(SumsCase(R, C, ROW_MAJOR, br, bc) for R, C, br, bc in COLUMN_SUMS_OTHER_TILES))

@triton.jit
def column_sums_kernel(
    # Pointers: x is the R x C matrix, out the C sums
    x_ptr, out_ptr,
    # Matrix dimensions
    R, C,
    # Strides of x: elements to step to the next row (first) or the next column (second)
    stride_xr, stride_xc,
    # Meta-parameters
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """The column sums, reference solution: c04.row_sums_kernel's loop turned around."""
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)  # the columns this program sums
    acc = tl.zeros((BLOCK_C,), dtype=tl.float32)                # one fp32 sum per column
    for r0 in range(0, R, BLOCK_R):                            # ceil(R / BLOCK_R) tiles, the last partial
        rows = r0 + tl.arange(0, BLOCK_R)
        # The tail mask: the last tile's rows past R are not read; other=0.0 adds nothing.
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)                            # one partial sum per column
    tl.store(out_ptr + cols, acc, mask=cols < C)


def _column_sums(kernel: Any, x: torch.Tensor, block_r: int = COLUMN_SUMS_BLOCK_R,
                 block_c: int = COLUMN_SUMS_BLOCK_C) -> torch.Tensor:
    """Launch ``kernel`` (the signature of :func:`column_sums_kernel`) on fp32 ``x``: one program per
    ``block_c`` columns, tiles of ``block_r`` rows; ``out`` is NaN until the kernel writes it."""
    R, C = x.shape
    out = new_array((C,), x.dtype, x.device, name="out")
    kernel[(triton.cdiv(C, block_c),)](x, out, R, C, x.stride(0), x.stride(1), BLOCK_R=block_r, BLOCK_C=block_c)
    return out


def _show_sums_case(case: SumsCase) -> str:
    tile = f", launched with BLOCK_R = {case.block_r}, BLOCK_C = {case.block_c}" if case.other_tile else ""
    return f"x {case.R} x {case.C}" + layout_text("", case.R, case.C, case.layout) + tile


def _column_sums_bound(case: SumsCase, ref: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The rounding of fp32 sums added as the puzzle's loop adds them: whatever the order, an element
    goes through at most BLOCK_R - 1 additions inside its tile's tl.sum and ceil(R / BLOCK_R) into acc,
    d in all, so each column is within gamma_d = d u / (1 - d u) of the sum of its |x| (Higham,
    "Accuracy and Stability of Numerical Algorithms", 2nd ed., sec. 4.2: an element's error factor
    is the product of the roundings it goes through), plus the rounding of the result. A bound with
    d = R - 1 (any order at all) let a 4099-row column that lost a row pass at some seeds."""
    d = case.block_r - 1 + -(-case.R // case.block_r)
    gamma = d * FP32_UNIT_ROUNDOFF / (1 - d * FP32_UNIT_ROUNDOFF)
    return FP32_UNIT_ROUNDOFF * ref.abs() + gamma * x.abs().sum(dim=0)


def _fixed_rows(results: dict) -> str | None:
    """A diagnosis: right up to some height of several tiles, wrong on every taller shape - a kernel
    that loads a fixed number of rows (one big block, or a loop of a fixed length)."""
    def note(largest: int) -> str | None:
        if largest < 2 * COLUMN_SUMS_BLOCK_R:
            return None  # right on one tile only: the accumulator's note (below) fits better
        return (f"Only the shapes taller than {largest} rows are wrong: your kernel covers a fixed number of "
                f"rows. It must walk down each column in tiles of BLOCK_R = {COLUMN_SUMS_BLOCK_R}, as many as R "
                "needs (range(0, R, BLOCK_R)), however tall x is.")

    return fails_exactly_above(lambda s: s.R, note)(results)


column_sums = TritonPuzzle(
    title="Your column sums",
    launch=_column_sums,
    launch_options=lambda case: {"block_r": case.block_r, "block_c": case.block_c},
    inputs=lambda case, gen: {"x": torch.randn(case.R, case.C, generator=gen)},
    expected=lambda x: x.sum(dim=0),
    bound=_column_sums_bound,
    cases=COLUMN_SUMS_CASES,
    show=_show_sums_case,
    unit="shapes",
    layouts=lambda case: {"x": case.layout} if case.layout else {},
    precision="ieee",  # a tl.dot of a tile with ones sums it too: in TF32 by default on a GPU
    diagnoses=[
        fails_only_where(
            lambda s: s.other_tile,
            f"Right with the puzzle's tiles (BLOCK_R = {COLUMN_SUMS_BLOCK_R}, BLOCK_C = {COLUMN_SUMS_BLOCK_C}), "
            "wrong where the launch gives others: your kernel has a tile size written as a number, or "
            "BLOCK_R where BLOCK_C belongs. Rows step by BLOCK_R (range(0, R, BLOCK_R)), columns by BLOCK_C: "
            "the wrapper chooses both."),
        fails_only_where(
            lambda s: bool(s.layout),
            "Right on every row-major x, wrong where x is stored transposed or is a column slice of a "
            "wider matrix: your kernel steps through x as if its rows were packed one after another. "
            "Element (r, c) of x lies at x_ptr + r * stride_xr + c * stride_xc, whatever the layout: "
            "use both strides."),
        fails_exactly_where(
            lambda s: s.R % s.block_r != 0,
            f"Every shape it gets wrong has a row count R that is not a multiple of BLOCK_R (mostly "
            f"{COLUMN_SUMS_BLOCK_R}): the last tile of each column, the tail, is left out or read past the "
            "column's end. The loop must reach it, and its mask must cut the rows at R."),
        _fixed_rows,
        fails_only_where(
            lambda s: s.R > s.block_r,
            f"Only shapes taller than one tile (BLOCK_R = {COLUMN_SUMS_BLOCK_R} rows, or the tile named) are "
            "wrong: every tile of a column must be added to acc, not only one of them."),
        fails_exactly_where(
            lambda s: s.C % s.block_c != 0,
            f"Every shape it gets wrong has a column count C that is not a multiple of BLOCK_C (mostly "
            f"{COLUMN_SUMS_BLOCK_C}): the last program's columns hang over the end of x's rows and of out, "
            "and the masks of the loads and of the store (and of any tl.atomic_ call) must cut them at C."),
        fails_only_where(
            lambda s: s.C > s.block_c,
            f"Only matrices of more than one block of columns (BLOCK_C = {COLUMN_SUMS_BLOCK_C}, or the tile "
            "named) are wrong: program pid owns the columns from pid * BLOCK_C on."),
    ],
    reveal=column_sums_kernel,
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


def as_gemm(kernel: Any, c_layout: str = ROW_MAJOR,
            block: int | tuple[int, int, int] = GEMM_PUZZLE_BLOCK) -> Callable[[object, object], object]:
    """Wrap a kernel with the signature of :func:`masked_gemm_kernel` (a learner's, or the solution)
    as an fp32 GEMM ``fn(a, b) -> c`` that ``course_lib.check`` can test: one program per
    ``block`` x ``block`` tile of C, K in slices of ``block`` (or, for a tuple, BLOCK_M x BLOCK_N
    tiles and BLOCK_K slices). A and B go in with the strides they have; C is row-major, or,
    with ``c_layout=TRANSPOSED``, the transposed view of a row-major N x M array."""
    block_m, block_n, block_k = block if isinstance(block, tuple) else (block, block, block)

    def gemm(a: object, b: object) -> object:
        ops = prepare(a, b, stage="exercise", dtypes=("fp32",))
        if c_layout == TRANSPOSED:
            c = new_array((ops.N, ops.M), torch.float32, ops.a.device).t()
        else:
            c = new_array((ops.M, ops.N), torch.float32, ops.a.device)
        grid = (triton.cdiv(ops.M, block_m), triton.cdiv(ops.N, block_n))
        kernel[grid](ops.a, ops.b, c, ops.M, ops.N, ops.K, *ops.a.stride(), *ops.b.stride(), *c.stride(),
                     BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
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
# Two shapes are also launched with three different block sizes (BLOCK_M, BLOCK_N, BLOCK_K): a kernel
# with 32 written where a BLOCK_ belongs, or one BLOCK_ name where another belongs, is wrong there.
# Both keep what the diagnoses below read: an edge of C in M, and a K tail, with these blocks as with 32.
GEMM_OTHER_BLOCKS = (GemmCase(40, 33, 150, blocks=(32, 16, 64)), GemmCase(37, 64, 45, blocks=(16, 64, 32)))


def _strides_note(operands: list[str]) -> str:
    names = " and ".join(operands) if len(operands) < 3 else "A, B and C"
    return (f"Right wherever A, B and C are row-major; wrong where {names} {'is' if len(operands) == 1 else 'are'} "
            "stored otherwise (transposed, or a column slice of a wider matrix): your kernel steps through "
            f"{names} as if {'its' if len(operands) == 1 else 'their'} rows were packed one after another. "
            "Element (i, k) of A lies at a_ptr + i * stride_am + k * stride_ak, and B and C likewise: use "
            "the strides, whatever the layout.")


def _k_slices(case: GemmCase) -> int:
    """How many K-slices the case's launch needs: ceil(K / BLOCK_K)."""
    block_k = case.blocks[2] if case.blocks else GEMM_PUZZLE_BLOCK
    return -(-case.K // block_k)


def _k_stops_early_note(slices: int) -> str:
    k = slices * GEMM_PUZZLE_BLOCK
    note = (f"Only shapes whose K is more than {k} ({slices} K-slice{'s' if slices > 1 else ''} of "
            f"BLOCK_K = {GEMM_PUZZLE_BLOCK}) are wrong: your loop over K stops early. It must "
            "take every K-slice, ceil(K / BLOCK_K) of them, however many that is.")
    if slices == 1:  # right on one slice only: a loop that stops, or a sum that never builds up
        note += (" Or each slice's product replaces acc instead of adding to it: acc = tl.dot(a, b, acc, ...) "
                 "adds the product to acc; tl.dot(a, b) alone is this slice's product only.")
    return note


def _k_tail(results: dict) -> str | None:
    """A diagnosis: the shapes it gets wrong are exactly those with a K tail; what it read past the
    end of A or B says which load's mask misses K (nothing read past either: the loop skips the tail)."""
    tails = fails_exactly_where(lambda s: s[2] % GEMM_PUZZLE_BLOCK != 0, "the K tail")(results)
    if tails is None:
        return None
    over = sorted({v.array for f in results.values() if f for v in f.stray if v.kind == "read"} & {"A", "B"})
    cause = {(): "No read went past A or B, so the loop stops before the last, partial K-slice: it must "
                 "take ceil(K / BLOCK_K) slices, the tail included.",
             ("A",): "Only A was read past its end: A's load needs the mask at K too (its columns "
                     "k0 + ks < K), beside the one at M.",
             ("B",): "Only B was read past its end: B's load needs the mask at K too (its rows k0 + ks < K), "
                     "beside the one at N.",
             ("A", "B"): "A and B were both read past their ends: the masks must cut A's columns and B's rows "
                         "at K (k0 + ks < K), beside the ones at M and N."}[tuple(over)]
    return (f"Every shape it gets wrong has a K that is not a multiple of BLOCK_K = {GEMM_PUZZLE_BLOCK}: "
            f"the K tail. {cause}")


masked_gemm = TritonGemmPuzzle(
    title="Your masked GEMM",
    launch=as_gemm,
    cases=GEMM_SHAPES + GEMM_STRIDED + GEMM_OTHER_BLOCKS,
    precision="ieee",
    diagnoses=[
        fails_only_where(
            lambda case: case.blocks is not None,
            f"Right when BLOCK_M = BLOCK_N = BLOCK_K = {GEMM_PUZZLE_BLOCK}, wrong where the launch makes them "
            "differ: your kernel has a block size written as a number, or one BLOCK_ name where another "
            "belongs. Rows of A and C step by BLOCK_M, columns of B and C by BLOCK_N, K by BLOCK_K (the loop, "
            "ks and both loads' K masks); acc is BLOCK_M x BLOCK_N."),
        fails_only_strided(_strides_note),
        fails_exactly_above(_k_slices, _k_stops_early_note),  # by K-slices: a case may have its own BLOCK_K
        _k_tail,
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


fewest_passes_padded = NumberQuestion(
    what="(a) fewest passes",
    unit="passes",
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

passes_swizzled = NumberQuestion(
    what="(b) passes with the swizzle",
    unit="passes",
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
