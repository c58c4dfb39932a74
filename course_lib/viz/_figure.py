"""What every widget of the course shares: its picture, its controls' layout, the box it lives in.

Widgets show their figure as a PNG in an ``ipywidgets.Image``. An ``Output`` widget that
re-displays a matplotlib figure sends display messages that notebook runners treat differently
(nbclient captures them into the widget, nbval sees them as cell output); an ``Image`` widget holds
the picture as its value, so the cell's output is the same everywhere, a test can read the bytes,
and a browser test can see them change.

Sizes are chosen for JupyterLab in a 1400 x 900 window with the file browser open, the smallest
screen the course is checked on: there a notebook's output area is 968 px wide and the notebook
panel 779 px tall. A figure that is wider than the output area is shrunk by the browser, its text
with it; one that is taller than the screen cannot be seen whole next to its controls.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import io

DPI = 100  # the notebooks' inline figures use 100 dpi: a widget's text is as large as a cell's figure's
MAX_WIDTH_PX = 960  # the output area (968 px) less a margin: never shrunk by the browser
# The notebook panel is 779 px tall; the tallest block of controls and summary above a picture
# (the waves widget: three rows of controls, two lines of summary) takes about 170 px.
MAX_HEIGHT_PX = 600
MIN_FONT_PX = 9  # what the tests hold every text of every figure to

LABEL_WIDTH = "120px"  # one width for every control's description, so the controls line up
CONTROL_WIDTH = "476px"  # two controls side by side fill the output area (968 px); a slider's track 260 px
WIDE_WIDTH = "940px"  # a slider over many values gets the whole row


# Inside a widget's redraw, figures are made without pyplot (see `subplots`).
_WITHOUT_PYPLOT = contextvars.ContextVar("course_lib_viz_without_pyplot", default=False)


@contextlib.contextmanager
def without_pyplot():
    """Within this block, :func:`subplots` makes figures that pyplot does not know of.

    A widget redraws in the kernel's thread for widget messages (JupyterLab 4.5+ sends them to a
    kernel subshell: its setting "commsOverSubshells", default one subshell for all widgets), so
    at the same time as the cell being run in the main thread. pyplot keeps one list of open
    figures for every thread, and when a cell ends the inline backend draws every figure on that
    list: a widget's figure in the middle of its own ``savefig`` was drawn from the main thread too,
    and matplotlib's private exception for fetching a renderer (``Done``) escaped there (a browser
    test saw ``Done: <RendererAgg ...>`` from the kernel once). A figure pyplot never lists cannot
    be drawn by anyone else."""
    token = _WITHOUT_PYPLOT.set(True)
    try:
        yield
    finally:
        _WITHOUT_PYPLOT.reset(token)


def subplots(nrows: int = 1, ncols: int = 1, **kwargs):
    """``plt.subplots`` for the course's drawings: a figure on pyplot's list (shown by a cell as
    usual), except inside :func:`without_pyplot`, where it is an Agg figure of its own with the
    same size, axes and rcParams, so the same pixels."""
    if not _WITHOUT_PYPLOT.get():
        import matplotlib.pyplot as plt

        return plt.subplots(nrows, ncols, **kwargs)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**{k: kwargs.pop(k) for k in ("figsize", "dpi", "layout") if k in kwargs})
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kwargs)


def figure_png(fig, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes; a figure on pyplot's list is closed (it lives on only as the picture).

    100 dpi is what the notebooks' inline figures use, so a widget's picture has the same size and
    text size as a figure drawn by a cell."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    if fig.canvas.manager is not None:  # made by pyplot
        import matplotlib.pyplot as plt

        plt.close(fig)
    return buf.getvalue()


def static_png(png: bytes) -> bytes:
    """A smaller copy of a widget's picture for the notebook file: the same pixels in a palette of
    256 colours (a figure has few colours besides the edges of its text), about a third of the
    bytes. Committed notebooks carry one per widget."""
    from PIL import Image

    buf = io.BytesIO()
    image = Image.open(io.BytesIO(png)).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(buf, format="PNG", optimize=True)
    return buf.getvalue()


def image_widget():
    """An Image widget shown at the PNG's own size (at most the output's width).

    Inside a VBox an image is stretched to the box's width by default (flex ``align-items:
    stretch``): a small figure then came out blown up and blurred, taller than the screen, with its
    controls scrolled out of sight. ``align_self="flex-start"`` keeps its natural size."""
    import ipywidgets as w

    return w.Image(format="png", layout=w.Layout(max_width="100%", align_self="flex-start"))


def style_controls(*controls, width: str = CONTROL_WIDTH) -> None:
    """Give controls one label width and a wide body, so labels line up in a column and a
    slider's track is long enough to pick a value with the mouse (ipywidgets' default 300 px
    minus a long label left a track of 54 px).

    Toggle buttons get the layout of the other controls (label left of the buttons, not above
    them, which is where ipywidgets 8 puts it) and buttons as wide as their longest option."""
    import ipywidgets as w

    for c in controls:
        c.style.description_width = LABEL_WIDTH
        if isinstance(c, w.ToggleButtons):
            c.add_class("widget-inline-hbox")  # flex row, label right-aligned in its column
            longest = max(len(str(o[0] if isinstance(o, tuple) else o)) for o in c.options)
            c.style.button_width = f"{max(64, 9 * longest + 36)}px"
        else:
            c.layout.width = width


def _plain_text(box) -> str:
    """What a viewer that shows only text shows: the widget's kind and its controls' values."""
    parts = []
    for name, control in getattr(box, "controls", {}).items():
        label = getattr(control, "label", None)
        parts.append(f"{control.description or name} = {label if label is not None else control.value}")
    import textwrap  # noqa: PLC0415

    # Short lines: JupyterLab wraps a printed line wider than its output area mid-word.
    return textwrap.fill(f"{type(box).__name__}: {getattr(box, 'figure_name', 'interactive figure')} ({'; '.join(parts)})",
                         width=96, break_on_hyphens=False)


@functools.cache
def _box_class():
    import ipywidgets as w

    class InteractiveFigure(w.VBox):
        """A VBox whose output also holds its picture (see :func:`figure_box`)."""

        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            if data is None:  # closed
                return None
            data["text/plain"] = _plain_text(self)
            image = getattr(self, "image", None)
            if image is not None and image.value and image.layout.display != "none":
                data["image/png"] = base64.b64encode(static_png(image.value)).decode("ascii")
            return data

    return InteractiveFigure


def figure_box(children, title: str):
    """The VBox a widget lives in, which also carries its current picture as a static PNG.

    A notebook stores a widget as a reference to a live model (``application/vnd.jupyter.widget-
    view+json``) and a text fallback. Opened without running it - in JupyterLab, where a notebook
    that is not trusted never uses the widget renderer, or on a static notebook viewer - only the
    fallback showed: ``VBox(children=(HBox(...``. This box adds its picture to the same output as
    ``image/png`` (and a readable text): a front end that can run the widget shows the widget, one
    that cannot shows the picture. nbval does not compare images, so the check stays strict on
    the text."""
    box = _box_class()(children)
    box.figure_name = title
    return box


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
        with without_pyplot():
            draw()

    for control in controls.values():
        control.observe(update, names="value")
    update()
    return box
