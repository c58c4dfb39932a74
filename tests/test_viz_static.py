"""A widget's picture is in its notebook output, so a notebook shows it before anyone runs it.

A stored widget output is a reference to a live model plus a text fallback. JupyterLab never uses
the widget renderer for a notebook it does not trust (one someone else ran, like the committed
ones) and a static viewer has no kernel: both showed the fallback, ``VBox(children=(HBox(...``.
Each widget therefore puts its current picture in the same output as ``image/png``, and a
readable text in place of the repr (``course_lib.viz._figure.figure_box``).
"""

import base64
import io
import json

import nbformat
import pytest
from PIL import Image
from test_viz_figures import WIDGETS  # the widgets as the notebooks make them

from course_lib import notebooks
from course_lib.viz._figure import MAX_HEIGHT_PX, MAX_WIDTH_PX

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# A committed notebook carries one picture per widget output; kept small (the pictures are palette
# PNGs of 7 to 15 KB).
MAX_STATIC_PNG_BYTES = 48 * 1024


def _check_picture(data: dict, where: str) -> None:
    assert "image/png" in data, f"{where}: no picture, a viewer shows only {data.get('text/plain')!r}"
    png = base64.b64decode(data["image/png"])
    assert png.startswith(PNG_MAGIC), f"{where}: image/png is not a PNG"
    width, height = Image.open(io.BytesIO(png)).size
    assert width <= MAX_WIDTH_PX and height <= MAX_HEIGHT_PX, f"{where}: picture of {width} x {height} px"
    assert len(png) <= MAX_STATIC_PNG_BYTES, f"{where}: picture of {len(png) // 1024} KB"
    text = "".join(data.get("text/plain", ""))
    assert not text.startswith(("VBox(", "HBox(")), f"{where}: the text fallback is the raw repr {text[:60]!r}"


@pytest.mark.parametrize("name", list(WIDGETS))
def test_a_widget_output_carries_its_picture_and_a_readable_text(name):
    box = WIDGETS[name]()
    data = box._repr_mimebundle_()
    assert data[WIDGET_MIME]["model_id"] == box.model_id  # a front end with the kernel shows the widget
    _check_picture(data, name)
    static = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
    assert static.size == Image.open(io.BytesIO(box.image.value)).size  # the picture on display, same pixels
    first = next(iter(box.controls.values()))
    assert data["text/plain"].startswith("InteractiveFigure: ") and f"{first.description} = " in data["text/plain"]


def test_a_hidden_picture_is_not_stored():
    from course_lib.viz.mapping import mapping_widget

    box = mapping_widget()
    box.controls["n"].value = 1000  # no picture above N = 512
    assert "image/png" not in box._repr_mimebundle_()


def _widget_outputs(path):
    nb = json.loads(path.read_text())
    for index, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if WIDGET_MIME in out.get("data", {}):
                yield index, out["data"]


def test_every_widget_cell_of_the_committed_notebooks_shows_its_picture_unrun():
    """Fails until the notebooks are executed again (python -m course_lib.notebooks) after a
    change that drops the picture - or when a widget stops carrying one."""
    from course_lib.learn import SOLUTION_HIDDEN

    found = 0
    for path in notebooks.notebook_paths():
        for index, data in _widget_outputs(path):
            if "".join(data.get("text/plain", "")) == SOLUTION_HIDDEN:  # a solution's button: no picture,
                assert "image/png" not in data, f"{path.name} cell {index}"  # and nothing of the solution
                continue
            found += 1
            _check_picture(data, f"{path.name} cell {index}")
    assert found >= 6, f"only {found} widget outputs in the committed notebooks"


def test_executing_a_notebook_stores_the_picture_and_no_widget_state(tmp_path):
    source = tmp_path / "00_widget.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from course_lib.viz import waves\nwaves.waves_widget()")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, source)
    notebooks.execute(source, "cpu", tmp_path / "out", timeout=300)
    executed = json.loads((tmp_path / "out" / source.name).read_text())
    assert "widgets" not in executed["metadata"]  # no second copy of every model and picture
    ((_, data),) = list(_widget_outputs(tmp_path / "out" / source.name))
    _check_picture(data, "executed notebook")
