"""Shared-memory banks drawn: which bank each lane of a warp hits and how many words each bank
serves, for a plain, padded or XOR-swizzled tile (the model: :mod:`course_lib.model.banks`).

Notebooks 02 and 04 call::

    from course_lib.viz.banks import banks_widget, draw_banks
    banks_widget()
    draw_banks(bank_access(byte_addresses))   # any access of course_lib.model.banks
"""

from __future__ import annotations

import numpy as np

from course_lib.model.banks import LAYOUTS, BankAccess, tile_access
from course_lib.model.hardware import N_BANKS
from course_lib.model.layout import cdiv
from course_lib.model.text import plural


MAX_ROWS_DRAWN = 34  # a 32 x 32 tile, padded, is 33 rows of 128 bytes: drawn whole


def draw_banks(acc: BankAccess, ax=None, title: str = "", words_in_tile: int | None = None):
    """Shared memory drawn as rows of 32 banks (one row = 128 bytes); the words the lanes read are
    coloured and labelled with the lane, and a bar per bank counts the distinct words it serves.

    Up to 34 rows the whole tile is drawn (light blue: the tile's words); a larger one (a 64 x 64
    tile is 128 rows) is cut to the rows the access reads, a dashed line marking each skipped
    stretch, so every row stays tall enough to label its lanes."""
    from course_lib.viz._figure import subplots
    from matplotlib.ticker import MaxNLocator

    words = np.concatenate(acc.words) if len(acc.lanes) else np.zeros(0, dtype=np.int64)
    top = int(words.max()) // N_BANKS + 1 if len(words) else 1
    if words_in_tile:
        top = max(top, cdiv(words_in_tile, N_BANKS))
    rows = np.arange(top) if top <= MAX_ROWS_DRAWN else np.unique(words // N_BANKS)
    shown_at = {int(r): i for i, r in enumerate(rows)}
    if ax is None:
        tall = 0.12 * max(len(rows), 12)  # at least as tall as the label beside it
        fig, (ax_bar, ax) = subplots(2, 1, figsize=(7, 1.9 + tall), sharex=True, gridspec_kw={"height_ratios": [0.9, tall]})
    else:
        ax_bar, ax = ax
        fig = ax.figure
    grid = np.zeros((len(rows), N_BANKS))
    if words_in_tile:
        for i, r in enumerate(rows):
            grid[i, : max(0, min(N_BANKS, words_in_tile - r * N_BANKS))] = 0.15
    for ws in acc.words:
        for w in ws:
            grid[shown_at[int(w // N_BANKS)], w % N_BANKS] = 1
    ax.imshow(grid, cmap="Blues", vmin=0, vmax=1.2, aspect="auto", interpolation="nearest")
    for lane, ws in zip(acc.lanes, acc.words):
        w = ws[0]
        ax.text(w % N_BANKS, shown_at[int(w // N_BANKS)], str(lane), ha="center", va="center", fontsize=7, color="white")
    gaps = [i for i in range(1, len(rows)) if rows[i] != rows[i - 1] + 1]  # rows left out before row i
    for i in gaps:
        ax.axhline(i - 0.5, color="black", lw=0.8, ls="--")
    step = 1 if len(rows) <= 16 or top > MAX_ROWS_DRAWN else 4
    ax.set_yticks(range(0, len(rows), step))
    ax.set_yticklabels([str(r) for r in rows[::step]], fontsize=8)
    ax.set_xticks(range(0, N_BANKS, 4))
    cut = "" if top <= MAX_ROWS_DRAWN else f"\nonly the {plural(len(rows), 'row')} (of {top}) the warp reads" + ("; dashed line: rows left out" if gaps else "")
    ax.set_xlabel(f"bank{cut}")
    ax.set_ylabel("shared memory,\n128-byte row", fontsize=8)
    counts = acc.words_per_bank
    ax_bar.bar(range(N_BANKS), counts, color=["tab:red" if c > 1 else "tab:green" for c in counts])
    ax_bar.yaxis.set_major_locator(MaxNLocator(nbins=3, integer=True))
    ax_bar.tick_params(labelsize=8)
    ax_bar.set_ylabel("words\nper bank", fontsize=8)
    ax_bar.set_title((title + ": " if title else "") + acc.describe(), fontsize=9)
    fig.tight_layout()
    return fig


def banks_widget(cols: int = 32, pattern: str = "column", layout: str = "plain"):
    """Choose the access (row or column of a tile), the layout (plain, padded, swizzled) and the
    tile width; the bank picture and the conflict degree of all three layouts update.
    ``.access`` holds the :class:`BankAccess` on display, ``.degrees`` {layout: conflict degree};
    ``.controls`` the controls ('cols', 'pattern', 'layout', 'index')."""
    import ipywidgets as widgets

    from course_lib.viz._figure import connect, figure_box, figure_png, image_widget, style_controls

    cols_d = widgets.Dropdown(options=[32, 64], value=cols, description="tile (fp32)")
    pat = widgets.ToggleButtons(options=["row", "column"], value=pattern, description="warp reads a")
    lay = widgets.ToggleButtons(options=list(LAYOUTS), value=layout, description="layout")
    idx = widgets.IntSlider(value=0, min=0, max=cols - 1, description="which row/col", continuous_update=False)
    style_controls(cols_d, pat, lay, idx)
    summary = widgets.HTML()
    image = image_widget()
    box = figure_box([widgets.HBox([cols_d, idx]), pat, lay, summary, image], "shared-memory banks")
    box.summary = summary

    def update(_=None) -> None:
        n = cols_d.value
        idx.max = n - 1
        degrees = {l: tile_access(n, n, pat.value, l, idx.value).conflict_degree for l in LAYOUTS}
        acc = tile_access(n, n, pat.value, lay.value, idx.value)
        box.access, box.degrees = acc, degrees
        pitch = n + 1 if lay.value == "padded" else n
        summary.value = (
            f"{n} x {n} fp32 tile, lane l reads {'A[%d, l]' % idx.value if pat.value == 'row' else 'A[l, %d]' % idx.value}: "
            + ", ".join(f"{l}: {d}-way" if d > 1 else f"{l}: conflict-free" for l, d in degrees.items())
        )
        image.value = figure_png(draw_banks(acc, title=f"{lay.value} layout", words_in_tile=n * pitch))

    return connect(box, image, {"cols": cols_d, "pattern": pat, "layout": lay, "index": idx}, update)
