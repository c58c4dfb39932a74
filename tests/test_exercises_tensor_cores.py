"""The puzzles and questions of notebooks 06-10: each puzzle's solution passes, its unfilled starter
is told to fill in the TODO lines, and realistic wrong solutions fail with the message that names
their mistake; each question's expected answer is the model's, and each likely wrong answer is told
what it means."""

from __future__ import annotations

import math
import re
import statistics

import pytest

from course_lib import results
import course_lib.exercises as ex
from course_lib.exercises import hopper_tensor_cores as ex_hopper
from course_lib.exercises import mma_sync_kernels as ex_mma
from course_lib.exercises import summary as ex_summary
from course_lib.exercises import tensor_cores as ex_tc
from course_lib.kernels import tensor_cores as tc
from course_lib.model import layout, waves
from course_lib.model.fragments import fragment_map


def _check(puzzle, fn, capsys) -> tuple[bool, str]:
    """The verdict, and what the check printed with its line breaks undone."""
    verdict = puzzle.check(fn)
    return bool(verdict), " ".join(capsys.readouterr().out.split())


def _answer(question, answer, capsys) -> tuple[bool, str]:
    verdict = question.check(answer)
    return bool(verdict), " ".join(capsys.readouterr().out.split())


def _printed_lines_fit(capsys_out: str) -> bool:
    return all(len(line) <= 100 for line in capsys_out.splitlines())


# ---- 06: which lane holds A[row][col] ------------------------------------------------------------

def _starter_a(row, col):
    # TODO lines, unfilled
    return None


def test_a_fragment_reference_and_solution_are_the_ptx_layout(capsys):
    fm = fragment_map("mma.m16n8k16", "A")
    for r in range(16):
        for c in range(16):
            assert ex_tc.a_owner(r, c) == (fm.owner[r, c], fm.reg[r, c])
            assert ex_tc.a_fragment.reference(r, c) == (fm.owner[r, c], fm.reg[r, c])
    ok, out = _check(ex_tc.a_fragment, ex_tc.a_owner, capsys)
    assert ok and "solved — right on all 256 cases" in out
    assert "def a_owner" in _revealed(ex_tc.a_fragment)


def test_a_fragment_tells_the_unfilled_starter_to_fill_it_in(capsys):
    ok, out = _check(ex_tc.a_fragment, _starter_a, capsys)
    assert not ok
    assert out == "Your map of A's fragment: not solved yet: your function returns None — fill in the TODO lines."
    ok, out = _check(ex_tc.a_fragment, None, capsys)
    assert not ok and "no function yet" in out


def test_a_fragment_names_rows_and_columns_swapped(capsys):
    def mine(row, col):  # the group from the column, the lane in the group from the row
        g, t = col % 8, (row % 8) // 2
        return 4 * g + t, row % 2 + 2 * (col // 8) + 4 * (row // 8)
    ok, out = _check(ex_tc.a_fragment, mine, capsys)
    assert not ok and "rows and columns are swapped" in out and "A[0][1]: yours gives (4, 0), the model (0, 1)" in out


def test_a_fragment_names_lanes_without_the_8_row_halves(capsys):
    def mine(row, col):
        return 4 * row + (col % 8) // 2, col % 2 + 2 * (row // 8) + 4 * (col // 8)
    ok, out = _check(ex_tc.a_fragment, mine, capsys)
    assert not ok and "runs past lane 31 for rows 8-15" in out and "A[8][0]: yours gives (32, 2)" in out


def test_a_fragment_names_i_without_the_upper_columns(capsys):
    def mine(row, col):
        return 4 * (row % 8) + (col % 8) // 2, col % 2 + 2 * (row // 8)
    ok, out = _check(ex_tc.a_fragment, mine, capsys)
    assert not ok and "your i ignores columns 8-15" in out


def test_a_fragment_names_the_halves_swapped_in_i(capsys):
    def mine(row, col):
        return 4 * (row % 8) + (col % 8) // 2, col % 2 + 4 * (row // 8) + 2 * (col // 8)
    ok, out = _check(ex_tc.a_fragment, mine, capsys)
    assert not ok and "it is the other way round" in out


def test_a_fragment_names_lane_4t_plus_g_and_t_col_mod_4(capsys):
    def lane_4t_g(row, col):
        return 4 * ((col % 8) // 2) + row % 8, col % 2 + 2 * (row // 8) + 4 * (col // 8)

    def t_mod_4(row, col):
        return 4 * (row % 8) + col % 4, col % 2 + 2 * (row // 8) + 4 * (col // 8)
    ok, out = _check(ex_tc.a_fragment, lane_4t_g, capsys)
    assert not ok and "your lane is 4t + g" in out
    ok, out = _check(ex_tc.a_fragment, t_mod_4, capsys)
    assert not ok and "t = col % 4 gives a lane every fourth column" in out


def test_a_fragment_names_lane_and_i_returned_in_the_wrong_order(capsys):
    def i_then_lane(row, col):
        g, t = row % 8, (col % 8) // 2
        return col % 2 + 2 * (row // 8) + 4 * (col // 8), 4 * g + t
    ok, out = _check(ex_tc.a_fragment, i_then_lane, capsys)
    assert not ok and "you return (i, lane); return (lane, i)" in out


def test_a_fragment_lists_the_cases_of_an_unknown_mistake_and_reports_an_exception(capsys):
    ok, out = _check(ex_tc.a_fragment, lambda row, col: (0, 0), capsys)
    assert not ok and "wrong on 255 of 256 cases" in out and "A[0][1]" in out
    ok, out = _check(ex_tc.a_fragment, lambda row, col: (32 // (row - 3), 0), capsys)
    assert not ok and "raised ZeroDivisionError for A[3][0]" in out


# ---- 06: the questions ---------------------------------------------------------------------------

def test_b_owner_is_the_ptx_layout_and_its_wrong_answers_are_named(capsys):
    fm = fragment_map("mma.m16n8k16", "B")
    assert ex_tc.b_owner.expected() == (fm.owner[11, 6], fm.reg[11, 6]) == (25, 3)
    ok, out = _answer(ex_tc.b_owner, (25, 3), capsys)
    assert ok
    for answer, words in [((10, 3), "4 * 6 + t, not 4t + 6"), ((27, 3), "t is (row % 8) // 2"),
                          ((25, 1), "add 2 to i"), ((15, 2), "with A's layout")]:
        ok, out = _answer(ex_tc.b_owner, answer, capsys)
        assert not ok and words in out, (answer, out)


def test_bf16_ridge_is_from_the_recorded_peaks(capsys):
    ceilings = results.load().ceilings
    want = ceilings["cublas_peak_tflops"]["bf16"] * 1000 / ceilings["copy_bandwidth_gbs"]
    assert ex_tc.bf16_ridge.expected() == pytest.approx(want)
    ok, out = _answer(ex_tc.bf16_ridge, 12 * 15, capsys)  # from the text's rounded numbers
    assert ok and f"= {want:.0f} FLOP/byte" in out  # a right answer is followed by the recorded ridge
    for answer, words in [(12, "the fp32 ridge"), (0.8, "divides by the factor"), (15, "the factor the peak"),
                          (2 * want, "2-byte elements"), (120, "Hint:"), (None, "no answer yet")]:
        ok, out = _answer(ex_tc.bf16_ridge, answer, capsys)
        assert not ok and words in out, (answer, out)
        assert f"{want:.0f} FLOP/byte" not in out, f"{answer!r} is shown the recorded ridge: {out}"


# ---- 08: the 128-byte swizzle --------------------------------------------------------------------

def test_swizzle_reference_and_solution(capsys):
    assert (ex_hopper.BOX_ROWS, ex_hopper.BOX_COLS) == (128, 64)  # A's box in the kernels: BLOCK_M x 64 bf16
    for r in range(128):
        for c in range(64):
            assert ex_hopper.swizzle_offset(r, c) == layout.tma_box_offset(r, c)
    ok, out = _check(ex_hopper.swizzle, ex_hopper.swizzle_offset, capsys)
    assert ok and "solved — right on all 8192 cases" in out and "first row" not in out


def test_swizzle_tells_the_unfilled_starter_to_fill_it_in(capsys):
    ok, out = _check(ex_hopper.swizzle, lambda row, col: None, capsys)
    assert not ok and out == "Your swizzle: not solved yet: your function returns None — fill in the TODO lines."


@pytest.mark.parametrize("mine, words", [
    (lambda row, col: row * 128 + col * 2, "the swizzle is missing"),
    (lambda row, col: row * 128 + (((col * 2) // 16) ^ row) * 16 + (col * 2) % 16, "takes row % 8, not the row"),
    (lambda row, col: row * 128 + ((col * 2) ^ (row % 8)), "XOR the chunk index (byte // 16)"),
    (lambda row, col: row * 128 + (((col * 4) // 16) ^ (row % 8)) * 16 + (col * 4) % 16, "2 bytes, not 4"),
    (lambda row, col: row * 128 + (((col * 2) // 16) ^ (row % 8)) * 16, "place inside its chunk"),
    (lambda row, col: row * 128 + ((((col * 2) // 16) + row % 8) % 8) * 16 + (col * 2) % 16, "it is an XOR"),
    (lambda row, col: row * 128 + ((((col * 2) // 16) - row) % 8) * 16 + (col * 2) % 16, "not a rotation"),
], ids=["no-xor", "xor-row", "xor-bytes", "4-bytes", "no-byte-in-chunk", "rotate", "rotate-back"])
def test_swizzle_names_realistic_mistakes(mine, words, capsys):
    ok, out = _check(ex_hopper.swizzle, mine, capsys)
    assert not ok and words in out


def test_swizzle_without_a_known_mistake_lists_cases(capsys):
    ok, out = _check(ex_hopper.swizzle, lambda row, col: layout.tma_box_offset(row, col) if row < 63 else 0, capsys)
    assert not ok and "wrong on 4160 of 8192 cases" in out and "element (63, 1): yours gives 0" in out
    assert "the first row where yours differs: row 63 of the box's 128 (rows 0-62 are right)" in out


@pytest.mark.parametrize("mine, words, first_row", [
    # the whole box of 128 rows: rows 64-127 of A's box are where a formula that wraps at 64 fails
    (lambda row, col: (row % 64) * 128 + (((col * 2) // 16) ^ (row % 8)) * 16 + (col * 2) % 16,
     "start again at row 64: the kernels' box of A has 128 rows", 64),
    (lambda row, col: layout.tma_box_offset(row & 63, col), "start again at row 64", 64),
    (lambda row, col: (row % 8) * 128 + (((col * 2) // 16) ^ (row % 8)) * 16 + (col * 2) % 16,
     "the row's start takes row % 8", 8),
    (lambda row, col: row * 128 + (((col * 2) // 16) ^ (row % 16)) * 16 + (col * 2) % 16, None, 8),
    (lambda row, col: row * 128 + (((col * 2) // 16) ^ (row // 8 % 8)) * 16 + (col * 2) % 16, None, 1),
    (lambda row, col: 64 * row + (((col * 2) // 16) ^ (row % 8)) * 16 + (col * 2) % 16, None, 1),
], ids=["wraps-at-64", "row-bits-6", "row-start-mod-8", "xor-row-mod-16", "xor-row-div-8", "64-byte-rows"])
def test_swizzle_checks_every_row_of_the_box_and_names_the_first_wrong_one(mine, words, first_row, capsys):
    ok, out = _check(ex_hopper.swizzle, mine, capsys)
    assert not ok and f"the first row where yours differs: row {first_row} of the box's 128" in out
    if words:
        assert words in out
    else:  # a mistake the check has no name for: it lists the cases
        assert "of 8192 cases" in out


# ---- 08: the questions ---------------------------------------------------------------------------

def test_swizzled_offset_question(capsys):
    assert ex_hopper.swizzled_offset.expected() == layout.tma_box_offset(3, 44) == 3 * 128 + 16 * (5 ^ 3) + 8 == 488
    for answer, words in [(472, "without the swizzle"), (475, "not the byte offset"), (512, "4 bytes"),
                          (480, "start of the right chunk"), (104, "3 rows of 128 bytes earlier"),
                          (244, "counts elements"), (392, "not a rotation"), (424, "not a rotation"),
                          (504, "as an OR (5 | 3)")]:
        ok, out = _answer(ex_hopper.swizzled_offset, answer, capsys)
        assert not ok and words in out, (answer, out)
    # the element tells the XOR from the other operations a learner may hold: each gives another chunk
    row, chunk = 3, 2 * 44 // 16
    assert len({chunk ^ row, (chunk + row) % 8, (chunk - row) % 8, chunk | row, chunk & row, chunk}) == 6


def test_box_lbo_question_names_answers_and_counts_misread_elements(capsys):
    assert ex_hopper.box_lbo.expected() == 32 * 128 and ex_hopper.lbo_mismatches(4096) == 0
    assert ex_hopper.right_lbo(64) == tc.B_LBO  # the same search finds the kernels' LBO for their boxes
    ok, out = _answer(ex_hopper.box_lbo, 4096, capsys)
    assert ok and "with LBO" not in out
    for answer, words in [(8192, "boxes of 64 rows"), (8192, "4 bytes an element"), (1024, "that is SBO"),
                          (128, "one row of a box"), (2048, "without their 2 bytes"),
                          (2048, "16 rows of one wgmma's slice"), (256, "units of 16 bytes")]:
        ok, out = _answer(ex_hopper.box_lbo, answer, capsys)
        assert not ok and words in out and f"with LBO = {answer}: {ex_hopper.lbo_mismatches(answer)} of 4096" in out
    for answer in (float("nan"), float("inf"), -float("inf")):  # told it is not it, never an error
        ok, out = _answer(ex_hopper.box_lbo, answer, capsys)
        assert not ok and "with LBO" not in out
    ok, out = _answer(ex_hopper.box_lbo, "4096", capsys)
    assert not ok and "with LBO" not in out  # no count for something that is not a number
    assert "give a number (bytes), not the text '4096'" in out


@pytest.mark.parametrize("answer, kind", [("488", "the text '488'"), (lambda: 488, "a function"),
                                          ([488], "a list"), (True, "a bool")])
def test_08_questions_ask_for_a_number(answer, kind, capsys):
    for question in (ex_hopper.swizzled_offset, ex_hopper.box_lbo):
        ok, out = _answer(question, answer, capsys)
        assert not ok and f"give a number ({question.unit}), not {kind}" in out, out
        assert "Hint" not in out
    assert _answer(ex_hopper.swizzled_offset, 488.0, capsys)[0]


# ---- 10: a plan per shape -------------------------------------------------------------------------

def _starter_plan(M, N, K):
    return None


def test_plan_model_is_the_wave_model():
    e = ex_summary.estimate(2048, 2304, 768, 128, 256, 1)
    w = waves.gemm_waves(2048, 2304, 128, 256, occupancy=1)
    assert (e.programs, e.waves, e.busy) == (w.blocks, w.waves, w.efficiency) == (144, 2, 144 / 264)
    e2 = ex_summary.estimate(768, 2304, 16384, 128, 256, 2)
    assert (e2.programs, e2.waves) == (108, 1)
    assert e2.k_share == pytest.approx(128 / (128 + ex_summary.FILL_SLICES + ex_summary.partial_slices(128, 256)))
    assert ex_summary.estimate(4096, 1600, 6400, 128, 256, 1).useful == pytest.approx(1600 / 1792)


def test_plan_model_constants_come_from_the_course():
    from course_lib.kernels.coalescing_and_triton.fast_configs import FAST_CONFIGS

    assert ex_summary.FILL_SLICES == FAST_CONFIGS["bf16"][0].num_stages
    assert FAST_CONFIGS["bf16"][0].block_k == ex_summary.BLOCK_K
    # the half tile's rate: the recording's best 128 x 128 candidate against the best whole 128 x 256
    # one, at the prefill rows where both fill their waves (at least 90 % busy)
    ratios = []
    for t in results.summary("shape_table")["triton_fast_tuning"]:
        shape = (t["M"], t["N"], t["K"])
        if t["dtype"] != "bf16" or t["M"] <= 64:
            continue
        if min(ex_summary.estimate(*shape, bm, bn, 1).busy for bm, bn in ex_summary.TILES) < 0.9:
            continue
        ms = t["candidates_ms"]
        big = min(v for k, v in ms.items() if v and k.startswith("128x256") and "splitK" not in k)
        half = min(v for k, v in ms.items() if v and k.startswith("128x128"))
        ratios.append(big / half)
    assert len(ratios) >= 4 and abs(statistics.median(ratios) - ex_summary.HALF_TILE_RATE) < 0.03
    # the plan's rule is stage 6's
    assert (tc.STREAM_K_BELOW, tc.STREAM_K_MIN_SLICES) == (0.8, 32)


def test_plan_reference_passes_and_prints_the_recording(capsys):
    ok, out = _check(ex_summary.tile_plan, ex_summary.plan, capsys)
    assert ok and f"solved — at least 92 % of the model's best plan at all {len(ex_summary.plan_shapes())} shapes" in out
    assert "recorded on the H200" in out and "gpt2 qkv 2k 128x128, split 1 100 % 128x128, split 1" in out
    # a table row whose autotuned choice the recording did not keep says so; an unseen shape has "-"
    assert out.count("choice not kept") == 1, out
    assert re.search(r"llama3 o 512 128x\d+, split \d +\d+ % choice not kept", out), out
    assert re.search(r"gpt2 dW proj 128x\d+, split \d +\d+ % - ", out), out
    assert "def plan" in _revealed(ex_summary.tile_plan)


def test_plan_recorded_labels_read_as_plans():
    assert ex_summary.recorded_plan("128x256x64 g8 w8 s3 persistent split2") == (128, 256, 1)
    assert ex_summary.recorded_plan("128x256x64 g8 w8 s3 splitK2") == (128, 256, 2)
    assert ex_summary.recorded_choices()[(2048, 2304, 768)].startswith("128x128")


def test_plan_tells_the_unfilled_starter_to_fill_it_in(capsys):
    ok, out = _check(ex_summary.tile_plan, _starter_plan, capsys)
    assert not ok and out == "Your plan: not solved yet: your function returns None — fill in the TODO lines."
    ok, out = _check(ex_summary.tile_plan, None, capsys)
    assert not ok and "no function yet" in out


@pytest.mark.parametrize("kind", ["float", "numpy int", "numpy array", "list"])
def test_plan_reads_whole_floats_and_numpy_ints_as_the_integers_they_are(capsys, kind):
    """(128.0, 256.0, 1.0) was told its plan was wrong while the message showed (128, 256, 1)."""
    import numpy as np

    as_kind = {"float": lambda p: tuple(float(v) for v in p), "numpy int": lambda p: tuple(np.int64(v) for v in p),
               "numpy array": np.array, "list": list}[kind]
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: as_kind(ex_summary.plan(M, N, K)), capsys)
    assert ok and "solved" in out, out
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: as_kind((128, 256, 1)), capsys)
    assert not ok and "always the biggest tile" in out, out


@pytest.mark.parametrize("plan", [(128.5, 256, 1), (True, 256, 1), ("128", 256, 1), (128, 256), (64, 64, 1)])
def test_plan_refuses_what_is_not_three_whole_numbers_of_a_tile_and_split(capsys, plan):
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: plan, capsys)
    assert not ok and "a plan is (block_m, block_n, split_k)" in out, out


def test_plan_names_always_the_biggest_tile(capsys):
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (128, 256, 1), capsys)
    assert not ok and "always the biggest tile" in out and "round tiles / 132 up" in out
    assert "gpt2 qkv 2k (2048, 2304, 768): yours reaches 83 % of the best" in out
    assert "recorded on the H200: triton_fast bf16 ran 128x128, split 1" in out


def test_plan_names_a_waves_count_not_rounded_up(capsys):
    def mine(M, N, K):  # waves as a fraction: every plan looks fully busy, so the big tile wins
        tiles = math.ceil(M / 128) * math.ceil(N / 256)
        return (128, 256, 1) if tiles / (tiles / 132 * 132) >= 0.8 else (128, 128, 1)
    ok, out = _check(ex_summary.tile_plan, mine, capsys)
    assert not ok and "always the biggest tile" in out and "Waves are whole" in out


def test_plan_names_split_k_where_k_is_short(capsys):
    def mine(M, N, K):
        tiles = math.ceil(M / 128) * math.ceil(N / 256)
        return (128, 256, 2) if tiles / (math.ceil(tiles / 132) * 132) < 0.8 else (128, 256, 1)
    ok, out = _check(ex_summary.tile_plan, mine, capsys)
    assert not ok and "split-K where K is short" in out and "ranges of 6 K-slices" in out


def test_plan_names_always_the_half_tile_and_split_everywhere(capsys):
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (128, 128, 1), capsys)
    assert not ok and "always the 128 x 128 tile" in out and "0.9 of the big tile's rate" in out
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (128, 256, 2) if K >= 2048 else (128, 256, 1), capsys)
    assert not ok and "split-K where the tiles already fill the SMs" in out


def test_plan_rejects_a_plan_outside_the_allowed_set_and_reports_other_mistakes(capsys):
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (64, 64, 1), capsys)
    assert not ok and "returns (64, 64, 1); a plan is (block_m, block_n, split_k)" in out
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (128, 128, 4), capsys)
    n = len(ex_summary.plan_shapes())
    low = re.search(rf"below 92 % of the model's best plan at (\d+) of {n} shapes: split-K where the tiles", out)
    assert not ok and low and int(low.group(1)) >= n - 1, out  # (one short prompt's 384 rows: four ranges pass)
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (128, 256, 1) if M != 768 else 1 / 0, capsys)
    assert not ok and "raised ZeroDivisionError at gpt2 dW qkv" in out


def _whole_tile_busy(M, N):
    tiles = math.ceil(M / 128) * math.ceil(N / 256)
    return tiles, tiles / (math.ceil(tiles / 132) * 132)


def test_plan_shapes_need_split_k_and_the_right_number_of_ranges():
    """The hidden weight gradients: where only split-K meets the goal (no plan without a split does),
    where four ranges fall short and two meet it, and where every split falls short."""
    def passing(shape):
        best = ex_summary.best_estimate(*shape).score
        return {(bm, bn, s) for bm, bn in ex_summary.TILES for s in ex_summary.SPLITS
                if ex_summary.estimate(*shape, bm, bn, s).score >= ex_summary.GOAL * best}

    shapes = {s.label: s.shape for s in ex_summary.plan_shapes()}
    # the table's prefill and training rows but its two squares (13), and the nine hidden ones
    assert len(shapes) == 22 and {s.label for s in ex_summary.HIDDEN_SHAPES} <= set(shapes)
    for label in ("gpt2 dW proj", "gpt2-xl dW proj"):
        assert all(split > 1 for _, _, split in passing(shapes[label])), label
    assert (128, 256, 2) in passing(shapes["gpt2 dW qkv 6k"]) and (128, 256, 4) not in passing(shapes["gpt2 dW qkv 6k"])
    assert all(split == 1 for _, _, split in passing(shapes["gpt2 dW qkv 1.5k"]))
    for shape in shapes.values():
        assert ex_summary.plan(*shape) in passing(shape)


def _never_splits(M, N, K):  # the lesson without its split-K step: a smaller tile wherever tiles are few
    return (128, 256, 1) if _whole_tile_busy(M, N)[1] >= 0.8 else (128, 128, 1)


def _splits_in_four(M, N, K):  # the course's rule, but always four ranges where it splits
    if _whole_tile_busy(M, N)[1] >= 0.8:
        return (128, 256, 1)
    return (128, 256, 4) if math.ceil(K / 64) >= 32 else (128, 128, 1)


def _splits_in_two(M, N, K):  # always two ranges where it splits
    if _whole_tile_busy(M, N)[1] >= 0.8:
        return (128, 256, 1)
    return (128, 256, 2) if math.ceil(K / 64) >= 32 else (128, 128, 1)


def _big_tile_or_split_by_k(M, N, K):  # never halves: whole tiles unless K is long, then four ranges
    if _whole_tile_busy(M, N)[1] >= 0.8:
        return (128, 256, 1)
    return (128, 256, 4) if K >= 4096 else (128, 256, 1)


@pytest.mark.parametrize("mine, words, where", [
    (_never_splits, "no split-K where whole tiles are too few and K is long", "gpt2 dW proj (768, 768, 16384)"),
    (lambda M, N, K: (128, 256, 1) if _whole_tile_busy(M, N)[1] >= 0.8 or K < 2048 else (128, 128, 1),
     "no split-K where whole tiles are too few and K is long", "gpt2-xl dW proj (1600, 1600, 16384)"),
    (_splits_in_four, "more ranges of K than the SMs need", "gpt2 dW qkv 6k (768, 2304, 6144): yours reaches 85 %"),
    (_splits_in_two, "too few ranges of K", "gpt2 dW proj (768, 768, 16384): yours reaches 53 %"),
    (_big_tile_or_split_by_k, "the big tile where its tiles leave most of the last wave empty, or are fewer "
                              "than the SMs: there more programs keep more SMs busy", "gpt2 qkv 2k"),
], ids=["never-splits", "never-splits-big-where-k-short", "always-four-ranges", "always-two-ranges",
        "splits-by-k-alone"])
def test_plan_names_the_split_k_idea_a_plan_misses(mine, words, where, capsys):
    ok = ex_summary.tile_plan.check(mine)
    raw = capsys.readouterr().out
    out = " ".join(raw.split())
    assert not ok and words in out and where in out, out
    assert "Choose the ranges from the tiles" in out or "Split only where K is long" in out
    assert _printed_lines_fit(raw)


def _rule_with(*, waves_of=lambda t: math.ceil(t / 132), threshold=0.8, long_k=lambda K: K >= 2048,
               ranges=lambda busy: max((1, 2, 4), key=busy)):
    """The course's rule with one slip in one step (a fresh adversarial learner's plans)."""
    def plan(M, N, K):
        tiles = math.ceil(M / 128) * math.ceil(N / 256)

        def busy(r):
            return tiles * r / (waves_of(tiles * r) * 132)

        if busy(1) >= threshold:
            return (128, 256, 1)
        return (128, 256, ranges(busy)) if long_k(K) else (128, 128, 1)
    return plan


@pytest.mark.parametrize("mine, where", [
    (_rule_with(waves_of=lambda t: t // 132 + 1), "gpt2 fc 1408"),          # one full wave counted as two
    (_rule_with(threshold=0.7), "llama3 o 1.5k"),                           # 73 % busy kept whole
    (lambda M, N, K: _rule_with()(M, N, K) if _whole_tile_busy(M, N)[1] >= 0.8 or K >= 8192 else (128, 128, 1),
     "gpt2 dW proj 6k"),                                                    # split only past 8192
])
def test_plan_refuses_a_slip_in_one_step_of_the_rule(mine, where, capsys):
    assert _rule_with()(1, 1, 1) == ex_summary.plan(1, 1, 1)
    assert all(_rule_with()(*s.shape) == ex_summary.plan(*s.shape) for s in ex_summary.plan_shapes())
    ok, out = _check(ex_summary.tile_plan, mine, capsys)
    assert not ok and where in out, out


def test_plan_names_a_second_idea_it_misses(capsys):
    ok, out = _check(ex_summary.tile_plan, _big_tile_or_split_by_k, capsys)
    assert not ok and "Also: more ranges of K than the SMs need" in out


def test_plan_without_a_named_idea_lists_its_shapes(capsys):
    # right on the table, a fixed plan of its own at the hidden shapes: still below the goal there
    hidden = {s.shape for s in ex_summary.HIDDEN_SHAPES}
    ok, out = _check(ex_summary.tile_plan, lambda M, N, K: (128, 128, 2) if (M, N, K) in hidden else ex_summary.plan(M, N, K),
                     capsys)
    assert not ok and "gpt2 dW qkv 1.5k (768, 2304, 1536): yours reaches" in out


# ---- 10: the questions ---------------------------------------------------------------------------

def test_intensity_and_ridge_questions(capsys):
    assert ex_summary.intensity_192.expected() == 2 * 192 * 192 / (2 * 384) == 96
    rec = results.load()
    ridge = rec.ceilings["cublas_peak_tflops"]["bf16"] / (rec.ceilings["copy_bandwidth_gbs"] / 1000)
    assert ex_summary.ridge_side.expected() == ("left" if 96 < ridge else "right") == "left"
    for answer, words in [(48, "4 bytes an element"), (192, "FLOP per element"), (1, "not K BM BN")]:
        ok, out = _answer(ex_summary.intensity_192, answer, capsys)
        assert not ok and words in out, (answer, out)
    ok, out = _answer(ex_summary.ridge_side, "right", capsys)
    assert not ok and f"further right, at {ridge:.0f} FLOP/byte" in " ".join(out.split())  # as 08 prints it


def test_waves_6144_questions(capsys):
    w = waves.gemm_waves(6144, 6144, 128, 256, occupancy=1)
    assert (ex_summary.tiles_6144.expected(), ex_summary.waves_6144.expected()) == (w.blocks, w.waves) == (1152, 9)
    assert round(ex_summary.last_wave_6144.expected()) == round(100 * w.tail_utilisation) == 73
    for q, answer, words in [(ex_summary.tiles_6144, 2304, "128 x 128 tiles"), (ex_summary.tiles_6144, 576, "256 x 256"),
                             (ex_summary.waves_6144, 8.73, "round the division up"),
                             (ex_summary.waves_6144, 8.7, "round the division up"),
                             (ex_summary.waves_6144, 8, "rounded down"),
                             (ex_summary.last_wave_6144, 27, "idle share"),
                             (ex_summary.last_wave_6144, 96, "number of tiles in the last wave"),
                             (ex_summary.last_wave_6144, 97, "over all the waves")]:
        ok, out = _answer(q, answer, capsys)
        assert not ok and words in out, (answer, out)
    assert _answer(ex_summary.last_wave_6144, 72.7, capsys)[0]


def test_last_wave_6144_is_centred_on_the_exact_share_rounded_as_written(capsys):
    """96 of 132 SMs busy is 72.727... %: right when rounded to the decimals the answer is written with
    (73, 72.7, 72.73, a numpy float32 72.7); 72 and 72.72 are cut down, and said so; 73.7, 72.3 and 73.2
    are not 72.73 at their precision (73.7 passed when the tolerance was 1 % around 73)."""
    import numpy as np

    exact = 100 * waves.gemm_waves(6144, 6144, 128, 256, occupancy=1).tail_utilisation
    assert math.isclose(ex_summary.last_wave_6144.expected(), exact)
    for answer in (73, 72.7, 72.73, 72.727, exact, np.float32(72.7), np.int64(73)):
        ok, out = _answer(ex_summary.last_wave_6144, answer, capsys)
        assert ok and "is right" in out, (answer, out)
    for answer in (72, 72.72):
        ok, out = _answer(ex_summary.last_wave_6144, answer, capsys)
        assert not ok and "cut down, not rounded to the nearest" in out, (answer, out)
    for answer in (73.7, 72.3, 73.2, 72.8, 74):
        ok, out = _answer(ex_summary.last_wave_6144, answer, capsys)
        assert not ok and "nearest whole per cent" in out, (answer, out)   # the hint says the precision
    for answer, words in [(27.3, "idle share"), (0.727, "a fraction"), (96.97, "over all the waves")]:
        ok, out = _answer(ex_summary.last_wave_6144, answer, capsys)
        assert not ok and words in out, (answer, out)


@pytest.mark.parametrize("answer", [8.727, 8.7272, 8.72727272, 8.73, 8.7, 8.5, 8.1])
def test_waves_6144_tells_every_fraction_of_waves_to_round_up(capsys, answer):
    ok, out = _answer(ex_summary.waves_6144, answer, capsys)
    assert not ok and "round the division up" in out, out


def test_one_wave_question(capsys):
    assert ex_summary.one_wave_n.expected() == 2112  # 11 x 11 tiles of 192 x 192
    assert waves.gemm_waves(2304, 2304, 192, 192, occupancy=1).waves == 2
    for answer, words in [(2048, "stage 6's 128 x 256 tiles"), (2304, "one step too far"), (25344, "132 tiles in a row")]:
        ok, out = _answer(ex_summary.one_wave_n, answer, capsys)
        assert not ok and words in out, (answer, out)


def test_swizzle_names_an_xor_of_the_element_and_columns_taken_for_bytes(capsys):
    from course_lib.exercises import hopper_tensor_cores

    assert not hopper_tensor_cores.swizzle.check(lambda r, c: 128 * r + 2 * (c ^ (r % 8)))
    assert "you XOR the element index" in " ".join(capsys.readouterr().out.split())
    assert not hopper_tensor_cores.swizzle.check(lambda r, c: 128 * r + 16 * ((c // 16) ^ (r % 8)) + c % 16)
    assert "col counts elements of 2 bytes" in " ".join(capsys.readouterr().out.split())


def test_answers_in_another_spelling_are_read_as_meant(capsys):
    from course_lib.exercises import summary, tensor_cores

    assert tensor_cores.b_owner.check(list(tensor_cores.b_owner.expected()))
    assert summary.ridge_side.check("Left ")


def _revealed(puzzle) -> str:
    """What a puzzle's solution button shows once pressed (the course's code, as text)."""
    box = puzzle.solution()
    box.button.click()
    return "".join(str(o.get("data", {}).get("text/plain", "")) + str(o.get("data", {}).get("text/html", ""))
                   for o in box.output.outputs)


# ---- a fresh adversarial learner's findings (06-08) ---------------------------------------------

def _said(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_a_map_returned_as_a_numpy_array_is_read_as_its_pair(capsys):
    import numpy as np  # noqa: PLC0415

    assert ex_tc.a_fragment.check(lambda r, c: np.array(ex_tc.a_owner(r, c)))
    assert ex_hopper.swizzle.check(lambda r, c: np.array([ex_hopper.swizzle_offset(r, c)])[0])
    assert ex_tc.b_owner.check(np.array(ex_tc._owner("B", *ex_tc.B_ELEMENT)))
    wrong = lambda r, c: np.array(ex_tc.a_owner(c, r))  # noqa: E731 - rows and columns swapped
    assert not ex_tc.a_fragment.check(wrong)
    assert "array(" not in _said(capsys)


def test_an_answer_typed_as_text_is_told_to_drop_the_quotes(capsys):
    lane, i = ex_tc._owner("B", *ex_tc.B_ELEMENT)
    assert not ex_tc.b_owner.check(f"({lane}, {i})")
    assert f"is text: write it without the quotes, ({lane}, {i})" in _said(capsys)


def test_a_number_tolerance_is_measured_from_the_answer(capsys):
    want = ex_tc.bf16_ridge.expected()
    assert ex_tc.bf16_ridge.check(want * 1.149) and ex_tc.bf16_ridge.check(want * 0.851)
    assert not ex_tc.bf16_ridge.check(want * 1.16)  # math.isclose, from the larger, let 17 % above pass
    assert not ex_tc.bf16_ridge.check(want * 0.84)


def test_a_value_that_prints_as_the_answer_but_is_not_it_says_so(capsys):
    want = ex_hopper.swizzled_offset.expected()
    assert not ex_hopper.swizzled_offset.check(want + 1e-7)
    assert "prints as" in _said(capsys)


def test_an_lbo_that_is_no_multiple_of_16_is_told_so(capsys):
    right = ex_hopper.right_lbo()
    assert not ex_hopper.box_lbo.check(right + 1)
    out = _said(capsys)
    assert "units of 16 bytes" in out and "0 of 4096 elements" not in out


def test_a_swizzle_that_divides_into_floats_gets_the_floor_division_hint(capsys):
    assert not ex_hopper.swizzle.check(lambda r, c: 128 * r + 16 * ((2 * c / 16) ^ (r % 8)) + 2 * c % 16)
    assert "// keeps whole numbers" in _said(capsys)


# ---- a fresh adversarial learner's findings (06-08, the third session of 2026-12-06) ---------------

def test_a_function_that_counts_its_calls_is_not_right_by_the_order_of_the_cases():
    """The cases are asked in a shuffled order: answers replayed in row-major order are wrong."""
    answers = iter([ex_tc._owner("A", r, c) for r in range(16) for c in range(16)])
    assert not ex_tc.a_fragment.check(lambda row, col: next(answers))


def test_a_learner_cannot_change_the_answers_the_check_reads(capsys):
    def overwrites_the_reference(row, col):
        ex_tc._fragment_map("A").owner[row, col] = 0
        return 0, 0

    assert not ex_tc.a_fragment.check(overwrites_the_reference)
    assert "read-only" in _said(capsys)
    assert ex_tc.a_fragment.check(ex_tc.a_owner)  # the next learner's right answer still passes


def test_b_owner_reads_the_figures_labels_and_names_a_swapped_pair(capsys):
    lane, i = ex_tc._owner("B", *ex_tc.B_ELEMENT)
    for answer in ((lane, f"b{i}"), (f"T{lane}", f"b{i}"), [f"lane {lane}", i]):
        assert ex_tc.b_owner.check(answer), answer
    assert not ex_tc.b_owner.check((f"b{i}", f"T{lane}"))  # each label in its own place
    capsys.readouterr()
    assert not ex_tc.b_owner.check((i, lane))
    assert "in the wrong order: give (lane, i)" in _said(capsys)


def test_the_fp8_ridge_is_named_as_such(capsys):
    assert not ex_tc.bf16_ridge.check(ex.recorded_ridge("e4m3"))
    said = _said(capsys)
    assert "FP8's ridge" in said and "doubles it" not in said


def test_stage0_roof_agrees_with_the_intensity_question(capsys):
    bw = ex.recorded_copy_gbs() / 1000
    for intensity in (5.33, 16 / 3):
        assert ex_mma.stage0_roof.check(intensity * bw)
    assert ex_mma.stage0_roof.check(23)  # the solution's "about 23"
    assert not ex_mma.stage0_intensity.check(5.4) and not ex_mma.stage0_roof.check(5.4 * bw)
    for unit_slip in (16 / 3 * bw * 1.024, 16 / 3 * bw / 1.024):  # TB/s read as 1024 GB/s
        assert not ex_mma.stage0_roof.check(unit_slip)


def test_a_number_beyond_a_floats_range_is_told_it_is_not_it(capsys):
    """A check never raises: an int or a fraction past a float's range compares as infinity would."""
    from fractions import Fraction  # noqa: PLC0415

    for question in (ex_hopper.swizzled_offset, ex_hopper.box_lbo, ex_mma.stage0_intensity, ex_mma.stage0_roof):
        for answer in (10 ** 400, -10 ** 400, Fraction(10 ** 400, 3)):
            ok, out = _answer(question, answer, capsys)
            assert not ok and "not it" in out, (question.what, out)


def test_a_tolerance_is_printed_as_it_is(capsys):
    want = ex_mma.stage0_roof.expected()
    ok, out = _answer(ex_mma.stage0_roof, want * 1.019, capsys)
    assert not ok and "answers within 1.2 % of it count" in out
    assert ex_tc.b_owner.check((25, "B3"))
