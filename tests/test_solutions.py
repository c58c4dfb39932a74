"""A puzzle's solution stays hidden until the learner asks for it.

``ex.<puzzle>.solution()`` returns a button (``course_lib.learn.solution_widget``): before it is
pressed the course's code is nowhere - not in the cell's output, not in the widget's state, which
JupyterLab saves with the notebook - and after the press the button's output holds it. Checked here
for every puzzle of every module of ``course_lib.exercises``; tests/test_notebook_structure.py checks
that the notebooks show solutions only so, and tests/test_browser.py that Run All in JupyterLab
shows the button and not the code.
"""

import importlib
import json
import pkgutil

import pytest

import course_lib.exercises
from course_lib import learn
from course_lib.exercises import Puzzle


def _puzzles() -> list[tuple[str, Puzzle]]:
    found = []
    for info in pkgutil.iter_modules(course_lib.exercises.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"course_lib.exercises.{info.name}")
        found += [(f"{info.name}.{name}", p) for name, p in vars(module).items() if isinstance(p, Puzzle)]
    return found


PUZZLES = _puzzles()


def _source(obj) -> str:
    """The course's code as show_source shows it (what the button must reveal)."""
    return learn.show_source(obj).data


def _course_code(puzzle: Puzzle):
    """What a puzzle's solution shows: what it names to reveal, else the code that solves it."""
    reveal = getattr(puzzle, "reveal", None)
    return reveal if reveal is not None else puzzle.solved_by


def _shown(box) -> str:
    return "\n".join(out["data"]["text/plain"] for out in box.output.outputs)


def _state(box) -> str:
    """Everything the front end (and a saved notebook) gets of the widget."""
    return json.dumps([w.get_state() for w in (box, box.button, box.output)], default=str)


def test_every_exercises_module_with_a_puzzle_is_seen():
    modules = {name.split(".")[0] for name, _ in PUZZLES}
    assert len(PUZZLES) >= 12 and {"naive", "coalescing_and_triton", "summary", "fp8"} <= modules, PUZZLES


def test_the_widget_shows_nothing_until_its_button_is_pressed():
    asked = []
    box = learn.solution_widget(lambda: asked.append(1) or [learn.show_source("x = 1"), learn.show_source("y = 2")])
    assert asked == [] and box.output.outputs == ()
    assert box._repr_mimebundle_()["text/plain"] == learn.SOLUTION_HIDDEN  # no model id: nbval compares it
    assert box.button.description == learn.SOLUTION_BUTTON and learn.SOLUTION_CLASS in box._dom_classes
    box.button.click()
    assert asked == [1] and _shown(box) == "x = 1\ny = 2"
    assert box.button.disabled
    box.button.click()  # a second press shows it once, not twice
    assert asked == [1] and len(box.output.outputs) == 2


@pytest.mark.parametrize("name, puzzle", PUZZLES, ids=[name for name, _ in PUZZLES])
def test_a_puzzles_solution_is_shown_only_when_asked(name, puzzle):
    code = _source(_course_code(puzzle))
    first = code.strip().splitlines()[0]
    box = puzzle.solution()
    assert box.output.outputs == (), f"{name}: the solution shows something before the button is pressed"
    assert first not in _state(box), f"{name}: the solution is in the widget's state before the press"
    assert box._repr_mimebundle_()["text/plain"] == learn.SOLUTION_HIDDEN
    box.button.click()
    assert _shown(box) == code, f"{name}: after the press the button shows {_shown(box)[:80]!r}, not the course's code"
    assert first in _state(box)


def test_a_solution_also_shows_the_code_around_it():
    from course_lib.exercises import coalescing_and_triton as ex
    from course_lib.kernels import coalescing_and_triton as c04

    box = ex.vector_add.solution(c04.vector_add)
    assert box.output.outputs == ()
    box.button.click()
    assert _shown(box) == _source(c04.vector_add_kernel) + "\n" + _source(c04.vector_add)
