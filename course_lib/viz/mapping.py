"""Which block, warp and thread computes each element of the output matrix, drawn; sliders for the
matrix size and the block shape (the model: :mod:`course_lib.model.mapping`).
"""

from __future__ import annotations

import numpy as np

from course_lib.model.hardware import H200
from course_lib.model.mapping import Mapping, thread_mapping


# What the picture draws besides the owners, named as the caption names them (matplotlib colour names).
IDLE_COLOUR = "grey"  # the threads of the rounded-up grid that fall past the matrix
EDGE_COLOUR = "red"  # the line along the matrix's edge
# The owners' colours are matplotlib's tab20 without its reds and greys (entries 6, 7, 14 and 15), so
# that no owner is drawn in a colour the caption gives to the idle threads or the edge.
_TAB20_LEFT_OUT = (6, 7, 14, 15)
CATEGORICAL_MAX = 20 - len(_TAB20_LEFT_OUT)  # up to 16 owners each get a colour of their own


def owner_colours() -> tuple:
    """The categorical colours (RGB), one per owner, in order (matplotlib is imported on first use)."""
    import matplotlib

    return tuple(c for i, c in enumerate(matplotlib.colormaps["tab20"].colors) if i not in _TAB20_LEFT_OUT)


def _owner_colours(ax, values: np.ndarray, n_owners: int, what: str) -> str:
    """Draw ``values`` (owner indices 0..n_owners-1; NaN where no one) on ``ax``.

    Up to :data:`CATEGORICAL_MAX` owners each get a colour of their own (no colour repeats in the
    picture); more owners get a continuous scale with a colour bar, so that two cells of one colour
    are never read as one owner. Returns the caption's phrase for the encoding."""
    from matplotlib.colors import BoundaryNorm, ListedColormap

    shown = np.ma.masked_invalid(values)
    if n_owners <= CATEGORICAL_MAX:
        cmap = ListedColormap(owner_colours()[:n_owners])
        ax.imshow(shown, cmap=cmap, norm=BoundaryNorm(np.arange(-0.5, n_owners), n_owners), interpolation="nearest")
        return f"one colour per {what}"
    im = ax.imshow(shown, cmap="viridis", vmin=0, vmax=n_owners - 1, interpolation="nearest")
    bar = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label(f"index of the {what}", fontsize=8)
    bar.ax.tick_params(labelsize=8)
    return f"colour = index of the {what} (scale on the right)"


def draw_mapping(m: Mapping, color_by: str = "block", ax=None):
    """Colour the output matrix by owner ('block', 'warp' or 'thread'); returns the figure.

    'block': the block's linear index; 'warp': the warp's index inside its block (the white lines
    separate blocks); 'thread': the thread's linear index inside its block. Up to 20 owners get a
    colour each, more a continuous scale (see :func:`_owner_colours`)."""
    from course_lib.viz._figure import subplots

    if color_by not in ("block", "warp", "thread"):
        raise ValueError("color_by is 'block', 'warp' or 'thread'")
    if ax is None:
        fig, ax = subplots(figsize=(5.5, 5.5))
    else:
        fig = ax.figure
    bx, by = m.block
    gx, gy = m.grid
    if color_by == "block":
        values, n_owners, what = m.block_id, gx * gy, "block"
    elif color_by == "warp":
        values, n_owners, what = m.warp_id, m.warps_per_block, "warp in its block"
    else:
        values, n_owners, what = m.thread_id, bx * by, "thread in its block"
    # Draw the whole launched area; the part past the matrix (idle threads) in IDLE_COLOUR.
    full = np.full((gy * by, gx * bx), np.nan)
    full[: m.n_rows, : m.n_cols] = values
    encoding = _owner_colours(ax, full, n_owners, what)
    if m.idle_threads:
        from matplotlib.colors import ListedColormap

        idle = np.zeros_like(full)
        idle[m.n_rows :, :] = 1
        idle[:, m.n_cols :] = 1
        ax.imshow(np.ma.masked_where(idle == 0, idle), cmap=ListedColormap([IDLE_COLOUR]), interpolation="nearest", gid="mapping-idle")
    # Block borders in each direction where blocks are wide enough on screen (the grid is about
    # 420 px across) that the lines do not hide them.
    columns, rows = 420 / gx >= 8, 420 / gy >= 8
    for x in range(0, gx * bx + 1, bx) if columns else ():
        ax.axvline(x - 0.5, color="white", lw=1.2)
    for y in range(0, gy * by + 1, by) if rows else ():
        ax.axhline(y - 0.5, color="white", lw=1.2)
    borders = columns or rows
    ax.plot([-0.5, m.n_cols - 0.5, m.n_cols - 0.5, -0.5, -0.5], [-0.5, -0.5, m.n_rows - 0.5, m.n_rows - 0.5, -0.5],
            color=EDGE_COLOUR, lw=1.5, gid="mapping-edge")
    ax.set_xlabel("column of C (threadIdx.x direction)")
    ax.set_ylabel("row of C (threadIdx.y direction)")
    keys = ["white lines: blocks"] if borders else []
    keys.append(f"{EDGE_COLOUR} line: the edge of C")
    if m.idle_threads:
        keys.append(f"{IDLE_COLOUR}: idle threads past it")
    ax.set_title(f"{encoding}\n{'; '.join(keys)}", fontsize=9)
    return fig


def mapping_widget(n: int = 64, block: int = 16):
    """Sliders for the matrix size and the block shape; the picture and a summary update.

    Returns the widget; its ``.mapping`` attribute always holds the :class:`Mapping` on display, so
    a test can set slider values and assert on the data without a browser. ``.waves`` holds how the
    grid runs on the H200 (:class:`course_lib.model.waves.Waves`, for a kernel of 32 registers per
    thread and no shared memory).
    """
    import ipywidgets as w

    from course_lib.model.text import plural
    from course_lib.model.waves import resident_blocks, waves
    from course_lib.viz._figure import WIDE_WIDTH, connect, figure_box, figure_png, image_widget, style_controls

    n_slider = w.IntSlider(value=n, min=1, max=1024, description="N (square)", continuous_update=False)
    bx = w.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128], value=block, description="block x")
    by = w.Dropdown(options=[1, 2, 4, 8, 16, 32], value=block, description="block y")
    color = w.ToggleButtons(options=["block", "warp", "thread"], value="block", description="colour by")
    style_controls(n_slider, width=WIDE_WIDTH)  # 1024 values: the whole row
    style_controls(bx, by, color)
    summary = w.HTML()
    image = image_widget()  # a PNG in an Image widget: no display messages, same output everywhere
    box = figure_box([n_slider, w.VBox([w.HBox([bx, by]), color]), summary, image], "threads, warps and blocks over C")
    box.summary = summary

    def update(_=None) -> None:
        try:
            m = thread_mapping(n_slider.value, n_slider.value, (bx.value, by.value))
        except ValueError as e:
            summary.value = f"<b style='color:#b00'>{e}</b>"
            return
        box.mapping = m
        # How the grid is handed to the H200's SMs (see course_lib.model.waves), for a simple kernel.
        occ = resident_blocks(bx.value * by.value, regs_per_thread=32, smem_per_block=0)
        box.waves = waves(m.grid[0] * m.grid[1], occ)
        summary.value = (
            f"{m.describe()}<br>grid = (({m.n_cols} + {bx.value - 1}) // {bx.value}, "
            f"({m.n_rows} + {by.value - 1}) // {by.value}) = {m.grid}<br>"
            f"on an H200 ({H200.sms} SMs), a kernel with 32 registers/thread and no shared memory fits "
            f"{occ.resident} such blocks per SM: {plural(box.waves.waves, 'wave')}, the last "
            f"{box.waves.tail_utilisation:.0%} full"
        )
        if m.n_rows * m.n_cols > 512 * 512:  # too many elements to draw one by one: hide the picture
            image.layout.display = "none"
            summary.value += (
                "<br><i>No picture above N = 512 (too many elements to draw one by one); the counts "
                "above still hold. Try N = 100 to see the idle threads past the edge.</i>"
            )
            return
        image.layout.display = None
        image.value = figure_png(draw_mapping(m, color.value))

    return connect(box, image, {"n": n_slider, "block_x": bx, "block_y": by, "color_by": color}, update)
