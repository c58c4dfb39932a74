"""One policy for answers that are numbers (course_lib.exercises.NumberQuestion), one way to print a line
after a right answer (Question.after_right), and one place for the recorded roofs the checks compute
with (recorded_copy_gbs, recorded_ridge), across the tensor-core notebooks 06-12; the number policy also
across notebooks 00-05."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from course_lib import exercises, results
from course_lib.exercises import NumberQuestion, Question, as_number

# The path notebooks 06-12 and their modules; every question there whose answer is a number is a
# NumberQuestion.
MODULES = ("tensor_cores", "mma_sync_kernels", "hopper_tensor_cores", "hopper_pipelines", "summary",
           "decode_and_host_time", "fp8")
NUMERIC = [(f"{m}.{name}", q) for m in MODULES for name, q in vars(importlib.import_module(f"course_lib.exercises.{m}")).items()
           if isinstance(q, Question) and isinstance(q.expected(), (int, float)) and not isinstance(q.expected(), bool)]


def _said(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_the_numeric_questions_of_06_to_12_are_found():
    names = {n for n, _ in NUMERIC}
    assert {"tensor_cores.bf16_ridge", "mma_sync_kernels.stage0_roof", "summary.intensity_192",
            "decode_and_host_time.decode_bytes", "fp8.weight_scale_bytes", "hopper_pipelines.register_budget"} <= names


def test_as_number_takes_one_element_of_anything_with_item_and_nothing_else():
    assert as_number(760) == 760 and as_number(7.5) == 7.5
    assert as_number(np.float32(760)) == 760 and as_number(np.int64(3)) == 3
    assert as_number(torch.tensor(760)) == 760 and as_number(torch.tensor([760.0])) == 760.0
    for not_one in ("760", True, np.bool_(True), torch.tensor(True), [760], (7, 60), torch.tensor([1, 2]),
                    np.array([1.0, 2.0]), lambda: 760, None, 3 + 4j):
        assert as_number(not_one) is None, not_one


def _offset() -> NumberQuestion:
    return NumberQuestion(what="offset", unit="bytes", expected=lambda: 760,
                          wrong=[(680, "that is without the swizzle.")],
                          wrong_when=[(lambda v, want: 7 <= v <= 8, "that is in hundreds of bytes.")])


@pytest.mark.parametrize("answer, words", [
    ("760", "give a number (bytes), not the text '760': write the number without quotes, 760"),
    ("seven", "not the text 'seven'; set it in the cell above"),
    ((7, 600), "Python reads 7,600 as 2 numbers; write 7600 or 7_600"),
    (np.array([760, 761]), "not a ndarray of 2 elements"),
    (torch.tensor([760, 761]), "not a Tensor of 2 elements"),
    (lambda: 760, "not a function"),
    (True, "not a bool"),
    (680, "that is without the swizzle."),
    (7.6, "that is in hundreds of bytes."),
    (None, "no answer yet"),
])
def test_a_number_question_names_what_it_was_given(answer, words, capsys):
    assert not _offset().check(answer)
    assert words in _said(capsys)


def test_a_range_never_refuses_the_right_answer(capsys):
    q = NumberQuestion(what="n", expected=lambda: 7.6, wrong_when=[(lambda v, want: 7 <= v <= 8, "too small")])
    assert q.check(7.6) and "too small" not in _said(capsys)


def test_after_right_prints_its_line_below_a_right_answer_only(capsys):
    q = Question(what="n", expected=lambda: 4, rel_tol=0.5, after_right=lambda a: f"(you said {a})" if a != 4 else None)
    assert q.check(5) and _said(capsys).endswith("(you said 5)")
    assert q.check(4) and "you said" not in _said(capsys)
    assert not q.check(9) and "you said" not in _said(capsys)


def test_the_ridge_question_shows_the_recorded_working_and_the_decode_bytes_what_was_left_out(capsys):
    from course_lib.exercises import decode_and_host_time as d
    from course_lib.exercises import tensor_cores as t

    assert t.bf16_ridge.check(t.bf16_ridge.expected())
    assert f"Recorded on the H200: {t.ridge_working('bf16')}." in _said(capsys)
    without_c = d._decode_bytes(c=False)
    assert d.decode_bytes.check(without_c) and "(Exactly, you left out writing C" in _said(capsys)
    assert d.decode_bytes.check(d.decode_bytes.expected()) and "Exactly" not in _said(capsys)


def test_the_recorded_roofs_are_read_in_one_place():
    c = results.load().ceilings
    assert exercises.recorded_copy_gbs() == c["copy_bandwidth_gbs"]
    for dtype in ("bf16", "fp32"):
        assert exercises.recorded_ridge(dtype) == pytest.approx(c["cublas_peak_tflops"][dtype] * 1e3 / c["copy_bandwidth_gbs"])
    with pytest.raises(ValueError, match="no cuBLAS peak for 'e5m2'"):
        exercises.recorded_ridge("e5m2")


# The path notebooks 00-05 (and triton_lab, which asks 04's bank-pass questions): every question there whose
# answer is one number is a NumberQuestion too. naive.warp_sectors asks for a dict of three numbers, which
# NumberQuestion does not take; Question reads each part as NumberQuestion reads its answer (below).
MODULES_00_05 = ("gpu_execution_model", "naive", "shared_memory_tiling", "thread_coarsening",
                 "coalescing_and_triton", "triton_fast_kernel")
NUMERIC_00_05 = [(f"{m}.{name}", q) for m in MODULES_00_05
                 for name, q in vars(importlib.import_module(f"course_lib.exercises.{m}")).items()
                 if isinstance(q, Question) and isinstance(q.expected(), (int, float))
                 and not isinstance(q.expected(), bool)]


def test_the_numeric_questions_of_00_to_05_are_found_in_every_module_that_asks_one():
    names = {n for n, _ in NUMERIC_00_05}
    assert {m for m in MODULES_00_05 if m != "naive"} == {n.split(".")[0] for n in names}
    assert {"gpu_execution_model.first_two_wave_n", "thread_coarsening.pitch", "shared_memory_tiling.global_loads",
            "coalescing_and_triton.passes_swizzled", "triton_fast_kernel.programs_with_one_more"} <= names


@pytest.mark.parametrize("name, question", NUMERIC + NUMERIC_00_05, ids=[n for n, _ in NUMERIC + NUMERIC_00_05])
def test_every_numeric_question_tells_text_to_be_written_as_the_number(name, question, capsys):
    assert isinstance(question, NumberQuestion), f"{name} is a {type(question).__name__}"
    want = question.expected()
    assert not question.check(str(want)), f"{name}: the text {str(want)!r} is taken for the number"
    out = _said(capsys)
    assert f"not the text {str(want)!r}: write the number without quotes, {want}" in out and "Hint" not in out, out
    assert question.check(torch.tensor(want)), f"{name}: a 0-d tensor of its answer is refused"
    assert question.check(np.float64(want)), f"{name}: a numpy scalar of its answer is refused"


def test_the_two_wave_size_says_a_numpy_size_off_the_tile_is_no_multiple_and_text_is_no_number(capsys):
    from course_lib.exercises import gpu_execution_model as g

    want = g.first_two_wave_n.expected()
    assert not g.first_two_wave_n.check(np.int64(want + 1))
    assert f"{want + 1} is not a multiple of {g.TILE}" in _said(capsys)
    assert not g.first_two_wave_n.check(f"{want + 1}")
    out = _said(capsys)
    assert "give a number (the size N)" in out and "multiple" not in out, out


def test_a_pitch_given_as_text_is_told_to_be_a_number_not_passed_to_the_bank_model(capsys):
    from course_lib.exercises import thread_coarsening as t

    assert not t.pitch.check("33") and "give a number (words), not the text '33'" in _said(capsys)
    assert t.pitch.check(np.int32(t.pitch.expected())) and "is right" in _said(capsys)


def test_the_parts_of_a_several_number_answer_are_read_as_numbers(capsys):
    """naive.warp_sectors (01) asks for a dict of three numbers: a numpy scalar in one part is that number,
    text that spells a number is told to be written without quotes, and neither is compared as it is."""
    import numpy as np

    from course_lib.exercises import naive

    want = naive.warp_sectors.expected()
    assert naive.warp_sectors.check({k: np.float32(v) for k, v in want.items()})
    capsys.readouterr()
    key = next(iter(want))
    spelled = dict(want, **{key: str(int(want[key]))})
    assert not naive.warp_sectors.check(spelled)
    out = capsys.readouterr().out.replace("\n", " ")
    assert f"{key}: give a number, not the text" in out and "without quotes" in out, out
    assert not naive.warp_sectors.check(dict(want, **{key: True}))
    assert "not a bool" in capsys.readouterr().out
