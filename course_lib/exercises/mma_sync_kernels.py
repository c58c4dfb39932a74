"""Exercises of notebook ``07_mma_sync_kernels``: the row address each lane gives to stage 1's
``ldmatrix.x4`` for A (you write it), stage 0 on the roofline, and why stage 1 pads its rows.

Every expected answer comes from the course's models: ``ldmatrix`` (``course_lib.model.ldmatrix``)
and the PTX fragment layout (``course_lib.model.fragments``), the recorded copy bandwidth, notebook
02's bank model (``course_lib.model.banks``).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

from course_lib import learn
from course_lib.exercises import NumberQuestion, Puzzle, call_on_every_case, nothing_yet, recorded_copy_gbs
from course_lib.learn import Verdict, say
from course_lib.model import banks
from course_lib.model.fragments import MMA_SHAPES, fragment_map, mma_m16n8k16
from course_lib.model.hardware import BF16_BYTES, WARP_SIZE
from course_lib.model.ldmatrix import MATRIX_ROWS, ldmatrix_positions

PIECE = 16  # stage 1 loads A for one mma in a 16 x 16 piece: four 8 x 8 matrices, one ldmatrix.x4
MATRICES = 4


@lru_cache(maxsize=None)
def _a_map():
    return fragment_map("mma.m16n8k16", "A")


# ---- the puzzle: which row of A each lane gives to ldmatrix.x4 ----------------------------------

def stage1_a_row(lane: int) -> tuple[int, int]:
    """(row, column) in A's 16 x 16 piece where the 8-value row whose address ``lane`` gives to
    ``ldmatrix.x4`` starts, so that register j of every lane receives its a2j, a2j+1."""
    matrix, r = divmod(lane, 8)   # lanes 8j .. 8j + 7 give rows 0..7 of matrix j
    # a2, a3 lie 8 rows below a0, a1, and a4, a5 8 columns right: matrix j is the quarter
    # 8 * (j % 2) rows down and 8 * (j // 2) columns right (tc_1_mma_sync.cu: row lane % 16,
    # column (lane / 16) * 8).
    return 8 * (matrix % 2) + r, 8 * (matrix // 2)


def _rows_down_only(lane):
    return lane, 0


def _side_by_side(lane):
    return lane % 8, 8 * (lane // 8)


def _column_by_lane_parity(lane):
    return lane % 16, 8 * (lane % 2)


def _row_and_column_swapped(lane):
    return 8 * (lane // 16), lane % 16


def _matrices_1_and_2_exchanged(lane):
    return lane % 8 + 8 * (lane // 16), 8 * ((lane // 8) % 2)


def _as_place(value: Any) -> tuple[int, int] | str:
    """A lane's answer as (row, column), or why it cannot be one."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        return f"returns {value!r}: return (row, column), two whole numbers"
    if any(isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) for v in value):
        return (f"returns {tuple(value)!r}, not whole numbers: in Python / divides into a float "
                "(C++'s / on ints is Python's //)")
    if not all(isinstance(v, numbers.Integral) for v in value):
        return f"returns {tuple(value)!r}: return (row, column), two whole numbers"
    return int(value[0]), int(value[1])


def _span(values: Sequence[int], width: int) -> str:
    """'0-7' for consecutive values, '3' for one value, else the values (cut to ``width``)."""
    if len(values) > 1 and list(values) == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}-{values[-1]}"
    if len(set(values)) == 1:
        return str(values[0])
    text = ",".join(map(str, values))
    return text if len(text) <= width else text[:width - 1] + "…"


def _inside(place: tuple[int, int]) -> bool:
    return 0 <= place[0] < PIECE and 0 <= place[1] < PIECE


def _elements(lane: int, pair) -> str:
    """Which of A's fragment elements a register of ``lane`` received: 'its a0, a1', 'lane 16's a0,
    a1', or 'outside the piece'."""
    fm = _a_map()
    if not all(_inside(p) for p in pair):
        return "outside the piece"
    owners = {int(fm.owner[p]) for p in pair}
    names = ", ".join(f"a{fm.reg[p]}" for p in pair)
    if owners == {lane}:
        return f"its {names}"
    if len(owners) == 1:
        return f"lane {owners.pop()}'s {names}"
    return ", ".join(f"lane {fm.owner[p]}'s a{fm.reg[p]}" for p in pair)


def _table(places: dict[int, tuple[int, int]], got) -> None:
    """Where each matrix's eight lanes point, and which fragment elements its register brings."""
    fm = _a_map()
    print(f"  matrix  {'lanes':<6} {'rows of A':<15} {'columns of A':<15} register j of each lane holds")
    for j in range(MATRICES):
        lanes = range(MATRIX_ROWS * j, MATRIX_ROWS * (j + 1))
        rows = [places[lane][0] for lane in lanes]
        starts = [places[lane][1] for lane in lanes]
        cols = f"{starts[0]}-{starts[0] + 7}" if len(set(starts)) == 1 else "from " + _span(starts, 10)
        inside = [p for lane in range(WARP_SIZE) for p in got[lane][j] if _inside(p)]
        held = ", ".join(f"a{i}" for i in sorted({int(fm.reg[p]) for p in inside}))
        if len(inside) < 2 * WARP_SIZE:
            held = f"{held} + outside the piece" if held else "outside the piece"
        print(f"  {j:>6}  {f'{lanes[0]}-{lanes[-1]}':<6} {_span(rows, 15):<15} {cols:<15} {held}")


def _same_quarter(places: dict[int, tuple[int, int]]) -> str | None:
    """'matrices 0 and 2 ...' when two matrices' lanes point at the same rows of A."""
    seen = {}
    for j in range(MATRICES):
        rows = frozenset(places[lane] for lane in range(MATRIX_ROWS * j, MATRIX_ROWS * (j + 1)))
        if rows in seen:
            return (f"matrices {seen[rows]} and {j} point at the same rows of A, so they load the same "
                    f"values: the four matrices are the piece's four different 8 x 8 quarters.")
        seen[rows] = j
    return None


@dataclass(frozen=True)
class LdmatrixPuzzle(Puzzle):
    """You write ``row_start(lane) -> (row, column)``: where, in A's 16 x 16 piece, the row whose
    address ``lane`` gives to ``ldmatrix.x4`` starts. The check plays the instruction with your
    addresses (:func:`course_lib.model.ldmatrix.ldmatrix_positions`) and compares what every
    register of every lane receives with the ``mma.m16n8k16`` fragment of A (register j: elements
    a2j, a2j+1); it names the first lane and register that receive the wrong elements."""

    title: str
    reference: Callable[[int], tuple[int, int]]
    known_wrong: Sequence[tuple[Callable, str]] = ()
    reveal: Any = None

    def check(self, fn) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        lanes = [(lane,) for lane in range(WARP_SIZE)]
        got = call_on_every_case(self.title, fn, lanes, lambda case: f"for lane {case[0]}")
        if got is None:
            return Verdict(False)
        places = {}
        for (lane,), value in got.items():
            place = _as_place(value)
            if isinstance(place, str):
                say(f"{self.title}: not yet — lane {lane} {place}.")
                return Verdict(False)
            places[lane] = place
        negative = min(min(p) for p in places.values()) < 0  # no row of shared memory lies before the piece
        played = None if negative else ldmatrix_positions(lambda lane: places[lane])
        wrong = [] if played is None else [
            (lane, j) for lane in range(WARP_SIZE) for j in range(MATRICES)
            if played[lane][j] != self._wanted(lane, j)]
        if played is not None and not wrong:
            say(f"{self.title}: solved — all 32 lanes receive exactly their A fragment: register j holds "
                f"a2j, a2j+1, as mma.sync takes them.")
            _table(places, played)
            return Verdict(True)
        for known, meaning in self.known_wrong:
            if all(places[lane] == known(lane) for lane in range(WARP_SIZE)):
                say(f"{self.title}: not yet — {meaning}")
                break
        else:
            say(f"{self.title}: not yet — {self._first_problem(places)}")
        if played is None:
            return Verdict(False)
        lane, j = wrong[0]
        say(f"The first wrong register: lane {lane}'s register {j} receives {_pair(played[lane][j])} "
            f"({_elements(lane, played[lane][j])}); the mma wants its a{2 * j}, a{2 * j + 1} there, "
            f"{_pair(self._wanted(lane, j))}. {len(wrong)} of 128 registers are wrong.", indent=2)
        say("Where your lanes point, and what arrives:", indent=2)
        _table(places, played)
        return Verdict(False)

    @staticmethod
    def _wanted(lane: int, j: int):
        """The two places of A that register j of ``lane`` must hold: its elements a2j and a2j+1."""
        return mma_m16n8k16("A", lane, 2 * j), mma_m16n8k16("A", lane, 2 * j + 1)

    @staticmethod
    def _first_problem(places: dict[int, tuple[int, int]]) -> str:
        """What is wrong with addresses no known mistake explains: a row outside the piece, a row
        that is not 16-byte aligned, two matrices on the same quarter, else the wrong registers."""
        for lane in range(WARP_SIZE):
            row, col = places[lane]
            if not (0 <= row < PIECE and 0 <= col <= PIECE - MATRIX_ROWS):
                return (f"lane {lane} points at A[{row}][{col}..{col + 7}], outside the {PIECE} x {PIECE} piece "
                        f"(rows 0-15, columns 0-15).")
        for lane in range(WARP_SIZE):
            col = places[lane][1]
            if col % MATRIX_ROWS:
                return (f"lane {lane}'s row starts at column {col}: a row of a matrix is 8 values, 16 bytes "
                        f"that ldmatrix reads at a 16-byte aligned address, so in the piece it starts at "
                        f"column 0 or 8.")
        return _same_quarter(places) or "register j of some lanes receives other elements than a2j, a2j+1."

    def solution(self):
        return learn.show_source(self.reveal if self.reveal is not None else self.reference)


def _pair(pair) -> str:
    (r0, c0), (r1, c1) = pair
    return f"A[{r0}][{c0}], A[{r1}][{c1}]"


ldmatrix_a = LdmatrixPuzzle(
    title="Your ldmatrix addresses",
    reference=stage1_a_row,
    known_wrong=[
        (_rows_down_only, "your lanes 16-31 point at rows 16-31, below the 16 x 16 piece: the four 8 x 8 "
                          "matrices are its four quarters, and two of them lie in columns 8-15."),
        (_side_by_side, "your four matrices lie side by side in rows 0-7 (columns 0-31): the piece is "
                        "16 x 16, two quarters down and two across; a2, a3 lie 8 rows below a0, a1."),
        (_column_by_lane_parity, "your column changes from lane to lane inside one matrix: the eight lanes "
                                 "of a matrix point into the same 8 columns, and which 8 depends on the "
                                 "matrix (lane // 8), not on the lane's parity."),
        (_row_and_column_swapped, "rows and columns are swapped: a lane gives the start of one row of 8 "
                                  "values, A[row][col..col+7]; yours step along row 0 or 8, so their rows "
                                  "overlap."),
        (_matrices_1_and_2_exchanged, "matrices 1 and 2 are exchanged: register 1 receives columns 8-15 "
                                      "(a4, a5) and register 2 rows 8-15 (a2, a3); in the fragment a2, a3 "
                                      "lie 8 rows below a0, a1, so matrix 1 is the quarter below matrix 0."),
    ],
    reveal=stage1_a_row,
)


# ---- exercise 1: stage 0 on the roofline --------------------------------------------------------


def _stage0_flop_and_bytes(itemsize: int = BF16_BYTES) -> tuple[int, int]:
    """One mma.m16n8k16 per step of K: its FLOP, and the bytes of its A (16 x 16) and B (16 x 8)."""
    (m, k, _), (_, n, _) = MMA_SHAPES["A"], MMA_SHAPES["B"]
    return 2 * m * n * k, (m * k + k * n) * itemsize


def stage0_intensity_value(itemsize: int = BF16_BYTES) -> float:
    flop, nbytes = _stage0_flop_and_bytes(itemsize)
    return flop / nbytes


def _copy_tbs() -> float:
    return recorded_copy_gbs() / 1000


stage0_intensity = NumberQuestion(
    what="stage 0's intensity (FLOP/byte)",
    unit="FLOP/byte",
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

stage0_roof = NumberQuestion(
    what="its memory roof (TFLOP/s)",
    unit="TFLOP/s",
    expected=lambda: stage0_intensity_value() * _copy_tbs(),
    # 1.2 %: 5.33 x 4.27 and "about 23" pass; a roof from an intensity the question above refuses
    # (5.4), or from TB/s read as 1024 GB/s (2.4 % off), does not.
    rel_tol=0.012,
    hint="intensity times the copy bandwidth in TB/s gives TFLOP/s",
    wrong=[
        (lambda want: stage0_intensity_value(4) * _copy_tbs(), "that uses 4 bytes an element, or counts "
         "multiply-adds, not FLOP (either halves the intensity): bf16 is 2 bytes, a multiply-add 2 FLOP."),
        (lambda want: want * 1000, "that is GFLOP/s (intensity times GB/s): divide by 1000."),
        (lambda want: _copy_tbs() / stage0_intensity_value(), "the roof is intensity times bandwidth, "
                                                              "not bandwidth over intensity."),
        # A roof worked out right from one of the intensity question's wrong intensities (the 4-byte
        # one is named above): the mistake is in the intensity.
        *[(lambda want, i=i: i * _copy_tbs(),
           f"your roof follows from an intensity of {i:.1f} FLOP/byte: check the intensity first.")
          for i in (_stage0_flop_and_bytes()[0] / (16 * 16 * BF16_BYTES),
                    _stage0_flop_and_bytes()[0] / (16 * 8 * BF16_BYTES),
                    stage0_intensity_value() * BF16_BYTES)],
    ],
)


# ---- exercise 2: why stage 1 pads its rows ------------------------------------------------------

def passes(pitch_bytes: int) -> int:
    """Passes through the banks for one 8 x 8 ldmatrix matrix whose 16-byte rows lie ``pitch_bytes``
    apart (notebook 02's bank model)."""
    return banks.bank_access([pitch_bytes * r for r in range(8)], itemsize=16).conflict_degree


pitch64_passes = NumberQuestion(
    what="passes with 64-byte rows",
    unit="passes through the banks",
    expected=lambda: passes(64),
    hint="the 32 banks of 4 bytes span 128 bytes: at which of the 128 bytes does each of the 8 rows start?",
    wrong=[
        (lambda want: passes(128), "that would be rows 128 bytes apart, all starting at bank 0; at 64 "
                                   "only every second row does."),
        (lambda want: passes(80), "that is the padded pitch of 80 bytes; unpadded, rows 0, 2, 4, 6 start "
                                  "at the same bank."),
        (lambda want: 128 // 64, "128 / 64 counts the rows that fit in the 128 bytes of banks, not the rows "
                                 "that share banks: rows 0, 2, 4, 6 all start at bank 0."),
    ],
)
