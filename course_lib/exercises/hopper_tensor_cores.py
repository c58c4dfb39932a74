"""Exercises of notebook ``08_hopper_tensor_cores``: the 128-byte swizzle (you write it), one swizzled
address, and a descriptor's LBO for another box.

Every expected answer comes from the course's Python model of TMA and ``wgmma``
(``course_lib.model.layout.tma_box_offset``; ``course_lib.kernels.tensor_cores``: ``make_descriptor``,
``wgmma_mn_major_address``). The notebook prints the kernels with ``tc.cuda_function`` and
``tc.kernel_piece`` (:mod:`course_lib.kernels.tensor_cores.inspection`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from course_lib.exercises import FunctionPuzzle, NumberQuestion, as_number, plain_result
from course_lib.kernels import tensor_cores as tc
from course_lib.learn import Verdict, say
from course_lib.model import layout

# The largest swizzled box the kernels copy: A's BLOCK_M rows of 64 bf16 (128 bytes each), 16 KB.
BOX_ROWS, BOX_COLS = max(d.block[0] for d in tc.DESIGNS), 64
ROW_BYTES, CHUNK = layout.SWIZZLE_ROW, 16


# ---- the puzzle: the 128-byte swizzle -------------------------------------------------------------

def swizzle_offset(row: int, col: int) -> int:
    """Byte offset of bf16 element (row, col) in a TMA box of 64 columns with the 128-byte swizzle."""
    byte = 2 * col                                  # bf16: 2 bytes, so a row is 64 x 2 = 128 bytes
    chunk, within = byte // 16, byte % 16           # which 16-byte chunk of the row, where in it
    return 128 * row + 16 * (chunk ^ (row % 8)) + within   # the chunk moves; rows 8 apart repeat


def _no_xor(row, col):
    return ROW_BYTES * row + 2 * col


def _xor_with_row(row, col):
    return ROW_BYTES * row + CHUNK * ((2 * col // CHUNK) ^ row) + 2 * col % CHUNK


def _xor_on_bytes(row, col):
    return ROW_BYTES * row + ((2 * col) ^ (row % 8))


def _four_bytes(row, col):
    return ROW_BYTES * row + CHUNK * ((4 * col // CHUNK) ^ (row % 8)) + 4 * col % CHUNK


def _chunk_start_only(row, col):
    return ROW_BYTES * row + CHUNK * ((2 * col // CHUNK) ^ (row % 8))


def _xor_on_elements(row, col):
    return ROW_BYTES * row + 2 * (col ^ (row % 8))


def _col_as_bytes(row, col):
    return ROW_BYTES * row + CHUNK * ((col // CHUNK) ^ (row % 8)) + col % CHUNK


def _wraps_at_64(row, col):
    return layout.tma_box_offset(row % 64, col)


def _rotated(row, col):
    return ROW_BYTES * row + CHUNK * (((2 * col // CHUNK) + row) % 8) + 2 * col % CHUNK


def _rotated_back(row, col):
    return ROW_BYTES * row + CHUNK * (((2 * col // CHUNK) - row) % 8) + 2 * col % CHUNK


_NOT_A_ROTATION = ("it is an XOR, not a rotation: chunk c of row r goes to c ^ (r % 8) (row 1 swaps chunks 0 "
                   "and 1, 2 and 3, ...), not to c shifted by r places round the row.")


def _row_start_mod_8(row, col):
    return ROW_BYTES * (row % 8) + CHUNK * ((2 * col // CHUNK) ^ (row % 8)) + 2 * col % CHUNK


@dataclass(frozen=True)
class _BoxPuzzle(FunctionPuzzle):
    """A function of (row, col) checked on every element of the box; where it is wrong, the check
    also names the first row where it differs (a formula that wraps its rows too early is right
    above that row)."""

    def check(self, fn) -> Verdict:
        verdict = super().check(fn)
        if not verdict:
            row = _first_wrong_row(fn, self.reference)
            if row is not None:
                right = f" (rows 0-{row - 1} are right)" if row > 1 else " (row 0 is right)" if row else ""
                say(f"  the first row where yours differs: row {row} of the box's {BOX_ROWS}{right}")
        return verdict


def _first_wrong_row(fn, reference) -> int | None:
    for r in range(BOX_ROWS):
        for c in range(BOX_COLS):
            try:
                mine = plain_result(fn(r, c))
                if mine is None:  # the starter: the check above has told it to fill in the TODO lines
                    return None
                if mine != reference(r, c):
                    return r
            except Exception:  # noqa: BLE001 - the check above has said what went wrong
                return None
    return None


swizzle = _BoxPuzzle(
    title="Your swizzle",
    reference=layout.tma_box_offset,
    cases=lambda: [(r, c) for r in range(BOX_ROWS) for c in range(BOX_COLS)],
    show=lambda case: f"element ({case[0]}, {case[1]})",
    known_wrong=[
        (_wraps_at_64, f"your offsets start again at row 64: the kernels' box of A has {BOX_ROWS} rows "
                       f"(BLOCK_M), {BOX_ROWS * ROW_BYTES // 1024} KB, and row r starts 128 * r bytes in, "
                       "for every r; only the XOR repeats (every 8 rows)."),
        (_row_start_mod_8, "the row's start takes row % 8: only the chunk's XOR repeats every 8 rows; "
                           "row r itself starts 128 * r bytes into the box."),
        (_xor_on_elements, "you XOR the element index: the swizzle permutes whole 16-byte chunks (8 bf16), "
                           "so XOR the chunk, 2 * col // 16, and keep the byte inside it."),
        (_col_as_bytes, "col counts elements of 2 bytes, not bytes: the byte in the row is 2 * col."),
        (_no_xor, "that is the plain row-major offset: the swizzle is missing (chunk c of row r goes to "
                  "chunk c ^ (r % 8))."),
        (_rotated, _NOT_A_ROTATION),
        (_rotated_back, _NOT_A_ROTATION),
        (_xor_with_row, "the XOR takes row % 8, not the row: from row 8 on your chunk index runs past 7, "
                        "out of the row (the pattern repeats every 8 rows, 1024 bytes)."),
        (_xor_on_bytes, "the XOR moves whole 16-byte chunks: XOR the chunk index (byte // 16) with "
                        "row % 8, not the byte offset."),
        (_four_bytes, "a bf16 element is 2 bytes, not 4: 64 of them make the 128-byte row."),
        (_chunk_start_only, "right chunk, but the element's place inside its chunk (byte % 16) is "
                            "missing."),
    ],
    reveal=swizzle_offset,
)


# ---- exercise 1: one swizzled address -------------------------------------------------------------

# Row 3, chunk 5 (byte 88 of the row): the XOR (5 ^ 3 = 6), a rotation either way (0, 2), an OR (7) and
# an AND (1) each give another chunk, so a learner with the wrong operation cannot land on the answer
# (at (5, 20), chunk 2 and row 5 share no bit: XOR, OR and a rotation all gave chunk 7).
ELEMENT = (3, 44)


def _or_instead_of_xor(row, col):
    return ROW_BYTES * row + CHUNK * ((2 * col // CHUNK) | (row % 8)) + 2 * col % CHUNK


swizzled_offset = NumberQuestion(
    what=f"offset of element {ELEMENT}",
    unit="bytes from the box's start",
    expected=lambda: layout.tma_box_offset(*ELEMENT),
    hint="find the 16-byte chunk of the unswizzled offset, XOR it with the row mod 8",
    wrong=[
        (_no_xor(*ELEMENT), "that is the offset without the swizzle: XOR its 16-byte chunk with row % 8."),
        (_xor_on_bytes(*ELEMENT), "the XOR moves the 16-byte chunk: XOR the chunk index, not the byte "
                                  "offset, with row % 8."),
        (_four_bytes(*ELEMENT), "that counts 4 bytes an element; bf16 is 2."),
        (_chunk_start_only(*ELEMENT), "that is the start of the right chunk; add the element's byte "
                                      "inside it."),
        (layout.tma_box_offset(*ELEMENT) - ROW_BYTES * ELEMENT[0],
         f"that is the offset inside row {ELEMENT[0]}; the box's start is {ELEMENT[0]} rows of 128 bytes earlier."),
        (layout.tma_box_offset(*ELEMENT) / 2, "that counts elements; the question asks for bytes (bf16: 2 each)."),
        (_rotated(*ELEMENT), _NOT_A_ROTATION),
        (_rotated_back(*ELEMENT), _NOT_A_ROTATION),
        (_or_instead_of_xor(*ELEMENT), "that puts the element in chunk 7, as an OR (5 | 3) or an XOR with "
                                       "the row before (5 ^ 2) would: chunk 5 XOR row % 8 = 3 is 6."),
    ],
)


# ---- exercise 2: a descriptor's LBO for boxes of 32 x 64 ------------------------------------------

SLICE_ROWS = 32  # rows of K in a box, instead of the kernels' 64


def _misread(lbo: int, box_rows: int):
    """For each element (n, k) of a 16 x 256 slice of B, columns 64 and up first: whether ``wgmma``,
    given a descriptor with this LBO (and the kernels' SBO), reads it from another place than TMA
    wrote it, with boxes of ``box_rows`` x 64."""
    desc = tc.make_descriptor(0, lbo, tc.B_SBO)
    box_bytes = box_rows * ROW_BYTES
    for n in [*range(64, 256), *range(64)]:
        for k in range(16):
            yield tc.wgmma_mn_major_address(desc, n, k) != (n // 64) * box_bytes + layout.tma_box_offset(k, n % 64)


def lbo_mismatches(lbo: int, box_rows: int = SLICE_ROWS) -> int:
    """How many of the 4096 elements of a 16 x 256 slice ``wgmma`` reads from the wrong place."""
    return sum(_misread(lbo, box_rows))


@lru_cache(maxsize=None)
def right_lbo(box_rows: int = SLICE_ROWS) -> int:
    """The LBO (a multiple of 16 bytes up to 16384) with which wgmma reads every element where TMA
    wrote it."""
    return next(lbo for lbo in range(16, 16385, 16) if not any(_misread(lbo, box_rows)))


@dataclass(frozen=True)
class _LboQuestion(NumberQuestion):
    """Says, for a wrong LBO, how many elements wgmma would read from the wrong place."""

    def check(self, answer) -> Verdict:
        verdict = super().check(answer)
        lbo = as_number(answer)
        if not verdict and lbo is not None and math.isfinite(lbo) and lbo == int(lbo) and 0 <= lbo < 1 << 18:
            if int(lbo) % 16:  # the descriptor holds LBO >> 4: the low four bits are lost
                say(f"  a descriptor holds LBO in units of 16 bytes (LBO >> 4), so {int(lbo)} cannot be written "
                    f"in one: the answer is a multiple of 16.")
            else:
                say(f"  with LBO = {int(lbo)}: {lbo_mismatches(int(lbo))} of 4096 elements read from the wrong place")
        return verdict


box_lbo = _LboQuestion(
    what="LBO for 32 x 64 boxes",
    unit="bytes",
    expected=right_lbo,
    hint="LBO is the byte step from one group of 64 columns of B to the next: where does TMA put them?",
    wrong=[
        # 8192 is both the kernels' LBO and 32 x 64 elements of 4 bytes; 2048 both 16 rows of 128 bytes
        # and the box's 32 x 64 elements counted without their 2 bytes: each message names both.
        (tc.B_LBO, "that is the kernels' LBO, for boxes of 64 rows (these have 32), or this box counted "
                   "with 4 bytes an element (bf16 has 2)."),
        (tc.B_SBO, "that is SBO, the step to the next 8 rows of K; LBO steps to the next 64 columns."),
        (ROW_BYTES, "that is one row of a box; LBO steps over a whole box."),
        (16 * ROW_BYTES, "that is half the box: its 32 x 64 elements without their 2 bytes each, or the 16 "
                         "rows of one wgmma's slice; LBO steps over the whole box, in bytes."),
        (SLICE_ROWS * ROW_BYTES // 16, "that is LBO in the descriptor's units of 16 bytes (LBO >> 4); the "
                                       "question asks for bytes."),
    ],
)
