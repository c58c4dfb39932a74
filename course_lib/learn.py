"""What the notebooks use to teach: source shown with syntax highlighting, a prediction compared with
a measurement, an exercise's answer checked, a solution shown only when the learner asks for it.

A prediction or an answer is a variable the learner sets in a cell (``None`` until they do); the next
cell calls :func:`compare_prediction` or :func:`check_answer`, which say how close it was. Both print
and return a :class:`Verdict` (which a notebook does not display again), never raise, so a notebook
runs top to bottom whatever was entered.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, Sequence


def show_source(obj: Any, language: str = "python", section: str | None = None):
    """The source of a function, a Triton or numba kernel, or a string of code, highlighted.

    ``section``: only the part under the comment banner ``# ---- <section>`` (a kernel's
    ``"mainloop"``, say), up to the next banner that is not nested deeper, dedented.
    Returns an ``IPython.display.Code`` (the notebook shows it coloured; its plain text is the code)."""
    from IPython.display import Code

    if isinstance(obj, str):
        text = obj
    else:
        fn = getattr(obj, "fn", None) or getattr(obj, "py_func", None) or obj  # Triton JIT / numba kernels
        text = inspect.getsource(fn)
    if section is not None:
        text = source_section(text, section)
    return Code(text.rstrip("\n"), language=language)


# What a solution's button shows as plain text: where the widget cannot run (a notebook viewer, a
# notebook not trusted) and in the output nbval compares. The same words in every notebook.
SOLUTION_HIDDEN = "The course's solution, hidden: run this cell, then press its button to show it."
SOLUTION_BUTTON = "Show the course's solution"
SOLUTION_CLASS = "course-solution"  # the widget's CSS class, by which tests/test_browser.py finds it


def solution_widget(show: Callable[[], Any]):
    """A button that shows the course's solution only when the learner presses it.

    ``show()`` gives what to display (one object or a list: :func:`show_source` of the course's
    code, say); it is called on the press, not before, so until then the solution is nowhere in the
    notebook: not in the cell's output, not in the widget's state (which JupyterLab saves with the
    notebook). Running every cell therefore shows the button, never the answer. Returns the widget;
    ``.button`` and ``.output`` let a test press it (``.button.click()``) and read what it shows
    (``.output.outputs``) without a browser. Its plain text is :data:`SOLUTION_HIDDEN`."""
    import ipywidgets as w  # noqa: PLC0415

    button = w.Button(description=SOLUTION_BUTTON, icon="eye", layout=w.Layout(width="auto"))
    output = w.Output()
    box = _solution_box_class()([button, output])
    box.add_class(SOLUTION_CLASS)
    box.button, box.output = button, output

    def reveal(_=None) -> None:
        if output.outputs:  # shown already
            return
        shown = show()
        for item in shown if isinstance(shown, (list, tuple)) else [shown]:
            output.append_display_data(item)
        button.description, button.disabled = "The course's solution:", True

    button.on_click(reveal)
    return box


@functools.cache
def _solution_box_class():
    import ipywidgets as w  # noqa: PLC0415

    class SolutionBox(w.VBox):
        """A solution's button and what it shows; its plain text is the same in every run (no model
        id), so nbval can compare the cell's output."""

        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            if data is not None:  # None once closed
                data["text/plain"] = SOLUTION_HIDDEN
            return data

    return SolutionBox


def source_section(text: str, section: str) -> str:
    """The lines of ``text`` from the banner ``# ---- <section>`` to the next ``# ----`` banner
    indented as much or less (or the end), dedented; ValueError if there is no such banner."""
    import textwrap  # noqa: PLC0415

    lines = text.splitlines()
    banners = [i for i, line in enumerate(lines) if line.lstrip().startswith("# ----")]
    starts = [i for i in banners if lines[i].lstrip().startswith(f"# ---- {section}")]
    if len(starts) != 1:
        found = ", ".join(repr(lines[i].lstrip()[7:].split(":")[0].rstrip(" -")) for i in banners) or "none"
        raise ValueError(f"{len(starts)} banners '# ---- {section}' in this source (banners: {found})")
    start = starts[0]
    depth = len(lines[start]) - len(lines[start].lstrip())
    end = next((i for i in banners if i > start and len(lines[i]) - len(lines[i].lstrip()) <= depth), len(lines))
    return textwrap.dedent("\n".join(lines[start:end])).strip("\n")


class Verdict:
    """What a check found: true when the answer is right (or a prediction was entered); ``value`` is
    the ratio measured / predicted for a prediction. Already printed, so a notebook shows nothing more."""

    def __init__(self, ok: bool, value: float | None = None):
        self.ok, self.value = ok, value

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"Verdict(ok={self.ok}, value={self.value})"

    def _ipython_display_(self) -> None:
        pass


def say(text: str, indent: int = 0) -> None:
    """Print in lines that fit JupyterLab's output area (a longer line wraps mid-word there);
    ``indent`` spaces before every line, two more before the continuation lines."""
    import textwrap  # noqa: PLC0415

    pad = " " * indent
    print(textwrap.fill(text, width=96, initial_indent=pad, subsequent_indent=pad + ("  " if indent else ""),
                        break_on_hyphens=False, break_long_words=False))


def fmt(x: Any) -> str:
    """A value as a learner would have typed it: integers in full (1536, 50352128; not 1.54e+03),
    other numbers to six significant digits (0.375, 2.6667), sets and tuples element by element."""
    if isinstance(x, bool) or isinstance(x, str):
        return repr(x)
    if isinstance(x, (int, float)):
        if isinstance(x, int) or float(x).is_integer() and abs(x) < 1e15:
            return str(int(x))
        return f"{x:.6g}"
    if isinstance(x, (set, frozenset)):
        return "{" + ", ".join(fmt(v) for v in sorted(x, key=repr)) + "}"
    if isinstance(x, tuple):
        return "(" + ", ".join(fmt(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    return repr(x)


def close_to(answer: float, value: float, rel_tol: float) -> bool:
    """Whether the number ``answer`` lies within ``rel_tol`` of ``value``, measured from ``value`` (as a
    message's "within 15 %" reads; math.isclose measures from the larger of the two); with no
    tolerance, equal up to 1e-12."""
    if not rel_tol:
        return abs(answer - value) <= 1e-12
    return abs(answer - value) <= rel_tol * abs(value)


def _matches(answer: Any, value: Any, rel_tol: float) -> bool:
    """Whether ``answer`` is ``value``: numbers within ``rel_tol``, anything else by equality."""
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (answer, value))
    if numeric:
        return close_to(answer, value, rel_tol)
    try:
        return bool(answer == value)
    except Exception:  # noqa: BLE001 - an answer of another kind is simply not this one
        return False


def compare_prediction(guess: float | None, measured: float, *, unit: str, explain: str = "",
                       pivot: float | None = None, measured_as: str = "measured") -> Verdict:
    """Say how a learner's prediction compares with what was measured (or recorded); the verdict's
    ``value`` is the ratio measured / predicted (None, and the verdict false, when nothing usable
    was predicted).

    ``pivot``: the value that means "no change" (by default 1 for a ratio: a unit "x", "x as fast",
    "x the time" ...). A prediction of a change in one direction - more than 5 % away from the
    pivot - is told that it points the wrong way when the measurement changed the other way, and that
    no change was measured when it stayed within 5 % of the pivot, however close the two numbers are
    (the verdict is then false).

    ``measured_as``: the word for where the number comes from ("recorded" for a recording)."""
    if guess is None:  # the measurement stays hidden until there is a prediction to compare it with
        say(f"No prediction entered: set it in the cell above ({unit}), then run both cells again "
             "to see the measurement.")
        return Verdict(False)
    # Read as a NumberQuestion reads an answer: a numpy scalar or a one-element tensor is its number, a
    # bool is no number. Imported here: course_lib.exercises imports this module.
    from course_lib.exercises import as_number  # noqa: PLC0415

    number = as_number(guess)
    if number is None or not math.isfinite(number) or number <= 0:
        say(f"A prediction is a positive number of {unit}, not {guess!r}.")
        return Verdict(False)
    guess = number
    if pivot is None and (unit == "x" or unit.startswith("x ")):
        pivot = 1.0
    ratio = measured / guess
    shown = fmt(float(f"{measured:.3g}"))  # three digits, as the tables print it (0.319, not 0.318901)
    if pivot is not None:
        want, got = direction(guess, pivot), direction(measured, pivot)
        if want != 0 and got == 0:
            say(f"You predicted {fmt(guess)} {unit} ({_DIRECTION[want]} {fmt(pivot)}), a change; {measured_as} "
                f"{shown} {unit}: no change (within 5 % of {fmt(pivot)}).")
            if explain:
                say(explain)
            return Verdict(False, ratio)
        if want != 0 and want != got:
            say(f"You predicted {fmt(guess)} {unit} ({_DIRECTION[want]} {fmt(pivot)}); {measured_as} "
                f"{shown} {unit} ({_DIRECTION[got]} {fmt(pivot)}): your prediction points the wrong way.")
            if explain:
                say(explain)
            return Verdict(False, ratio)
    verdict = ("close: within 25 %" if 0.8 <= ratio <= 1.25
               else f"the measurement is {ratio:.2g}x your prediction" if ratio > 1
               else f"the measurement is {1 / ratio:.2g}x below your prediction")
    say(f"You predicted {fmt(guess)} {unit}; {measured_as} {shown} {unit} — {verdict}.")
    if explain:
        say(explain)
    return Verdict(True, ratio)


_DIRECTION = {1: "above", -1: "below", 0: "about"}


def direction(x: float, pivot: float) -> int:
    """Which way ``x`` lies from ``pivot`` (the value that means "no change"): 1 above it by more than
    5 %, -1 below it by more, 0 within."""
    return 0 if abs(x / pivot - 1) <= 0.05 else (1 if x > pivot else -1)


def check_answer(answer: Any, expected: Any, *, what: str, rel_tol: float = 0.0, hint: str = "",
                 wrong: Sequence[tuple[Any, str]] = ()) -> Verdict:
    """Check an exercise's answer: numbers within ``rel_tol``, anything else by equality. Prints
    whether it is right; when it is not, what the answer means if it is one of the likely ``wrong``
    ones (value, meaning) - a value within the same ``rel_tol`` counts - and otherwise ``hint``.
    The verdict is true only for a right answer."""
    if answer is None:
        say(f"{what}: no answer yet — set it in the cell above and run this cell again.")
        return Verdict(False)
    within = f" (within {100 * rel_tol:g} %)" if rel_tol >= 0.01 else ""
    if _matches(answer, expected, rel_tol):
        say(f"{what}: {fmt(answer)} is right{within}.")
        return Verdict(True)
    meaning = next((m for value, m in wrong if _matches(answer, value, rel_tol)), None)
    if meaning is not None:
        say(f"{what}: {fmt(answer)} is not it: {meaning}")
    elif fmt(answer) == fmt(expected):  # it prints as the answer but is not it: say so, not "not it yet"
        say(f"{what}: {answer!r} is not it: it prints as {fmt(answer)} but is not exactly that; the answer is "
            f"exact, so work it out without rounding.")
    else:
        counts = f" (answers within {100 * rel_tol:g} % of it count)" if within else ""
        say(f"{what}: {fmt(answer)} is not it yet{counts}." + (f" Hint: {hint}" if hint else ""))
    return Verdict(False)
