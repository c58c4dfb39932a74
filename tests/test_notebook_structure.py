"""What every notebook promises a learner: what it teaches, a prediction before a measurement, a
checked exercise, takeaways; and markdown that renders (no control characters from an unescaped
LaTeX backslash such as \\times or \\frac written into a Python string)."""

import re

import nbformat
import pytest

from course_lib.notebooks import notebook_paths

NOTEBOOKS = notebook_paths()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_teaches_predicts_checks_and_sums_up(path):
    nb = nbformat.read(path, as_version=4)
    markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "**What you will learn**" in markdown[0], f"{path.name}: the first cell says what it teaches"
    assert "learn.compare_prediction(" in code, f"{path.name}: no prediction compared with a measurement"
    assert "learn.check_answer(" in code, f"{path.name}: no exercise whose answer is checked"
    assert any("<summary>Solution</summary>" in m for m in markdown), f"{path.name}: no solution to reveal"
    assert any(m.startswith("## Takeaways") for m in markdown), f"{path.name}: no takeaways"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_markdown_has_no_control_characters(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        found = re.search(r"[\x00-\x09\x0b-\x1f]", cell.source)
        assert not found, f"{path.name} cell {i}: control character {found.group()!r} near {cell.source[max(0, found.start() - 30):found.end() + 10]!r}"
