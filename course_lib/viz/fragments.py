"""Tensor-core fragments: which lane holds which matrix elements for mma.sync and wgmma.

Notebooks 06 and 07 call::

    from course_lib.viz.fragments import fragment_map, fragments_widget, mma_m16n8k16, wgmma_m64nNk16_d
    mma_m16n8k16("A", lane=5, i=2)        # -> (9, 2): register a2 of lane 5 holds A[9, 2]
    fragment_map("mma.m16n8k16", "A")     # (owner lane, register index) of every element of A
    wgmma_m64nNk16_d(thread=64, i=0)      # -> (32, 0): warp 2 of the warpgroup owns rows 32..47
    fragments_widget()

A tensor-core instruction is executed by a whole warp (``mma.sync``) or a whole warpgroup of four
warps (``wgmma.mma_async``), and each thread brings a fixed piece (a *fragment*) of the operands in
its registers. The layouts below are the PTX ISA's, which is the only place they are defined:

* PTX ISA, section "Matrix Fragments for mma.m16n8k16 with floating point type" (9.7.x.5.8; the
  number moves between PTX versions): for .f16/.bf16 inputs, with
  ``groupID = %laneid >> 2`` and ``threadID_in_group = %laneid % 4``:

  - A (16 x 16, four .f16x2 registers, elements a0..a7):
    row = groupID for a0, a1, a4, a5 and groupID + 8 otherwise;
    col = threadID_in_group * 2 + (i & 1), plus 8 for i >= 4.
  - B (16 x 8, two .f16x2 registers, b0..b3):
    row = threadID_in_group * 2 + (i & 1), plus 8 for i >= 2; col = groupID.
  - C and D (16 x 8, four .f32 registers, c0..c3):
    row = groupID for i < 2, groupID + 8 otherwise; col = threadID_in_group * 2 + (i & 1).

* PTX ISA, section "Register Fragments" of "Asynchronous Warpgroup Level Matrix ... Layouts",
  subsection "Matrix Fragments for wgmma.mma_async.m64nNk16" (figures "WGMMA .m64nNk16 register
  fragment layout for matrix A" and "... for accumulator matrix D"): the 64 rows are cut into four
  slices of 16, warp w of the warpgroup (threads 32w..32w+31) owning rows 16w..16w+15 (the same
  assignment the PTX tables of the sparse wgmma variant list as "%warpid % 4 = w -> rows
  16w..16w+15"). Inside its slice a warp holds the accumulator exactly like an m16n8 C fragment,
  repeated for every 8 columns: thread t holds N/2 fp32 values d0..d(N/2-1) with
  row = 16w + groupID + 8 * ((i >> 1) & 1) and col = 8 * (i >> 2) + threadID_in_group * 2 + (i & 1).
  A in registers follows the m16n8k16 A layout inside each warp's 16 rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WARP_SIZE = 32
WARPGROUP_SIZE = 128
MMA_SHAPES = {"A": (16, 16, 8), "B": (16, 8, 4), "C": (16, 8, 4)}  # rows, cols, registers per lane
WGMMA_N = tuple(range(8, 257, 8))  # valid N of wgmma m64nNk16


def _lane_parts(lane: int) -> tuple[int, int]:
    if not 0 <= lane < WARP_SIZE:
        raise ValueError(f"lane is 0..31, got {lane}")
    return lane >> 2, lane % 4  # groupID, threadID_in_group


def mma_m16n8k16(operand: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) of the element that register element ``i`` of ``lane`` holds, for mma.sync
    .m16n8k16 with .f16/.bf16 inputs and .f32 accumulators ('A', 'B', or 'C' = 'D')."""
    operand = "C" if operand == "D" else operand
    if operand not in MMA_SHAPES:
        raise ValueError("operand is 'A', 'B', 'C' or 'D'")
    regs = MMA_SHAPES[operand][2]
    if not 0 <= i < regs:
        raise ValueError(f"{operand} has elements 0..{regs - 1} per lane, got {i}")
    group, tig = _lane_parts(lane)
    if operand == "A":
        row = group if (i < 2 or 4 <= i < 6) else group + 8
        col = tig * 2 + (i & 1) + (8 if i >= 4 else 0)
    elif operand == "B":
        row = tig * 2 + (i & 1) + (8 if i >= 2 else 0)
        col = group
    else:
        row = group if i < 2 else group + 8
        col = tig * 2 + (i & 1)
    return row, col


def wgmma_m64nNk16_d(thread: int, i: int, n: int = 16) -> tuple[int, int]:
    """(row, col) of accumulator element d``i`` of ``thread`` (0..127 in the warpgroup) for wgmma
    m64nNk16 with .f32 accumulators; each thread holds n/2 of them."""
    if n not in WGMMA_N:
        raise ValueError(f"N is a multiple of 8 from 8 to 256, got {n}")
    if not 0 <= thread < WARPGROUP_SIZE:
        raise ValueError(f"thread is 0..127 in a warpgroup, got {thread}")
    if not 0 <= i < n // 2:
        raise ValueError(f"each thread holds d0..d{n // 2 - 1} for N={n}, got {i}")
    warp, lane = divmod(thread, WARP_SIZE)
    group, tig = _lane_parts(lane)
    return 16 * warp + group + 8 * ((i >> 1) & 1), 8 * (i >> 2) + tig * 2 + (i & 1)


def wgmma_m64nNk16_a(thread: int, i: int) -> tuple[int, int]:
    """(row, col) of A element a``i`` of ``thread`` when wgmma m64nNk16 takes A from registers."""
    if not 0 <= thread < WARPGROUP_SIZE:
        raise ValueError(f"thread is 0..127 in a warpgroup, got {thread}")
    warp, lane = divmod(thread, WARP_SIZE)
    row, col = mma_m16n8k16("A", lane, i)
    return 16 * warp + row, col


def warp_rows(n: int = 16) -> dict[int, range]:
    """Accumulator rows owned by each warp of the warpgroup (from :func:`wgmma_m64nNk16_d`)."""
    out: dict[int, set[int]] = {}
    for t in range(WARPGROUP_SIZE):
        for i in range(n // 2):
            out.setdefault(t // WARP_SIZE, set()).add(wgmma_m64nNk16_d(t, i, n)[0])
    return {w: range(min(r), max(r) + 1) for w, r in sorted(out.items())}


@dataclass(frozen=True)
class FragmentMap:
    """Who holds each element of one operand: ``owner[r, c]`` = lane (or warpgroup thread),
    ``reg[r, c]`` = its register element index i."""

    instruction: str
    operand: str
    owner: np.ndarray
    reg: np.ndarray

    def elements_of(self, thread: int) -> list[tuple[int, int, int]]:
        """(i, row, col) of every element ``thread`` holds, in register order."""
        rows, cols = np.nonzero(self.owner == thread)
        return sorted((int(self.reg[r, c]), int(r), int(c)) for r, c in zip(rows, cols))


def fragment_map(instruction: str = "mma.m16n8k16", operand: str = "A", n: int = 16) -> FragmentMap:
    """The whole layout as arrays. ``instruction``: 'mma.m16n8k16' (operand A, B, C) or
    'wgmma.m64nNk16' (operand A or D, with N = ``n``). Raises if two registers claim one element
    or an element is left unowned (the layouts are bijections)."""
    if instruction == "mma.m16n8k16":
        op = "C" if operand == "D" else operand
        if op not in MMA_SHAPES:
            raise ValueError("mma.m16n8k16 operands are 'A', 'B', 'C'")
        rows, cols, regs = MMA_SHAPES[op]
        threads = WARP_SIZE
        where = lambda t, i: mma_m16n8k16(op, t, i)  # noqa: E731
    elif instruction == "wgmma.m64nNk16":
        threads = WARPGROUP_SIZE
        if operand == "D":
            rows, cols, regs = 64, n, n // 2
            where = lambda t, i: wgmma_m64nNk16_d(t, i, n)  # noqa: E731
        elif operand == "A":
            rows, cols, regs = 64, 16, 8
            where = wgmma_m64nNk16_a
        else:
            raise ValueError("wgmma.m64nNk16 fragments shown here are 'A' (in registers) and 'D'")
        op = operand
    else:
        raise ValueError("instruction is 'mma.m16n8k16' or 'wgmma.m64nNk16'")
    owner = np.full((rows, cols), -1)
    reg = np.full((rows, cols), -1)
    for t in range(threads):
        for i in range(regs):
            r, c = where(t, i)
            if owner[r, c] != -1:
                raise AssertionError(f"{instruction} {op}[{r}, {c}] claimed twice")
            owner[r, c], reg[r, c] = t, i
    if (owner < 0).any():
        raise AssertionError(f"{instruction} {op}: some elements have no owner")
    return FragmentMap(instruction, op, owner, reg)


# Lane colours: one hue per groupID (lane >> 2), four shades of it for threadID_in_group (lane % 4),
# from matplotlib's tab20c / tab20b families: 32 colours, no two alike, so "colour = lane" holds.
_HUES = (("tab20c", 0), ("tab20c", 1), ("tab20c", 2), ("tab20b", 3), ("tab20c", 3), ("tab20b", 1), ("tab20b", 4), ("tab20b", 2))
# Warp colours (wgmma's overview): four light tints, one per warp of the warpgroup.
WARP_COLOURS = ("#c6dbef", "#fdd0a2", "#c7e9c0", "#dadaeb")
ZOOM_COLS = 16  # columns of one warp's slice drawn with labels (the accumulator repeats every 8)


def lane_colour(lane: int) -> tuple[float, float, float]:
    """RGB of ``lane`` (0..31): hue from its groupID, shade from its threadID_in_group."""
    import matplotlib.pyplot as plt

    group, tig = _lane_parts(lane)
    cmap, family = _HUES[group]
    return tuple(plt.get_cmap(cmap).colors[4 * family + tig])


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
    import matplotlib.pyplot as plt
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
        outlined = f"\nred outline: what lane T{highlight} holds" if highlight is not None else ""
        fig, ax = plt.subplots(figsize=(1.0 + 0.36 * cols, 1.1 + 0.28 * rows))
        _labelled_map(ax, fm, range(rows), range(cols), highlight)
        ax.set_title(
            f"{fm.instruction} operand {fm.operand} ({rows} x {cols}), held by one warp\n"
            f"colour = lane (hue: groupID = lane >> 2, shade: lane % 4){outlined}",
            fontsize=9,
        )
        fig.tight_layout()
        return fig
    warp = (highlight or 0) // WARP_SIZE
    slice_rows = range(16 * warp, 16 * warp + 16)
    slice_cols = range(min(cols, ZOOM_COLS))
    overview_w = min(2.0, 0.5 + 0.03 * cols)
    zoom_w = 0.34 * len(slice_cols)
    fig, (ax_all, ax_warp) = plt.subplots(
        1, 2, figsize=(overview_w + zoom_w + 1.9, 1.4 + 0.28 * 16), gridspec_kw={"width_ratios": [overview_w, zoom_w]},
    )
    _warp_overview(ax_all, fm, highlight)
    ax_all.add_patch(Rectangle((-0.5, slice_rows.start - 0.5), len(slice_cols), 16, fill=False, ec="black", lw=2))
    _labelled_map(ax_warp, fm, slice_rows, slice_cols, highlight)
    more = f", columns 0-{len(slice_cols) - 1} of {cols}" if cols > len(slice_cols) else ""
    ax_warp.set_title(f"black box, enlarged: warp {warp} (T{32 * warp}-T{32 * warp + 31}), rows {slice_rows.start}-{slice_rows.stop - 1}{more}\n"
                      "colour = lane in the warp (hue: groupID, shade: lane % 4)", fontsize=9)
    outlined = f"; red outline: what thread T{highlight} holds" if highlight is not None else ""
    fig.suptitle(f"{fm.instruction} operand {fm.operand} ({rows} x {cols}), held by a warpgroup of 128 threads{outlined}", fontsize=9)
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
    thread = widgets.IntSlider(value=0, min=0, max=31, description="lane / thread", continuous_update=False)
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
        head = f"thread {thread.value} (warp {thread.value // 32}, lane {thread.value % 32})" if fm.instruction.startswith("wgmma") else f"lane {thread.value}"
        summary.value = f"{head} holds: {items}"
        image.value = figure_png(draw_fragments(fm, highlight=thread.value))

    return connect(box, image, {"instruction": instr, "operand": operand, "thread": thread, "n": n_d}, draw, adjust)
