"""Shared-memory banks: which bank each lane of a warp hits, the conflict degree, and two fixes.

Notebooks 02 and 04 call::

    from course_lib.viz.banks import banks_widget, bank_access, tile_access
    tile_access(32, 32, "column").conflict_degree                     # -> 32 (32-way conflict)
    tile_access(32, 32, "column", layout="padded").conflict_degree    # -> 1 (row pitch 33)
    tile_access(32, 32, "column", layout="swizzled").conflict_degree  # -> 1 (column ^ row)
    bank_access(byte_addresses)       # any pattern, e.g. a shared-memory access from the trace
    banks_widget()

Shared memory is split into 32 banks, each 4 bytes wide: the 4-byte word at byte address a lives in
bank (a // 4) % 32. In one access, each bank delivers one word; lanes that want *different* words
of the same bank are served one after another (a k-way conflict costs k passes), while lanes that
want the *same* word share it (broadcast, no conflict). A 32 x 32 fp32 tile stored row after row
puts a whole column in one bank (row pitch 128 bytes = 32 banks exactly), so 32 lanes reading a
column conflict 32-way. Two standard fixes: pad each row by one element (pitch 33 words: row r of
a column lands in bank (r + c) % 32, all different), or store element (r, c) at column c XOR r
(a permutation within each row, no wasted memory: the fix Hopper's TMA and wgmma use in hardware,
as 32/64/128-byte "swizzle" modes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.layout import cdiv
from course_lib.viz._figure import plural

N_BANKS = 32
BANK_BYTES = 4
WARP_SIZE = 32
LAYOUTS = ("plain", "padded", "swizzled")


@dataclass(frozen=True)
class BankAccess:
    """One warp's shared-memory access: byte address per active lane and the banks it hits."""

    byte_addresses: np.ndarray
    itemsize: int
    lanes: np.ndarray

    @property
    def words(self) -> list[np.ndarray]:
        """The 4-byte words each lane touches (one for 1/2/4-byte elements, more for wider ones)."""
        return [np.arange(a // BANK_BYTES, (a + self.itemsize - 1) // BANK_BYTES + 1) for a in self.byte_addresses]

    @property
    def banks(self) -> np.ndarray:
        """Bank of each lane's first word."""
        return (self.byte_addresses // BANK_BYTES) % N_BANKS

    @property
    def words_per_bank(self) -> np.ndarray:
        """(32,) distinct words requested from each bank (same word twice = broadcast = once)."""
        distinct = np.unique(np.concatenate(self.words)) if len(self.byte_addresses) else np.zeros(0, dtype=np.int64)
        return np.bincount(distinct % N_BANKS, minlength=N_BANKS)

    @property
    def conflict_degree(self) -> int:
        """The most distinct words any one bank must deliver: 1 = conflict-free, 32 = fully serialised."""
        return int(self.words_per_bank.max()) if len(self.byte_addresses) else 0

    @property
    def wavefronts(self) -> int:
        """Passes the access needs: the conflict degree, but at least one per 128 bytes requested."""
        distinct_words = int(self.words_per_bank.sum())
        return max(self.conflict_degree, cdiv(distinct_words, N_BANKS))

    def describe(self) -> str:
        d, passes = self.conflict_degree, self.wavefronts
        least = max(1, cdiv(int(self.words_per_bank.sum()), N_BANKS))  # one pass per 128 bytes requested
        busiest = int(np.argmax(self.words_per_bank))
        if passes <= least:
            kind = "conflict-free" + (f": {least} passes, the fewest for {4 * int(self.words_per_bank.sum())} bytes"
                                      if least > 1 else ", 1 pass")
            return f"{plural(len(self.lanes), 'lane')}: {kind}"
        words = "word" if d == 1 else "words"
        return (f"{plural(len(self.lanes), 'lane')}: {d}-way bank conflict (bank {busiest} serves {d} distinct {words}); "
                f"{passes} passes" + (f" where {least} would do" if least > 1 else ""))


def bank_access(byte_addresses, itemsize: int = 4, lanes=None) -> BankAccess:
    """A warp's shared-memory access from the byte address of each lane (offsets into shared memory)."""
    addr = np.asarray(byte_addresses, dtype=np.int64).ravel()
    if len(addr) > WARP_SIZE:
        raise ValueError(f"a warp has {WARP_SIZE} lanes, got {len(addr)} addresses")
    lanes = np.arange(len(addr)) if lanes is None else np.asarray(lanes, dtype=np.int64).ravel()
    if len(lanes) != len(addr):
        raise ValueError("one lane id per address")
    return BankAccess(addr, itemsize, lanes)


def element_offset(r, c, cols: int, layout: str = "plain", itemsize: int = 4):
    """Element index in shared memory of logical element (r, c) of a tile with ``cols`` columns.

    'plain': row-major, pitch ``cols``; 'padded': pitch ``cols + 1``; 'swizzled': pitch ``cols``
    with the column XOR-ed by the row (modulo the number of elements in one 128-byte bank row), so
    each row is a permutation of itself.
    """
    r, c = np.asarray(r), np.asarray(c)
    if layout == "plain":
        return r * cols + c
    if layout == "padded":
        return r * (cols + 1) + c
    if layout == "swizzled":
        period = N_BANKS * BANK_BYTES // itemsize  # elements in one pass over all 32 banks
        if cols % period:
            raise ValueError(f"the XOR swizzle here needs a multiple of {period} columns, got {cols}")
        return r * cols + (c ^ (r % period))
    raise ValueError(f"layout is one of {LAYOUTS}")


def tile_access(rows: int, cols: int, pattern: str = "column", layout: str = "plain", index: int = 0, itemsize: int = 4) -> BankAccess:
    """One warp reading a rows x cols tile: 'row' = lane l reads element (index, l) (wrapping to the
    next rows if the tile is narrower than 32), 'column' = lane l reads (l, index) (wrapping to the
    next columns if the tile has fewer than 32 rows)."""
    lane = np.arange(WARP_SIZE)
    if pattern == "row":
        r, c = index + lane // cols, lane % cols
    elif pattern == "column":
        r, c = lane % rows, index + lane // rows
    else:
        raise ValueError("pattern is 'row' or 'column'")
    if (r >= rows).any() or (c >= cols).any() or index < 0:
        raise ValueError(f"a warp reading {pattern} {index} leaves the {rows} x {cols} tile")
    return bank_access(element_offset(r, c, cols, layout, itemsize) * itemsize, itemsize)


MAX_ROWS_DRAWN = 34  # a 32 x 32 tile, padded, is 33 rows of 128 bytes: drawn whole


def draw_banks(acc: BankAccess, ax=None, title: str = "", words_in_tile: int | None = None):
    """Shared memory drawn as rows of 32 banks (one row = 128 bytes); the words the lanes read are
    coloured and labelled with the lane, and a bar per bank counts the distinct words it serves.

    Up to 34 rows the whole tile is drawn (light blue: the tile's words); a larger one (a 64 x 64
    tile is 128 rows) is cut to the rows the access reads, a dashed line marking each skipped
    stretch, so every row stays tall enough to label its lanes."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    words = np.concatenate(acc.words) if len(acc.lanes) else np.zeros(0, dtype=np.int64)
    top = int(words.max()) // N_BANKS + 1 if len(words) else 1
    if words_in_tile:
        top = max(top, cdiv(words_in_tile, N_BANKS))
    rows = np.arange(top) if top <= MAX_ROWS_DRAWN else np.unique(words // N_BANKS)
    shown_at = {int(r): i for i, r in enumerate(rows)}
    if ax is None:
        tall = 0.12 * max(len(rows), 12)  # at least as tall as the label beside it
        fig, (ax_bar, ax) = plt.subplots(2, 1, figsize=(7, 1.9 + tall), sharex=True, gridspec_kw={"height_ratios": [0.9, tall]})
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
