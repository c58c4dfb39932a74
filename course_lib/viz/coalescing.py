"""Coalescing: the memory one warp's load touches, in 32-byte sectors and 128-byte lines.

Notebooks 01 and 04 call::

    from course_lib.viz.coalescing import coalescing_widget, matrix_load, warp_access
    matrix_load("row", n=4096).n_sectors       # -> 4: 32 consecutive fp32 = 128 bytes = 4 sectors
    matrix_load("column", n=4096).n_sectors    # -> 32: stride of N elements, one sector per lane
    warp_access(byte_addresses, itemsize=4)    # any pattern, e.g. from course_lib.viz.trace
    coalescing_widget()                        # row-wise vs column-wise side by side, N/dtype/offset

The 32 threads of a warp issue one load instruction together. The memory system serves it in
32-byte *sectors* (the unit moved between L2 and DRAM and into L1); sectors group into 128-byte
cache *lines*. A load costs as many sector transfers as distinct sectors its addresses fall in, so
32 threads reading 32 consecutive 4-byte floats cost 4 sectors (128 useful bytes of 128 moved),
while 32 threads reading down a column of a row-major N x N fp32 matrix (stride 4N bytes) cost 32
sectors and use 4 bytes of every 32 moved (12.5 %). Matrices are assumed to start 256-byte aligned,
as cudaMalloc and PyTorch's allocator give them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from course_lib.layout import cdiv
from course_lib.viz._figure import plural

SECTOR_BYTES = 32
LINE_BYTES = 128
WARP_SIZE = 32
ITEMSIZE = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2}


@dataclass(frozen=True)
class WarpAccess:
    """One warp-wide load or store: the byte address of each active lane and what it touches."""

    byte_addresses: np.ndarray  # (lanes,) start address of each active lane's element
    itemsize: int
    lanes: np.ndarray  # lane ids (0..31) of the active lanes, same order

    @property
    def sectors(self) -> np.ndarray:
        """Distinct 32-byte sector indices (address // 32) touched, sorted."""
        a = self.byte_addresses
        first, last = a // SECTOR_BYTES, (a + self.itemsize - 1) // SECTOR_BYTES
        spans = [np.arange(f, l + 1) for f, l in zip(first, last)]
        return np.unique(np.concatenate(spans)) if spans else np.zeros(0, dtype=np.int64)

    @property
    def lines(self) -> np.ndarray:
        """Distinct 128-byte line indices touched, sorted."""
        return np.unique(self.sectors // (LINE_BYTES // SECTOR_BYTES))

    @property
    def n_sectors(self) -> int:
        """Sector transfers the access costs (the transaction count)."""
        return len(self.sectors)

    @property
    def n_lines(self) -> int:
        return len(self.lines)

    @property
    def bytes_requested(self) -> int:
        """Distinct bytes the lanes asked for (lanes reading the same element count once)."""
        return len(np.unique(self.byte_addresses)) * self.itemsize

    @property
    def bytes_moved(self) -> int:
        return self.n_sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float:
        """Useful bytes / moved bytes (1.0 = perfectly coalesced)."""
        return self.bytes_requested / self.bytes_moved if self.bytes_moved else 1.0

    @property
    def ideal_sectors(self) -> int:
        """The fewest sectors that could hold the bytes requested."""
        return cdiv(self.bytes_requested, SECTOR_BYTES)

    def describe(self) -> str:
        return (
            f"{plural(len(self.lanes), 'lane')} x {self.itemsize} B: {plural(self.n_sectors, 'sector')} "
            f"(ideal {self.ideal_sectors}), {plural(self.n_lines, 'line')} of 128 B, {self.bytes_moved} B moved "
            f"for {self.bytes_requested} B used = {self.efficiency:.1%}"
        )


def warp_access(byte_addresses, itemsize: int = 4, lanes=None) -> WarpAccess:
    """A warp access from the byte address each lane reads (lane i = i-th address unless ``lanes``)."""
    addr = np.asarray(byte_addresses, dtype=np.int64).ravel()
    if len(addr) > WARP_SIZE:
        raise ValueError(f"a warp has {WARP_SIZE} lanes, got {len(addr)} addresses")
    if itemsize not in (1, 2, 4, 8, 16):
        raise ValueError(f"itemsize is 1, 2, 4, 8 or 16 bytes, got {itemsize}")
    lanes = np.arange(len(addr)) if lanes is None else np.asarray(lanes, dtype=np.int64).ravel()
    if len(lanes) != len(addr):
        raise ValueError("one lane id per address")
    return WarpAccess(addr, itemsize, lanes)


def matrix_load(pattern: str, n: int, itemsize: int = 4, row: int = 0, col: int = 0, base: int = 0) -> WarpAccess:
    """Lane l of a warp reads element (row, col + l) ('row': along a row) or (row + l, col)
    ('column': down a column) of a row-major n x n matrix starting at byte ``base``."""
    lane = np.arange(WARP_SIZE)
    if pattern == "row":
        r, c = np.full(WARP_SIZE, row), col + lane
    elif pattern == "column":
        r, c = row + lane, np.full(WARP_SIZE, col)
    else:
        raise ValueError("pattern is 'row' or 'column'")
    if n < 1 or (r >= n).any() or (c >= n).any() or row < 0 or col < 0:
        raise ValueError(f"the warp's 32 elements from ({row}, {col}) going {pattern}-wise leave the {n} x {n} matrix")
    return warp_access(base + (r * n + c) * itemsize, itemsize)


def draw_access(acc: WarpAccess, ax=None, title: str = ""):
    """The 128-byte lines the access touches, side by side (untouched memory between them left
    out), each cut into its 4 sectors; touched sectors coloured, each lane a mark at its byte."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 2.2))
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
            ax.text(x0 + LINE_BYTES / 2, -0.35, f"128-byte line at byte {line * LINE_BYTES:,}", ha="center", fontsize=7)
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
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(accesses), 1, figsize=(9.2, 2.0 * len(accesses)), squeeze=False)
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
    dt = widgets.Dropdown(options=list(ITEMSIZE), value=dtype, description="element")
    off = widgets.IntSlider(value=0, min=0, max=31, description="start column", continuous_update=False)
    style_controls(n_s, dt, off)
    summary = widgets.HTML()
    image = image_widget()
    controls = widgets.VBox([widgets.HBox([n_s, dt]), off])
    box = figure_box([controls, summary, image], "one warp's load in sectors and lines")
    box.summary = summary

    def update(_=None) -> None:
        size = ITEMSIZE[dt.value]
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
