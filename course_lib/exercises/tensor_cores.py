"""Exercises of notebook ``06_tensor_cores``: where the bf16 ridge lies, which lane holds an element
of ``mma.sync``'s A (you write the map), and who holds an element of B. (Stage 0 on the roofline and
stage 1's ldmatrix and padding are notebook 07's: ``course_lib.exercises.mma_sync_kernels``.)

Every expected answer comes from the course's models: the PTX fragment layout
(``course_lib.model.fragments``) and the recorded roofs.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from course_lib.exercises import (
    FunctionPuzzle,
    NumberQuestion,
    Question,
    plain_result,
    recorded_copy_gbs,
    recorded_ridge,
)
from course_lib.model.fragments import fragment_map


@lru_cache(maxsize=None)
def _fragment_map(operand: str):
    fm = fragment_map("mma.m16n8k16", operand)
    for table in (fm.owner, fm.reg):  # kept for every check: a learner's function cannot change the answers
        table.setflags(write=False)
    return fm


def _owner(operand: str, row: int, col: int) -> tuple[int, int]:
    """(lane, element i) holding element (row, col) of an mma.m16n8k16 operand: the PTX layout."""
    fm = _fragment_map(operand)
    return int(fm.owner[row, col]), int(fm.reg[row, col])


# ---- predict: the bf16 ridge ----------------------------------------------------------------------

def _peak_ratio() -> float:
    return recorded_ridge("bf16") / recorded_ridge("fp32")


def ridge_working(dtype: str = "bf16") -> str:
    """The ridge worked out from the recorded roofs, as the check prints it once the answer is right."""
    from course_lib import results  # noqa: PLC0415

    peak = results.load().ceilings["cublas_peak_tflops"][dtype]
    return (f"best cuBLAS {dtype} {peak:.0f} TFLOP/s / copy {recorded_copy_gbs() / 1000:.2f} TB/s = "
            f"{recorded_ridge(dtype):.0f} FLOP/byte")


bf16_ridge = NumberQuestion(
    what="the bf16 ridge (FLOP/byte)",
    unit="FLOP/byte",
    expected=lambda: recorded_ridge("bf16"),
    rel_tol=0.15,  # a prediction from the rounded numbers of the text (12 and 15) is well inside
    hint="the ridge is the peak over the bandwidth: the fp32 ridge times the factor the peak grew by",
    wrong=[
        (lambda want: recorded_ridge("fp32"), "that is the fp32 ridge: the bf16 peak is higher on the "
                                              "same bandwidth, so the ridge moves right by the same factor."),
        (lambda want: recorded_ridge("fp32") / _peak_ratio(), "that divides by the factor: the ridge is peak "
                                                              "over bandwidth, so a higher peak moves it right."),
        (lambda want: _peak_ratio(), "that is the factor the peak grew by; the ridge is the fp32 ridge "
                                     "times it."),
        (lambda want: recorded_ridge("e4m3"), "that is FP8's ridge (e4m3, whose peak is about twice "
                                              "bf16's); the question asks for bf16."),
        (lambda want: 2 * want, "that doubles it again for bf16's 2-byte elements; the ridge counts bytes "
                                "of bandwidth, which did not change."),
    ],
    # the recorded working, only once the prediction is right (it would give the answer away)
    after_right=lambda answer: f"Recorded on the H200: {ridge_working('bf16')}.",
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


def _i_and_lane_swapped(row, col):
    return a_owner(row, col)[::-1]


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
        (_i_and_lane_swapped, "your lane and i are right but in the wrong order: you return (i, lane); "
                              "return (lane, i), the lane first."),
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


def _lane_and_element(answer):
    """The answer as (lane, i): a list or an array as a tuple, and the figure's labels read as their
    numbers ("T25" for lane 25, "b3" for element 3)."""
    answer = tuple(answer) if isinstance(answer, list) else plain_result(answer)
    if isinstance(answer, tuple) and len(answer) == 2:
        return tuple(int(m.group(1)) if isinstance(x, str) and (m := re.fullmatch(rf"\s*{label}\s*([0-9]+)\s*", x, re.I))
                     else x for x, label in zip(answer, (r"(?:T|lane)?", r"b?")))
    return answer


b_owner = Question(
    what="(lane, element) of B[11][6]",
    normalize=_lane_and_element,
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
        (_b_wrong(_b_i, _b_lane), "your lane and element are in the wrong order: give (lane, i), the lane "
                                  "first."),
    ],
)
