"""Widgets show their figure as a PNG in an ``ipywidgets.Image``.

An ``Output`` widget that re-displays a matplotlib figure sends display messages that notebook
runners treat differently (nbclient captures them into the widget, nbval sees them as cell output);
an ``Image`` widget holds the picture as its value, so the cell's output is the same everywhere, a
test can read the bytes, and a browser test can see them change.
"""

from __future__ import annotations

import io


def figure_png(fig, dpi: int = 100) -> bytes:
    """The figure as PNG bytes; the figure is closed (it lives on only as the picture).

    100 dpi is what the notebooks' inline figures use, so a widget's picture has the same size and
    text size as a figure drawn by a cell."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def image_widget():
    """An Image widget shown at the PNG's own size (at most the output's width).

    Inside a VBox an image is stretched to the box's width by default (flex ``align-items:
    stretch``): a small figure then came out blown up and blurred, taller than the screen, with its
    controls scrolled out of sight. ``align_self="flex-start"`` keeps its natural size."""
    import ipywidgets as w

    return w.Image(format="png", layout=w.Layout(max_width="100%", align_self="flex-start"))


def connect(box, image, controls: dict, draw, adjust=None):
    """Finish a widget: attach its picture and controls to ``box`` (so a test can set a control's
    ``.value`` and read ``box.image.value`` without a browser), redraw on every change, draw once.

    ``adjust`` (optional) first brings the other controls in line with a change (a slider's range,
    a list of options); the changes it makes do not each redraw the picture."""
    box.image = image  # the picture, as PNG bytes in .value
    box.controls = controls
    adjusting = [False]

    def update(_=None) -> None:
        if adjusting[0]:
            return
        if adjust is not None:
            adjusting[0] = True
            try:
                adjust()
            finally:
                adjusting[0] = False
        draw()

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return box
