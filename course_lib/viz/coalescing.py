"""Coalescing drawn: the 128-byte lines and 32-byte sectors one warp's load touches (the model:
:mod:`course_lib.model.coalescing`).

Notebooks 01 and 04 call::

    from course_lib.viz.coalescing import coalescing_widget, draw_access
    coalescing_widget()                        # row-wise vs column-wise side by side, N/dtype/offset
    draw_access(matrix_load("column", n=4096)) # any access of course_lib.model.coalescing
"""

from __future__ import annotations

import math

import torch

from course_lib.model.coalescing import WarpAccess, matrix_load
from course_lib.model.hardware import LINE_BYTES, SECTOR_BYTES
from course_lib.model.text import plural

# The widget's element types, as torch knows them (their itemsize).
ELEMENTS = {"fp64": torch.float64, "fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def draw_access(acc: WarpAccess, ax=None, title: str = ""):
    """The 128-byte lines the access touches, side by side (untouched memory between them left
    out), each cut into its 4 sectors; touched sectors coloured, each lane a mark at its byte."""
    from course_lib.viz._figure import subplots
    from matplotlib.patches import Rectangle

    if ax is None:
        fig, ax = subplots(figsize=(9, 2.2))
    else:
        fig = ax.figure
    lines = acc.lines
    sectors = set(acc.sectors.tolist())
    per_line = LINE_BYTES // SECTOR_BYTES
    width = max(1, len(lines)) * (LINE_BYTES + 24)
    # Lane labels at least 12 px apart (7-point text, rotated): every k-th address when they crowd.
    axes_px = ax.get_position().width * fig.get_figwidth() * fig.dpi
    spacing_px = acc.itemsize * axes_px / (width + 8)
    every = max(1, math.ceil(12 / spacing_px))
    for k, line in enumerate(lines):
        x0 = k * (LINE_BYTES + 24)  # a gap between lines that are not adjacent in memory
        for s in range(per_line):
            sec = line * per_line + s
            ax.add_patch(Rectangle((x0 + s * SECTOR_BYTES, 0), SECTOR_BYTES, 1, fc="tab:orange" if sec in sectors else "#f2f2f2", ec="black", lw=0.6))
        if len(lines) <= 4:
            ax.text(x0 + LINE_BYTES / 2, -0.35, f"{LINE_BYTES}-byte line at byte {line * LINE_BYTES:,}", ha="center", fontsize=7)
        elif len(lines) <= 8:
            ax.text(x0 + LINE_BYTES / 2, -0.35, f"byte {line * LINE_BYTES:,}", ha="center", fontsize=7)
        readers: dict[int, list[int]] = {}  # byte address -> the lanes reading it (a broadcast has several)
        for lane, a in zip(acc.lanes, acc.byte_addresses):
            if a // LINE_BYTES == line:
                readers.setdefault(int(a), []).append(int(lane))
        for a, lanes in readers.items():
            x = x0 + a % LINE_BYTES
            ax.add_patch(Rectangle((x, 0.25), acc.itemsize, 0.5, fc="tab:blue", ec="none"))
            if len(lines) <= 2 and min(lanes) % every == 0:
                label = "/".join(map(str, lanes)) if len(lanes) <= 2 else f"{len(lanes)} lanes"
                ax.text(x + acc.itemsize / 2, 1.15, label, ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xlim(-8, width)
    ax.set_ylim(-0.6, 1.6)
    ax.axis("off")
    ax.set_title(title + ("\n" if title else "") + f"{plural(acc.n_sectors, 'sector')}, {plural(acc.n_lines, 'line')}, {acc.efficiency:.0%} of moved bytes used", fontsize=9)
    return fig


def _legend(fig) -> None:
    from matplotlib.patches import Patch

    fig.legend(
        handles=[
            Patch(fc="tab:orange", ec="black", lw=0.6, label="32-byte sector moved"),
            Patch(fc="#f2f2f2", ec="black", lw=0.6, label="sector not moved"),
            Patch(fc="tab:blue", label="bytes a lane asked for"),
        ],
        loc="lower center", ncol=3, fontsize=8, frameon=False,
    )


def draw_coalescing(accesses: dict[str, WarpAccess]):
    """Several accesses stacked (e.g. {'row-wise': ..., 'column-wise': ...}); returns the figure."""
    from course_lib.viz._figure import subplots

    fig, axes = subplots(len(accesses), 1, figsize=(9.2, 2.0 * len(accesses)), squeeze=False)
    for ax, (name, acc) in zip(axes[:, 0], accesses.items()):
        draw_access(acc, ax=ax, title=name)
    fig.tight_layout(rect=(0, 0.06, 1, 1))  # room for the legend below
    _legend(fig)
    return fig


def coalescing_widget(n: int = 4096, dtype: str = "fp32"):
    """Row-wise vs column-wise load of one warp, side by side; controls for N (the row stride),
    the element type and a starting column offset (misalignment). ``.accesses`` holds
    {'row': WarpAccess, 'column': WarpAccess}; ``.controls`` the controls ('n', 'dtype', 'offset')."""
    import ipywidgets as widgets

    from course_lib.viz._figure import connect, figure_box, figure_png, image_widget, style_controls

    n_s = widgets.IntSlider(value=n, min=64, max=8192, step=32, description="N (row stride)", continuous_update=False)
    dt = widgets.Dropdown(options=list(ELEMENTS), value=dtype, description="element")
    off = widgets.IntSlider(value=0, min=0, max=31, description="start column", continuous_update=False)
    style_controls(n_s, dt, off)
    summary = widgets.HTML()
    image = image_widget()
    controls = widgets.VBox([widgets.HBox([n_s, dt]), off])
    box = figure_box([controls, summary, image], "one warp's load in sectors and lines")
    box.summary = summary

    def update(_=None) -> None:
        size = ELEMENTS[dt.value].itemsize
        row = matrix_load("row", n_s.value, size, row=0, col=off.value)
        col = matrix_load("column", n_s.value, size, row=0, col=off.value)
        box.accesses = {"row": row, "column": col}
        stride = n_s.value * size
        summary.value = (
            f"<b>row-wise</b> (lane l reads A[0, {off.value} + l]): {row.describe()}<br>"
            f"<b>column-wise</b> (lane l reads A[l, {off.value}]): {col.describe()}<br>"
            f"down a column, neighbouring lanes are one row = N x {size} B = {stride:,} B apart, "
            f"lane 31 at byte {int(col.byte_addresses[-1]):,}: any stride of {SECTOR_BYTES} B or more "
            "gives every lane a sector of its own, so N moves the lines, not their number"
        )
        image.value = figure_png(draw_coalescing({
            "row-wise: threadIdx.x along a row": row,
            f"column-wise: threadIdx.x down a column (lanes {stride:,} B apart)": col,
        }))

    return connect(box, image, {"n": n_s, "dtype": dt, "offset": off}, update)
