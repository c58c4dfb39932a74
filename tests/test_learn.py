"""The notebooks' teaching helpers: predictions compared, answers checked, source highlighted."""

import pytest

from course_lib import learn
from course_lib.kernels import naive


def test_a_prediction_is_compared_with_the_measurement(capsys):
    assert not learn.compare_prediction(None, 1.3, unit="TFLOP/s", explain="because")
    out = capsys.readouterr().out
    assert "No prediction entered" in out and "1.3" not in out and "because" not in out  # nothing given away
    assert learn.compare_prediction(1.0, 1.1, unit="TFLOP/s").value == 1.1
    assert "close: within 25 %" in capsys.readouterr().out
    assert learn.compare_prediction(1.0, 3.0, unit="TFLOP/s", explain="because").value == 3.0
    out = capsys.readouterr().out
    assert "3x your prediction" in out and "because" in out
    assert learn.compare_prediction(4.0, 1.0, unit="ms").value == 0.25
    assert "4x below your prediction" in capsys.readouterr().out
    assert not learn.compare_prediction("fast", 1.0, unit="ms")
    assert "positive number" in capsys.readouterr().out
    assert learn.compare_prediction(60, 64, unit="%", measured_as="recorded")
    assert "You predicted 60 %; recorded 64 % — close" in capsys.readouterr().out


def test_an_answer_is_checked(capsys):
    assert not learn.check_answer(None, 4, what="sectors")
    assert "no answer yet" in capsys.readouterr().out
    assert learn.check_answer(4, 4, what="sectors")
    assert not learn.check_answer(5, 4, what="sectors", hint="count 32-byte pieces")
    assert "Hint: count 32-byte pieces" in capsys.readouterr().out.splitlines()[-1]
    assert learn.check_answer(0.101, 0.1, what="ratio", rel_tol=0.02)
    assert not learn.check_answer(0.11, 0.1, what="ratio", rel_tol=0.02)
    assert learn.check_answer((1, 2), (1, 2), what="tile")
    assert not learn.check_answer((2, 1), (1, 2), what="tile")


def test_numbers_are_echoed_as_the_learner_wrote_them(capsys):
    learn.check_answer(1536, 1536, what="N")
    learn.check_answer(13825, 13824, what="loads")
    out = capsys.readouterr().out
    assert "1536 is right" in out and "13825 is not it yet" in out  # not 1.54e+03, not 1.38e+04 for both
    learn.check_answer(0.375, 2.67, what="reuse")
    assert "0.375 is not it yet" in capsys.readouterr().out
    learn.check_answer(50352128, 50352128, what="bytes", rel_tol=0.02)
    assert "50352128 is right (within 2 %)" in capsys.readouterr().out
    learn.check_answer(2.6667, 8 / 3, what="reuse", rel_tol=0.02)
    learn.check_answer({"a", "d"}, {"a", "b", "d"}, what="shapes")
    out = capsys.readouterr().out
    assert "2.6667 is right" in out and "{'a', 'd'} is not it yet" in out


def test_a_likely_wrong_answer_is_diagnosed(capsys):
    wrong = [(0.375, "that is TM + TN over TM x TN: the formula upside down"), (8.73, "round up")]
    assert not learn.check_answer(0.375, 8 / 3, what="reuse", rel_tol=0.02, wrong=wrong, hint="count reads")
    out = capsys.readouterr().out
    assert "0.375 is not it: that is TM + TN over TM x TN" in out and "count reads" not in out
    assert not learn.check_answer(0.376, 8 / 3, what="reuse", rel_tol=0.02, wrong=wrong)  # within rel_tol
    assert "upside down" in capsys.readouterr().out
    assert not learn.check_answer(1.0, 8 / 3, what="reuse", rel_tol=0.02, wrong=wrong, hint="count reads")
    out = capsys.readouterr().out
    assert "not it yet (answers within 2 % of it count). Hint: count reads" in out
    assert learn.check_answer(8 / 3, 8 / 3, what="reuse", rel_tol=0.02, wrong=wrong)


def test_source_is_shown_highlighted():
    code = learn.show_source(naive.naive_kernel)
    assert "def naive_kernel" in code.data and "<span" in code._repr_html_()
    assert learn.show_source("x = 1").data == "x = 1"


def test_a_section_of_a_kernel_is_shown_by_its_banner():
    text = ("def k():\n    # ---- setup\n    a = 1\n    for i in r:\n        # ---- inner\n        b = 2\n"
            "\n        # ---- store\n        c = 3\n    # ---- end\n    d = 4\n")
    assert learn.show_source(text, section="setup").data == "# ---- setup\na = 1\nfor i in r:\n    # ---- inner\n    b = 2\n\n    # ---- store\n    c = 3"
    assert learn.show_source(text, section="inner").data == "# ---- inner\nb = 2"
    assert learn.show_source(text, section="end").data == "# ---- end\nd = 4"
    with pytest.raises(ValueError, match="0 banners '# ---- loop'.*'setup', 'inner', 'store', 'end'"):
        learn.show_source(text, section="loop")


def test_a_verdict_is_not_displayed_twice():
    verdict = learn.check_answer(4, 4, what="sectors")
    assert verdict and verdict.value is None and "ok=True" in repr(verdict)
    assert verdict._ipython_display_() is None   # the notebook shows only what was printed


def test_a_prediction_that_points_the_wrong_way_is_told_so_however_close(capsys):
    """1.2x as fast predicted, 0.97x measured: within 25 %, but the predicted change did not happen
    (told "no change"); 1.3x predicted, 0.8x measured: the change went the other way."""
    v = learn.compare_prediction(1.2, 0.97, unit="x as fast")
    out = " ".join(capsys.readouterr().out.split())
    assert not v and "no change" in out and "above 1" in out and "0.97" in out
    assert not learn.compare_prediction(1.3, 0.8, unit="x as fast")  # faster predicted, slower measured
    assert "points the wrong way" in " ".join(capsys.readouterr().out.split())
    assert not learn.compare_prediction(0.8, 1.15, unit="x the time")  # slower predicted, faster measured
    assert not learn.compare_prediction(120, 98, unit="%", pivot=100)  # +20 % predicted, no change measured
    # The right way, or no change predicted: compared by size as before.
    assert learn.compare_prediction(1.2, 1.4, unit="x as fast")
    assert learn.compare_prediction(1.02, 1.3, unit="x as fast")
    assert learn.compare_prediction(5.0, 4.5, unit="TFLOP/s")  # no pivot: a rate, not a change


def test_prediction_shows_the_measurement_to_three_digits(capsys):
    learn.compare_prediction(1.0, 0.318901, unit="x as fast", measured_as="recorded")
    out = capsys.readouterr().out
    assert "recorded 0.319 x as fast" in out and "0.318901" not in out


def test_compare_prediction_reads_numbers_as_number_questions_do(capsys):
    import numpy as np
    import torch

    for guess, want in ((np.int64(2), 2), (np.float32(0.5), 0.5), (torch.tensor(0.5), 0.5), (torch.tensor([4.0]), 4.0)):
        verdict = learn.compare_prediction(guess, 1.0, unit="ms")
        assert verdict and verdict.value == 1.0 / want, capsys.readouterr().out
    capsys.readouterr()
    for bad in (True, np.bool_(True), torch.tensor([1.0, 2.0]), "2"):
        assert not learn.compare_prediction(bad, 1.0, unit="ms")
        assert "A prediction is a positive number of ms" in capsys.readouterr().out
