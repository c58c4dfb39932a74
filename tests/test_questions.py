"""Every question of every path notebook, against its own table of likely wrong answers: each listed
wrong answer is refused with the explanation listed for it (an entry dropped from a table, or an
explanation that no longer prints, fails here), and no numeric question accepts an answer 16 times too
small or too large (unless it has several right answers)."""

import importlib
import pkgutil

import pytest

from course_lib import exercises
from course_lib.exercises import Question


def _questions():
    for info in pkgutil.iter_modules(exercises.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"course_lib.exercises.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, Question):
                yield f"{info.name}.{name}", obj


QUESTIONS = dict(_questions())
WRONG = [(f"{q}[{i}]", q, i) for q, obj in QUESTIONS.items() for i in range(len(obj.wrong))]


# How many likely wrong answers the questions list: an entry dropped from a table fails here (the
# parametrized test below would only lose a case). Change it with the tables, on purpose.
LISTED_WRONG_ANSWERS = 144  # 08: the rotations, an OR and elements at (3, 44), LBO in 16-byte units; 06: (i, lane), FP8's ridge


def test_no_wrong_answer_is_dropped_from_the_tables():
    assert len(WRONG) == LISTED_WRONG_ANSWERS, (
        f"the questions list {len(WRONG)} likely wrong answers, not {LISTED_WRONG_ANSWERS}: if a table changed on "
        "purpose, change LISTED_WRONG_ANSWERS")


@pytest.mark.parametrize("label, question, index", WRONG, ids=[w[0] for w in WRONG])
def test_each_listed_wrong_answer_is_refused_with_its_explanation(label, question, index, capsys):
    q = QUESTIONS[question]
    value, meaning = q.wrong[index]
    answer = value(q.expected()) if callable(value) else value
    verdict = q.check(answer)
    out = " ".join(capsys.readouterr().out.split())
    assert not verdict, f"{label}: the wrong answer {answer!r} is accepted"
    assert " ".join(meaning.split()) in out, f"{label}: {answer!r} is refused without its explanation: {out}"


# (A question with ``accepts`` has several right answers - any pitch without a conflict, say - and is
# held to them by its own tests.)
NUMERIC = [q for q, obj in QUESTIONS.items() if obj.accepts is None
           and isinstance(obj.expected(), (int, float)) and not isinstance(obj.expected(), bool) and obj.expected()]


@pytest.mark.parametrize("question", NUMERIC)
def test_no_numeric_question_accepts_an_answer_16_times_off(question, capsys):
    q = QUESTIONS[question]
    want = q.expected()
    for factor in (16, 1 / 16):
        assert not q.check(want * factor), f"{question}: {want * factor!r} ({factor}x the answer) is accepted"
    capsys.readouterr()


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_each_question_takes_its_answer_asks_for_a_missing_one_and_prints_lines_that_fit(question, capsys):
    """Its own answer is accepted, an unanswered question (None, as the starter cell leaves it) is told
    to answer (or what form the answer takes), and every message - right, wrong or missing - fits a notebook's output (100 columns)."""
    q = QUESTIONS[question]
    want = q.expected()  # once: some answers are computed by running a kernel in the simulator
    assert q.check(want), f"{question}: its own answer {want!r} is refused"
    printed = capsys.readouterr().out
    for value, _ in q.wrong:
        q.check(value(want) if callable(value) else value)
    printed += capsys.readouterr().out
    assert not q.check(None)
    missing = capsys.readouterr().out
    said = " ".join(missing.split())
    assert "no answer yet" in said or "answer with" in said, f"{question}: None is told {missing!r}"
    wide = [line for line in (printed + missing).splitlines() if len(line) > 100]
    assert not wide, f"{question}: lines wider than 100 columns: {wide}"
