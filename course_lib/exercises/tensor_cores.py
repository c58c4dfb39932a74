"""Exercises of notebook ``06_tensor_cores``: where the bf16 ridge lies, which lane holds an element
of ``mma.sync``'s A (you write the map), who holds an element of B, stage 0 on the roofline, and why
stage 1 pads its rows.

Every expected answer comes from the course's models: the PTX fragment layout
(``course_lib.model.fragments``), the recorded copy bandwidth, notebook 02's bank model
(``course_lib.model.banks``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable

from course_lib.exercises import FunctionPuzzle, Question
from course_lib.model import banks
from course_lib.model.fragments import MMA_SHAPES, fragment_map
from course_lib.model.hardware import BF16_BYTES


@lru_cache(maxsize=None)
def _fragment_map(operand: str):
    return fragment_map("mma.m16n8k16", operand)


def _owner(operand: str, row: int, col: int) -> tuple[int, int]:
    """(lane, element i) holding element (row, col) of an mma.m16n8k16 operand: the PTX layout."""
    fm = _fragment_map(operand)
    return int(fm.owner[row, col]), int(fm.reg[row, col])


# ---- predict: the bf16 ridge ----------------------------------------------------------------------

def ridge(dtype: str) -> float:
    """FLOP per byte where the recorded roofs meet: the best cuBLAS rate over the copy bandwidth."""
    from course_lib import results  # noqa: PLC0415

    return results.load().ceilings["cublas_peak_tflops"][dtype] / _copy_tbs()


def _peak_ratio() -> float:
    return ridge("bf16") / ridge("fp32")


bf16_ridge = Question(
    what="the bf16 ridge (FLOP/byte)",
    expected=lambda: ridge("bf16"),
    rel_tol=0.15,  # a prediction from the rounded numbers of the text (12 and 15) is well inside
    hint="the ridge is the peak over the bandwidth: the fp32 ridge times the factor the peak grew by",
    wrong=[
        (lambda want: ridge("fp32"), "that is the fp32 ridge: the bf16 peak is higher on the same "
                                     "bandwidth, so the ridge moves right by the same factor."),
        (lambda want: ridge("fp32") / _peak_ratio(), "that divides by the factor: the ridge is peak over "
                                                     "bandwidth, so a higher peak moves it right."),
        (lambda want: _peak_ratio(), "that is the factor the peak grew by; the ridge is the fp32 ridge "
                                     "times it."),
        (lambda want: 2 * want, "that doubles it again for bf16's 2-byte elements; the ridge counts bytes "
                                "of bandwidth, which did not change."),
    ],
)


# ---- the puzzle: which lane holds A[row][col], as which element ---------------------------------

def a_owner(row: int, col: int) -> tuple[int, int]:
    """Which lane holds A[row][col] of mma.m16n8k16 (bf16), and as which of its elements a0..a7."""
    g = row % 8                  # rows g and g + 8 belong to the lanes of group g = lane // 4
    t = (col % 8) // 2           # columns 2t, 2t + 1 (and those + 8) to lane t = lane % 4 of the group
    i = col % 2 + 2 * (row // 8) + 4 * (col // 8)   # odd column +1, rows 8-15 +2, columns 8-15 +4
    return 4 * g + t, i


def _rows_and_columns_swapped(row, col):
    return a_owner(col, row)


def _no_row_halves(row, col):
    return 4 * row + (col % 8) // 2, a_owner(row, col)[1]


def _i_ignores_upper_columns(row, col):
    return a_owner(row, col)[0], col % 2 + 2 * (row // 8)


def _halves_swapped_in_i(row, col):
    return a_owner(row, col)[0], col % 2 + 4 * (row // 8) + 2 * (col // 8)


def _lane_is_4t_plus_g(row, col):
    return 4 * ((col % 8) // 2) + row % 8, a_owner(row, col)[1]


def _t_is_col_mod_4(row, col):
    return 4 * (row % 8) + col % 4, a_owner(row, col)[1]


a_fragment = FunctionPuzzle(
    title="Your map of A's fragment",
    reference=lambda row, col: _owner("A", row, col),
    cases=lambda: [(r, c) for r in range(16) for c in range(16)],
    show=lambda case: f"A[{case[0]}][{case[1]}]",
    known_wrong=[
        (_rows_and_columns_swapped, "rows and columns are swapped: the row gives the group g = lane // 4, "
                                    "the column the lane t = lane % 4 inside it."),
        (_no_row_halves, "lane 4 * row + ... runs past lane 31 for rows 8-15: the same 32 lanes hold "
                         "rows 0-7 and 8-15 (g is row % 8); the lower half shows in i instead (+2)."),
        (_i_ignores_upper_columns, "your i ignores columns 8-15: a lane holds those too, as a4..a7 (+4)."),
        (_halves_swapped_in_i, "your i adds 4 for rows 8-15 and 2 for columns 8-15: it is the other way "
                               "round (a2, a3 sit 8 rows down, a4, a5 8 columns right)."),
        (_lane_is_4t_plus_g, "your lane is 4t + g: the four lanes of a group share a row, so lane = 4g + t "
                             "(g = lane // 4)."),
        (_t_is_col_mod_4, "t = col % 4 gives a lane every fourth column; a lane holds two neighbouring "
                          "columns 2t and 2t + 1, so t = (col % 8) // 2."),
    ],
    reveal=a_owner,
)


# ---- exercise 1: who holds B[11][6]? ------------------------------------------------------------

B_ELEMENT = (11, 6)  # (row k, column n) of the 16 x 8 B operand


def _b_wrong(lane_of: Callable[[int, int], int], i_of: Callable[[int, int], int]):
    k, n = B_ELEMENT
    return lane_of(k, n), i_of(k, n)


def _b_lane(k, n):  # the layout: column n is the group g, t = (k % 8) // 2
    return 4 * n + (k % 8) // 2


def _b_i(k, n):
    return k % 2 + 2 * (k // 8)


b_owner = Question(
    what="(lane, element) of B[11][6]",
    normalize=lambda answer: tuple(answer) if isinstance(answer, list) else answer,
    expected=lambda: _owner("B", *B_ELEMENT),
    hint="the column is g; the row 11 = 2t + (i % 2) + 8 * (i // 2) gives t and i; the lane is 4g + t",
    wrong=[
        (_b_wrong(lambda k, n: 4 * ((k % 8) // 2) + n, _b_i), "the lane is 4g + t with g the column: "
                                                              "4 * 6 + t, not 4t + 6."),
        (_b_wrong(lambda k, n: 4 * n + k % 4, _b_i), "t is (row % 8) // 2: each lane holds two neighbouring "
                                                    "rows, 2t and 2t + 1."),
        (_b_wrong(_b_lane, lambda k, n: k % 2), "right lane; but row 11 lies in the lower 8 rows, which "
                                                "add 2 to i (b2, b3)."),
        (_b_wrong(lambda k, n: a_owner(k, n)[0], lambda k, n: a_owner(k, n)[1]),
         "that reads B with A's layout, the row giving g; in B the column gives g (the lane's group)."),
    ],
)


# ---- exercise 2: stage 0 on the roofline --------------------------------------------------------


def _stage0_flop_and_bytes(itemsize: int = BF16_BYTES) -> tuple[int, int]:
    """One mma.m16n8k16 per step of K: its FLOP, and the bytes of its A (16 x 16) and B (16 x 8)."""
    (m, k, _), (_, n, _) = MMA_SHAPES["A"], MMA_SHAPES["B"]
    return 2 * m * n * k, (m * k + k * n) * itemsize


def stage0_intensity_value(itemsize: int = BF16_BYTES) -> float:
    flop, nbytes = _stage0_flop_and_bytes(itemsize)
    return flop / nbytes


def _copy_tbs() -> float:
    from course_lib import results  # noqa: PLC0415

    return results.load().ceilings["copy_bandwidth_gbs"] / 1000


stage0_intensity = Question(
    what="stage 0's intensity (FLOP/byte)",
    expected=stage0_intensity_value,
    rel_tol=0.01,
    hint="FLOP of one mma (2 x 16 x 8 x 16) over the bytes of its A and B pieces",
    wrong=[
        (lambda want: stage0_intensity_value(4), "that is 4 bytes an element (or multiply-adds, not FLOP): "
                                                 "bf16 is 2 bytes, a multiply-add 2 FLOP."),
        (lambda want: _stage0_flop_and_bytes()[0] / (16 * 16 * BF16_BYTES), "that counts only A's bytes: "
                                                                            "B's 16 x 8 are loaded too."),
        (lambda want: _stage0_flop_and_bytes()[0] / (16 * 8 * BF16_BYTES), "that counts only B's bytes: "
                                                                           "A's 16 x 16 are loaded too."),
        (lambda want: want * BF16_BYTES, "that is FLOP per element; per byte, divide by 2 bytes."),
    ],
)

stage0_roof = Question(
    what="its memory roof (TFLOP/s)",
    expected=lambda: stage0_intensity_value() * _copy_tbs(),
    rel_tol=0.03,
    hint="intensity times the copy bandwidth in TB/s gives TFLOP/s",
    wrong=[
        (lambda want: stage0_intensity_value(4) * _copy_tbs(), "that uses 4 bytes an element, or counts "
         "multiply-adds, not FLOP (either halves the intensity): bf16 is 2 bytes, a multiply-add 2 FLOP."),
        (lambda want: want * 1000, "that is GFLOP/s (intensity times GB/s): divide by 1000."),
        (lambda want: _copy_tbs() / stage0_intensity_value(), "the roof is intensity times bandwidth, "
                                                              "not bandwidth over intensity."),
    ],
)


# ---- exercise 3: why stage 1 pads its rows ------------------------------------------------------

def passes(pitch_bytes: int) -> int:
    """Passes through the banks for one 8 x 8 ldmatrix matrix whose 16-byte rows lie ``pitch_bytes``
    apart (notebook 02's bank model)."""
    return banks.bank_access([pitch_bytes * r for r in range(8)], itemsize=16).conflict_degree


pitch64_passes = Question(
    what="passes with 64-byte rows",
    expected=lambda: passes(64),
    hint="the 32 banks span 128 bytes: at which of the 128 bytes does each of the 8 rows start?",
    wrong=[
        (lambda want: passes(128), "that would be rows 128 bytes apart, all starting at bank 0; at 64 "
                                   "only every second row does."),
        (lambda want: passes(80), "that is the padded pitch of 80 bytes; unpadded, rows 0, 2, 4, 6 start "
                                  "at the same bank."),
        (lambda want: 128 // 64, "128 / 64 counts the rows that fit in the 128 bytes of banks, not the rows "
                                 "that share banks: rows 0, 2, 4, 6 all start at bank 0."),
    ],
)
