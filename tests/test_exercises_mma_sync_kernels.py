"""The exercises of notebook 07 (course_lib.exercises.mma_sync_kernels): the ldmatrix puzzle accepts
the course's addresses and every other function that gives the same rows, tells the unfilled starter
to fill it in, names each designed mistake, and rejects wrong addresses it was not designed around by
naming the first lane and register that receive the wrong elements; the questions' expected answers
are the models' and each listed wrong answer is told what it means."""

from __future__ import annotations

import numpy as np
import pytest

from course_lib import results
from course_lib.exercises import mma_sync_kernels as ex
from course_lib.model import banks
from course_lib.model.fragments import mma_m16n8k16
from course_lib.model.ldmatrix import ldmatrix_positions


def _check(puzzle, fn, capsys) -> tuple[bool, str, str]:
    """The verdict, what the check printed with its line breaks undone, and as printed."""
    verdict = puzzle.check(fn)
    out = capsys.readouterr().out
    return bool(verdict), " ".join(out.split()), out


def _answer(question, answer, capsys) -> tuple[bool, str]:
    verdict = question.check(answer)
    return bool(verdict), " ".join(capsys.readouterr().out.split())


def _fits(out: str) -> bool:
    return all(len(line) <= 100 for line in out.splitlines())


# ---- the puzzle: stage 1's ldmatrix addresses for A ------------------------------------------------

def test_the_reference_gives_every_lane_its_fragment_and_is_stage_1s_arithmetic():
    got = ldmatrix_positions(ex.stage1_a_row)
    for lane in range(32):
        assert ex.stage1_a_row(lane) == (lane % 16, 8 * (lane // 16))  # tc_1_mma_sync.cu's row and column
        for j in range(4):
            assert got[lane][j] == (mma_m16n8k16("A", lane, 2 * j), mma_m16n8k16("A", lane, 2 * j + 1))


@pytest.mark.parametrize("mine", [
    ex.stage1_a_row,
    lambda lane: (lane % 16, 8 * (lane // 16)),                       # the C++ as written
    lambda lane: (lane % 8 + 8 * ((lane // 8) % 2), 8 * (lane // 16)),  # the same rows, spelled otherwise
    lambda lane: [lane % 16, 8 * (lane // 16)],                       # a list
    lambda lane: (np.int64(lane % 16), np.int64(8 * (lane // 16))),   # numpy integers
], ids=["course", "cxx", "spelled", "list", "numpy"])
def test_the_puzzle_accepts_every_function_that_gives_the_same_rows(mine, capsys):
    ok, out, raw = _check(ex.ldmatrix_a, mine, capsys)
    assert ok and "solved — all 32 lanes receive exactly their A fragment" in out
    assert "2 16-23 0-7 8-15 a4, a5" in out and _fits(raw)
    assert "def stage1_a_row" in _revealed(ex.ldmatrix_a)


def test_the_unfilled_starter_is_told_to_fill_it_in(capsys):
    def my_a_row(lane):
        # TODO lines, unfilled
        return None
    ok, out, _ = _check(ex.ldmatrix_a, my_a_row, capsys)
    assert not ok and out == "Your ldmatrix addresses: not solved yet: your function returns None — fill in the TODO lines."
    ok, out, _ = _check(ex.ldmatrix_a, None, capsys)
    assert not ok and "no function yet" in out


@pytest.mark.parametrize("mine, words, first", [
    (lambda lane: (lane, 0), "below the 16 x 16 piece",
     "lane 0's register 2 receives A[16][0], A[16][1] (outside the piece); the mma wants its a4, a5 there, A[0][8], A[0][9]"),
    (lambda lane: (lane % 8, 8 * (lane // 8)), "side by side in rows 0-7",
     "lane 0's register 1 receives A[0][8], A[0][9] (its a4, a5); the mma wants its a2, a3 there, A[8][0], A[8][1]"),
    (lambda lane: (lane % 16, 8 * (lane % 2)), "not on the lane's parity",
     "lane 0's register 2 receives A[0][0], A[0][1] (its a0, a1)"),
    (lambda lane: (8 * (lane // 16), lane % 16), "rows and columns are swapped",
     "lane 0's register 1 receives A[0][8], A[0][9]"),
    (lambda lane: (lane % 8 + 8 * (lane // 16), 8 * ((lane // 8) % 2)), "matrices 1 and 2 are exchanged",
     "lane 0's register 1 receives A[0][8], A[0][9] (its a4, a5)"),
], ids=["lane-0", "side-by-side", "lane-parity", "swapped", "b-order"])
def test_each_designed_mistake_is_named_with_its_first_wrong_register(mine, words, first, capsys):
    ok, out, raw = _check(ex.ldmatrix_a, mine, capsys)
    assert not ok and words in out and f"The first wrong register: {first}" in out, out
    assert "Where your lanes point" in out and _fits(raw)


@pytest.mark.parametrize("mine, words", [
    (lambda lane: (lane % 16, 0), "matrices 0 and 2 point at the same rows of A"),
    (lambda lane: (lane % 16, 8 * ((lane // 8) % 2)), "matrices 0 and 2 point at the same rows of A"),
    (lambda lane: (lane % 16, 8 * (lane // 8)), "lane 16 points at A[0][16..23], outside the 16 x 16 piece"),
    (lambda lane: (lane % 16 + 1, 8 * (lane // 16)), "lane 15 points at A[16][0..7], outside"),
    (lambda lane: (lane % 16, 4 * (lane // 16)), "lane 16's row starts at column 4"),
    (lambda lane: (lane // 2, 8 * (lane % 2)), "other elements than a2j, a2j+1"),
    (lambda lane: (15 - lane % 16, 8 * (lane // 16)), "other elements than a2j, a2j+1"),
    (lambda lane: (lane // 4 + 8 * ((lane // 2) % 2), 8 * (lane // 16)), "other elements than a2j, a2j+1"),
], ids=["left-half", "x2-order", "columns-by-8", "off-by-one", "misaligned", "pairs", "reversed", "fragment-rows"])
def test_mistakes_it_was_not_designed_around_are_rejected_and_located(mine, words, capsys):
    ok, out, raw = _check(ex.ldmatrix_a, mine, capsys)
    assert not ok and words in out, out
    assert "The first wrong register: lane " in out and "of 128 registers are wrong" in out and _fits(raw)


def test_the_first_wrong_register_is_the_first_the_model_finds(capsys):
    def mine(lane):  # right everywhere but lane 13, which points at row 4 instead of 13
        return (4, 0) if lane == 13 else ex.stage1_a_row(lane)
    ok, out, _ = _check(ex.ldmatrix_a, mine, capsys)
    got = ldmatrix_positions(mine)
    wrong = [(lane, j) for lane in range(32) for j in range(4)
             if got[lane][j] != (mma_m16n8k16("A", lane, 2 * j), mma_m16n8k16("A", lane, 2 * j + 1))]
    lane, j = wrong[0]
    assert not ok and f"lane {lane}'s register {j} receives" in out and f"{len(wrong)} of 128 registers" in out
    # lane 13 gives row 5 of matrix 1, which the four lanes of group g = 5 receive in register 1
    assert wrong == [(20, 1), (21, 1), (22, 1), (23, 1)]


@pytest.mark.parametrize("mine, words", [
    (lambda lane: (lane % 16, 8 * (lane / 16)), "in Python / divides into a float"),
    (lambda lane: lane, "lane 0 returns 0: return (row, column)"),
    (lambda lane: None if lane > 20 else ex.stage1_a_row(lane), "lane 21 returns None"),
    (lambda lane: (lane % 16 - 1, 0), "lane 0 points at A[-1][0..7], outside"),
    (lambda lane: 1 // (lane - 3), "raised ZeroDivisionError for lane 3"),
])
def test_answers_of_the_wrong_kind_say_what_to_return(mine, words, capsys):
    ok, out, _ = _check(ex.ldmatrix_a, mine, capsys)
    assert not ok and words in out, out


# ---- exercise 1: stage 0 on the roofline ---------------------------------------------------------

def test_stage0_intensity_and_roof(capsys):
    assert ex.stage0_intensity.expected() == pytest.approx(2 * 16 * 8 * 16 / ((16 * 16 + 16 * 8) * 2))
    copy_tbs = results.load().ceilings["copy_bandwidth_gbs"] / 1000
    assert ex.stage0_roof.expected() == pytest.approx(16 / 3 * copy_tbs)
    assert _answer(ex.stage0_intensity, 5.33, capsys)[0]
    for answer, words in [(2.67, "4 bytes an element"), (8, "only A's bytes"), (16, "only B's bytes"),
                          (10.67, "FLOP per element")]:
        ok, out = _answer(ex.stage0_intensity, answer, capsys)
        assert not ok and words in out, (answer, out)
    want = ex.stage0_roof.expected()
    for answer, words in [(want / 2, "4 bytes an element"), (want / 2, "multiply-adds"), (want * 1000, "GFLOP/s"),
                          (copy_tbs / (16 / 3), "not bandwidth over intensity")]:
        ok, out = _answer(ex.stage0_roof, answer, capsys)
        assert not ok and words in out, (answer, out)
    # a roof worked out right from a wrong intensity (each the intensity question's) points back to it
    for intensity in (8, 16, 2 * 16 / 3):
        ok, out = _answer(ex.stage0_roof, intensity * copy_tbs, capsys)
        assert not ok and f"follows from an intensity of {intensity:.1f} FLOP/byte: check the intensity first" in out


# ---- exercise 2: why stage 1 pads its rows ----------------------------------------------------------

def test_pitch64_passes(capsys):
    model = banks.bank_access([64 * r for r in range(8)], itemsize=16).conflict_degree
    assert ex.pitch64_passes.expected() == model == 4
    assert ex.passes(80) == 1  # stage 1's padded pitch: one pass
    for answer, words in [(8, "128 bytes apart"), (1, "padded pitch of 80"), (2, "fit in the 128 bytes")]:
        ok, out = _answer(ex.pitch64_passes, answer, capsys)
        assert not ok and words in out, (answer, out)


def _revealed(puzzle) -> str:
    """What a puzzle's solution button shows once pressed (the course's code, as text)."""
    box = puzzle.solution()
    box.button.click()
    return "".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("data", {}).get("text/html", ""))
                   for o in box.output.outputs)


def test_ldmatrix_rows_returned_as_a_numpy_array_are_read_as_the_pair(capsys):
    # a fresh learner's right answer, refused with "returns array([0, 0]): ... two whole numbers"
    assert ex.ldmatrix_a.check(lambda lane: np.array(ex.stage1_a_row(lane)))
    assert "array(" not in capsys.readouterr().out
