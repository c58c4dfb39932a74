"""Tensor-core fragments drawn: which lane holds which element for mma.sync and wgmma, coloured by
lane (the layouts: :mod:`course_lib.model.fragments`).

Notebook 06 calls::

    from course_lib.viz.fragments import draw_fragments, fragments_widget
    fragments_widget()
    draw_fragments(fragment_map("wgmma.m64nNk16", "D"), highlight=64)
"""

from __future__ import annotations

import numpy as np

from course_lib.model.fragments import FragmentMap, fragment_map, lane_parts
from course_lib.model.hardware import WARP_SIZE, WARPGROUP_SIZE


# Lane colours: one hue per groupID (lane >> 2), four shades of it for threadID_in_group (lane % 4),
# from matplotlib's tab20c / tab20b families: 32 colours, no two alike, so "colour = lane" holds.
_HUES = (("tab20c", 0), ("tab20c", 1), ("tab20c", 2), ("tab20b", 3), ("tab20c", 3), ("tab20b", 1), ("tab20b", 4), ("tab20b", 2))
# Warp colours (wgmma's overview): four light tints, one per warp of the warpgroup.
WARP_COLOURS = ("#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb")
ZOOM_COLS = 16  # columns of one warp's slice drawn with labels (the accumulator repeats every 8)


def lane_colour(lane: int) -> tuple[float, float, float]:
    """RGB of ``lane`` (0..31): hue from its groupID, shade from its threadID_in_group."""
    import matplotlib

    group, tig = lane_parts(lane)
    cmap, family = _HUES[group]
    return tuple(matplotlib.colormaps[cmap].colors[4 * family + tig])


def _ink(rgb) -> str:
    """Black or white text, whichever reads on ``rgb``."""
    r, g, b = rgb[:3]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"


def _reg_name(fm: FragmentMap) -> str:
    wg = fm.instruction.startswith("wgmma")
    return "a" if fm.operand == "A" else ("b" if fm.operand == "B" else ("d" if wg else "c"))


def _labelled_map(ax, fm: FragmentMap, rows: range, cols: range, highlight: int | None) -> None:
    """Rows x cols of the map, each cell coloured by lane and labelled 'T<owner>' over '<reg><i>';
    the elements of ``highlight`` outlined in red."""
    from matplotlib.patches import Rectangle

    owner = fm.owner[rows.start : rows.stop, cols.start : cols.stop]
    rgb = np.array([[lane_colour(t % WARP_SIZE) for t in line] for line in owner])
    ax.imshow(rgb, aspect="auto", interpolation="nearest", extent=(cols.start - 0.5, cols.stop - 0.5, rows.stop - 0.5, rows.start - 0.5))
    ax.set_gid("fragment-lanes")  # a test finds the lane-coloured picture by this id
    name = _reg_name(fm)
    for r in rows:
        for c in cols:
            t = fm.owner[r, c]
            ax.text(c, r, f"T{t}\n{name}{fm.reg[r, c]}", ha="center", va="center", fontsize=7, linespacing=1.0, color=_ink(lane_colour(t % WARP_SIZE)))
    if highlight is not None:
        for i, r, c in fm.elements_of(highlight):
            if r in rows and c in cols:
                ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="red", lw=2.5))
    ax.set_xticks(list(cols)[:: 2 if len(cols) > 8 else 1])
    ax.set_yticks(list(rows)[:: 2 if len(rows) > 8 else 1])
    ax.tick_params(labelsize=8)
    ax.set_xlabel("column", fontsize=9)
    ax.set_ylabel("row", fontsize=9)


def _warp_overview(ax, fm: FragmentMap, highlight: int | None) -> None:
    """The whole wgmma operand, coloured by warp of the warpgroup; ``highlight``'s elements red."""
    from matplotlib.colors import to_rgb

    rows, cols = fm.owner.shape
    rgb = np.array([[to_rgb(WARP_COLOURS[t // WARP_SIZE]) for t in line] for line in fm.owner])
    if highlight is not None:
        for i, r, c in fm.elements_of(highlight):
            rgb[r, c] = to_rgb("red")
    ax.imshow(rgb, aspect="auto", interpolation="nearest")
    ax.set_gid("fragment-warps")
    ax.set_yticks([8 + 16 * w for w in range(rows // 16)])
    ax.set_yticklabels([f"warp {w}\nrows {16 * w}-{16 * w + 15}" for w in range(rows // 16)], fontsize=8)
    ax.set_xticks(sorted({0, cols - 1, *range(0, cols, 16 if cols > 16 else 8)}))
    ax.tick_params(axis="x", labelsize=8)
    for w in range(1, rows // 16):
        ax.axhline(16 * w - 0.5, color="black", lw=0.8)
    ax.set_xlabel("column", fontsize=9)
    ax.set_title(f"all {rows} x {cols}: colour = warp\nred: T{highlight}'s elements" if highlight is not None else f"all {rows} x {cols}: colour = warp", fontsize=9)


def draw_fragments(fm: FragmentMap, highlight: int | None = None, ax=None):
    """Who holds which element. Returns the figure.

    mma.m16n8k16 (one warp): every element coloured by its lane - one colour per lane, the hue its
    groupID (lane >> 2), the shade its threadID_in_group (lane % 4) - and labelled 'T<lane>' over
    its register element; the elements of lane ``highlight`` outlined in red.

    wgmma.m64nNk16 (a warpgroup of 128 threads): too many elements to label at a readable size,
    so two panels: the whole operand coloured by warp, ``highlight``'s elements in red; and the
    16 rows of ``highlight``'s warp (at most 16 columns: the accumulator repeats its pattern every
    8 columns, outlined in the first panel), labelled like the mma map. With ``ax`` given, only the
    first panel is drawn there.
    """
    from course_lib.viz._figure import subplots
    from matplotlib.patches import Rectangle

    rows, cols = fm.owner.shape
    wg = fm.instruction.startswith("wgmma")
    if ax is not None:
        if wg:
            _warp_overview(ax, fm, highlight)
        else:
            _labelled_map(ax, fm, range(rows), range(cols), highlight)
        return ax.figure
    if not wg:
        outlined = f"\nred outline: what lane {highlight} (T{highlight}) holds" if highlight is not None else ""
        fig, ax = subplots(figsize=(1.0 + 0.36 * cols, 1.1 + 0.28 * rows))
        _labelled_map(ax, fm, range(rows), range(cols), highlight)
        ax.set_title(
            f"{fm.instruction} operand {fm.operand} ({rows} x {cols}), held by one warp\n"
            f"T<n>: lane n; colour = lane (hue: g = lane // 4, shade: t = lane % 4){outlined}",
            fontsize=9,
        )
        fig.tight_layout()
        return fig
    warp = (highlight or 0) // WARP_SIZE
    slice_rows = range(16 * warp, 16 * warp + 16)
    slice_cols = range(min(cols, ZOOM_COLS))
    overview_w = min(2.0, 0.5 + 0.03 * cols)
    zoom_w = 0.34 * len(slice_cols)
    fig, (ax_all, ax_warp) = subplots(
        1, 2, figsize=(overview_w + zoom_w + 1.9, 1.4 + 0.28 * 16), gridspec_kw={"width_ratios": [overview_w, zoom_w]},
    )
    _warp_overview(ax_all, fm, highlight)
    ax_all.add_patch(Rectangle((-0.5, slice_rows.start - 0.5), len(slice_cols), 16, fill=False, ec="black", lw=2))
    _labelled_map(ax_warp, fm, slice_rows, slice_cols, highlight)
    more = f", columns 0-{len(slice_cols) - 1} of {cols}" if cols > len(slice_cols) else ""
    ax_warp.set_title(f"black box, enlarged: warp {warp} (T{WARP_SIZE * warp}-T{WARP_SIZE * (warp + 1) - 1}), rows {slice_rows.start}-{slice_rows.stop - 1}{more}\n"
                      "colour = lane in the warp (hue: g = lane // 4, shade: t = lane % 4)", fontsize=9)
    outlined = f"; red outline: what thread T{highlight} holds" if highlight is not None else ""
    fig.suptitle(f"{fm.instruction} operand {fm.operand} ({rows} x {cols}), held by a warpgroup of {WARPGROUP_SIZE} threads{outlined}", fontsize=9)
    fig.tight_layout()
    return fig


def fragments_widget():
    """Pick the instruction, the operand and a thread; the layout is drawn with that thread's
    elements outlined and listed. ``.fragments`` (a :class:`FragmentMap`) and ``.selected`` (its
    elements as (i, row, col)) hold what is on display; ``.controls``: 'instruction', 'operand',
    'thread', 'n'."""
    import ipywidgets as widgets

    from course_lib.viz._figure import connect, figure_box, figure_png, image_widget, style_controls

    instr = widgets.ToggleButtons(options=["mma.m16n8k16", "wgmma.m64nNk16"], value="mma.m16n8k16", description="instruction")
    operand = widgets.ToggleButtons(options=["A", "B", "C"], value="A", description="operand")
    thread = widgets.IntSlider(value=0, min=0, max=WARP_SIZE - 1, description="lane / thread", continuous_update=False)
    n_d = widgets.Dropdown(options=[8, 16, 32, 64], value=16, description="wgmma N")
    style_controls(instr, operand, thread, n_d)
    summary = widgets.HTML()
    image = image_widget()
    box = figure_box([instr, widgets.HBox([operand, n_d]), thread, summary, image], "tensor-core fragments")
    box.summary = summary

    def adjust() -> None:
        wg = instr.value.startswith("wgmma")
        options = ["A", "D"] if wg else ["A", "B", "C"]
        if list(operand.options) != options:
            keep = operand.value if operand.value in options else ("D" if wg else "C")
            operand.options = options
            operand.value = keep
        thread.max = WARPGROUP_SIZE - 1 if wg else WARP_SIZE - 1
        n_d.disabled = not wg  # N is wgmma's: greyed out for mma.m16n8k16, where it changes nothing

    def draw() -> None:
        fm = fragment_map(instr.value, operand.value, n_d.value)
        box.fragments, box.selected = fm, fm.elements_of(thread.value)
        items = ", ".join(f"{fm.operand.lower()}{i}=({r},{c})" for i, r, c in box.selected)
        head = f"thread {thread.value} (warp {thread.value // WARP_SIZE}, lane {thread.value % WARP_SIZE})" if fm.instruction.startswith("wgmma") else f"lane {thread.value}"
        summary.value = f"{head} holds: {items}"
        image.value = figure_png(draw_fragments(fm, highlight=thread.value))

    return connect(box, image, {"instruction": instr, "operand": operand, "thread": thread, "n": n_d}, draw, adjust)
