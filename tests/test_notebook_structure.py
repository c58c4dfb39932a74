"""What every notebook promises a learner.

A path notebook (``notebooks/NN_name.ipynb``) is one sitting: it says what it teaches, has at most
2,500 words of markdown and at most three hedges, a checked exercise, takeaways and links to the
notebooks before and after it. A deep dive (``notebooks/deep_dives/``) says what it holds and links
back to the path. Every notebook: markdown that renders (no control characters from an unescaped
LaTeX backslash such as \\times or \\frac written into a Python string), links that lead somewhere,
printed lines that fit JupyterLab's output area, no lab-journal dates, the kernelspec JupyterLab
expects (so opening a notebook does not mark it modified), and a puzzle's solution shown only when
the learner presses its button.
"""

import re
from pathlib import Path

import nbformat
import pytest

from course_lib.notebooks import KERNELSPEC, NOTEBOOK_DIR, deep_dives, notebook_paths, path_notebooks

PATH = path_notebooks()
DEEP = deep_dives()
ALL = notebook_paths()

MAX_WORDS = 2500
MAX_HEDGES = 3
HEDGE = re.compile(r"not measured|hypothes[ie]s|not profiled|not recorded|unmeasured|not been measured|not timed", re.I)
# JupyterLab at 1400 x 900 with the file browser open shows about 120 characters of a printed line
# in its output area (tests/test_browser.py measures it); longer lines wrap mid-word.
MAX_LINE = 100
DIARY = re.compile(r"\b\d{1,2}:\d{2}\s*UTC\b|\b20\d\d-\d\d-\d\d\b|\bcommit\s+[0-9a-f]{7,40}\b|\bissue\s+#?\d+\b", re.I)


def _markdown(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def words(nb) -> int:
    """Words of markdown as a reader meets them (markers in HTML comments are not words)."""
    return sum(len(re.sub(r"<!--.*?-->", "", m, flags=re.S).split()) for m in _markdown(nb))


@pytest.mark.parametrize("path", PATH, ids=lambda p: p.stem)
def test_a_path_notebook_teaches_checks_and_sums_up(path):
    nb = nbformat.read(path, as_version=4)
    markdown = _markdown(nb)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert markdown[0].startswith(f"# {path.name[:2]} · "), f"{path.name}: the title is '# {path.name[:2]} · ...'"
    assert "**What you will learn**" in markdown[0], f"{path.name}: the first cell says what it teaches"
    assert re.search(r"\bex\.\w+\.check\(", code), f"{path.name}: no exercise whose answer is checked"
    assert any("<summary>Solution</summary>" in m for m in markdown), f"{path.name}: no solution to reveal"
    assert any(m.startswith("## Takeaways") for m in markdown), f"{path.name}: no takeaways"


def _exercise_module(nb):
    """The course_lib.exercises module a notebook imports as ``ex`` (None if it imports none)."""
    import importlib

    for cell in nb.cells:
        m = re.search(r"from course_lib\.exercises import (\w+) as ex\b", cell.source) if cell.cell_type == "code" else None
        if m:
            return importlib.import_module(f"course_lib.exercises.{m[1]}")
    return None


@pytest.mark.parametrize("path", PATH, ids=lambda p: p.stem)
def test_exercises_are_checked_by_the_library_and_solved_below_their_check(path):
    """Every exercise is checked by its notebook's module in course_lib.exercises, which computes
    the answer (a check cell computes nothing the learner could read); from notebook 01 on the
    learner writes code for at least one puzzle; no solution is shown above its check."""
    from course_lib.exercises import Puzzle

    nb = nbformat.read(path, as_version=4)
    module = _exercise_module(nb)
    assert module is not None and module.__name__.endswith(path.stem[3:]), (
        f"{path.name}: imports its exercises as `from course_lib.exercises import {path.stem[3:]} as ex`")
    code_cells = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    assert not any("learn.check_answer(" in src for _, src in code_cells), (
        f"{path.name}: an answer is checked in the notebook; give it a Question in {module.__name__}")
    checks = {m[1]: i for i, src in code_cells for m in re.finditer(r"\bex\.(\w+)\.check\(", src)}
    for name in checks:
        assert hasattr(module, name), f"{path.name}: {module.__name__} has no exercise {name!r}"
    puzzles = [n for n in checks if isinstance(getattr(module, n), Puzzle)]
    if path.name[:2] != "00":
        assert puzzles, f"{path.name}: no puzzle (code the learner writes, checked by course_lib.exercises)"
    for name, at in checks.items():
        shown = [i for i, src in code_cells if re.search(rf"\bex\.{name}\.solution\(", src)]
        assert all(i > at for i in shown), f"{path.name}: the solution of {name} is shown above its check"
    for i, cell in enumerate(nb.cells[:-1]):
        if cell.cell_type == "markdown" and "<summary>Solution</summary>" in cell.source:
            nxt = nb.cells[i + 1].source
            assert not re.search(r"\bmy_\w+\s*=\s*None", nxt), (
                f"{path.name}: cell {i} reveals a solution above the cell where the learner answers")


def _solution_names(module) -> dict[str, str]:
    """The names of the course's code that solves a puzzle of ``module`` (what its check accepts,
    what its solution shows), each with the puzzle's name."""
    from course_lib.exercises import Puzzle

    names = {}
    for name, puzzle in vars(module).items():
        if isinstance(puzzle, Puzzle):
            for obj in (getattr(puzzle, "reveal", None), puzzle.solved_by):
                fn = getattr(obj, "fn", None) or getattr(obj, "py_func", None) or getattr(obj, "__wrapped__", None) or obj
                code = getattr(fn, "__name__", "<lambda>")
                if not code.startswith("<"):
                    names[code] = name
    return names


def _sources_shown(source: str) -> set[str]:
    """The names in the arguments of every ``show_source(...)`` or ``getsource(...)`` of a cell."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell of IPython magics
        return set()
    shown = set()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", None)) in ("show_source", "getsource"):
            for arg in call.args:
                shown |= {n.id for n in ast.walk(arg) if isinstance(n, ast.Name)}
                shown |= {n.attr for n in ast.walk(arg) if isinstance(n, ast.Attribute)}
    return shown


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_a_solution_is_shown_only_when_the_learner_asks(path):
    """A puzzle's solution is a button (``ex.<puzzle>.solution()``) that shows the course's code
    when pressed. A cell folded with ``outputs_hidden`` is not one: JupyterLab unfolds it when the
    cell runs, so Run All printed the solution under the learner's attempt. Nor is a cell that
    shows a puzzle's solution with ``learn.show_source``; and the markdown above the button says
    to press it."""
    nb = nbformat.read(path, as_version=4)
    folded = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.metadata.get("jupyter", {}).get("outputs_hidden")]
    assert not folded, (f"{path.name}: code cells {folded} are folded with outputs_hidden, which running them undoes: "
                        "show a solution with ex.<puzzle>.solution()")
    module = _exercise_module(nb)
    solutions = _solution_names(module) if module is not None else {}
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for code in sorted(_sources_shown(cell.source) & set(solutions)):
            pytest.fail(f"{path.name} cell {i} shows {code}, the solution of {solutions[code]}, to anyone who runs it: "
                        f"show it with ex.{solutions[code]}.solution(), a button")
        if re.search(r"\bex\.\w+\.solution\(", cell.source):
            above = nb.cells[i - 1].source if i else ""
            assert nb.cells[i - 1].cell_type == "markdown" and re.search(r"press the button", above, re.I), (
                f"{path.name} cell {i}: the markdown above a solution says to press the button")
            assert "folded" not in above, f"{path.name} cell {i - 1}: the solution is a button now, not folded"


@pytest.mark.parametrize("path", PATH, ids=lambda p: p.stem)
def test_a_path_notebook_is_one_sitting(path):
    nb = nbformat.read(path, as_version=4)
    n = words(nb)
    hedges = [h.group() for m in _markdown(nb) for h in HEDGE.finditer(m)]
    assert n <= MAX_WORDS, f"{path.name}: {n} words of markdown (at most {MAX_WORDS}): move depth to notebooks/deep_dives/"
    assert len(hedges) <= MAX_HEDGES, f"{path.name}: {len(hedges)} hedges {hedges}: say what was measured, an unmeasured cause once"


@pytest.mark.parametrize("path", PATH, ids=lambda p: p.stem)
def test_a_path_notebook_links_its_neighbours(path):
    nb = nbformat.read(path, as_version=4)
    last = _markdown(nb)[-1]
    i = PATH.index(path)
    if i > 0:
        assert f"]({PATH[i - 1].name})" in last, f"{path.name}: the last cell links the previous notebook {PATH[i - 1].name}"
    if i + 1 < len(PATH):
        assert f"]({PATH[i + 1].name})" in last, f"{path.name}: the last cell links the next notebook {PATH[i + 1].name}"


@pytest.mark.parametrize("path", DEEP, ids=lambda p: p.stem)
def test_a_deep_dive_says_what_it_holds_and_links_back(path):
    nb = nbformat.read(path, as_version=4)
    first = _markdown(nb)[0]
    assert first.startswith("# Deep dive · "), f"{path.name}: the title is '# Deep dive · ...'"
    assert re.search(r"\]\(\.\./\d\d_[^)]+\.ipynb\)", first), f"{path.name}: the first cell links the path notebook it belongs to"
    linked_from = [p.name for p in PATH if f"deep_dives/{path.name}" in "".join(_markdown(nbformat.read(p, as_version=4)))]
    assert linked_from, f"{path.name}: no path notebook links this deep dive"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_links_lead_somewhere(path):
    nb = nbformat.read(path, as_version=4)
    for i, m in enumerate(_markdown(nb)):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", m):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            assert (path.parent / target).exists(), f"{path.name} markdown cell {i}: link to {target}, which does not exist"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_markdown_has_no_control_characters(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        found = re.search(r"[\x00-\x09\x0b-\x1f]", cell.source)
        assert not found, f"{path.name} cell {i}: control character {found.group()!r} near {cell.source[max(0, found.start() - 30):found.end() + 10]!r}"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_printed_lines_fit_the_output_area(path):
    nb = nbformat.read(path, as_version=4)
    wide = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/latex" in data:  # source code shown by learn.show_source: rendered as HTML, scrolls
                continue
            text = out.get("text", "") if out.get("output_type") == "stream" else data.get("text/plain", "")
            wide += [f"cell {i}: {len(line)} characters: {line[:60]}..." for line in text.splitlines() if len(line) > MAX_LINE]
    assert not wide, f"{path.name}: printed lines wider than {MAX_LINE} characters wrap in JupyterLab:\n" + "\n".join(wide)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_no_lab_journal_in_a_notebook(path):
    nb = nbformat.read(path, as_version=4)
    hits = sorted({m.group() for c in nb.cells for m in DIARY.finditer(c.source)})
    assert not hits, f"{path.name}: {hits}: dates, clock times, commits and issue numbers belong in experiments/JOURNAL.md"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_the_kernelspec_is_the_installed_one(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata.get("kernelspec") == KERNELSPEC, f"{path.name}: kernelspec {nb.metadata.get('kernelspec')} (run python -m course_lib.notebooks)"
    assert "language_info" not in nb.metadata, f"{path.name}: language_info is filled in by the kernel that opens it"


def test_the_path_is_in_order_and_the_glossary_exists():
    numbers = [p.name[:2] for p in PATH]
    assert numbers == [f"{i:02d}" for i in range(len(PATH))], f"the path notebooks are not numbered 00, 01, ...: {numbers}"
    assert (NOTEBOOK_DIR / "glossary.md").is_file()
    assert not list(Path(NOTEBOOK_DIR).glob("*/*/*.ipynb")), "notebooks live in notebooks/ or notebooks/deep_dives/ only"
