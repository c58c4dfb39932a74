"""Tiles and reuse: what a block of a T x T tiled GEMM loads at each step, and what tiling saves.

Notebook 02 calls::

    from course_lib.viz.tiles import reuse_counts, tile_step, tiles_widget
    tile_step(n=64, tile=16, block=(1, 2), step=0)   # A tile (1, 0) and B tile (0, 2): rows/cols named
    reuse_counts(n=4096, tile=32).describe()         # naive 2*N^3 global reads vs tiled 2*N^3/T
    tiles_widget()                                   # sliders: N, T, block row/col, step

The kernel is the classic shared-memory tiling of C = A @ B with square N x N matrices: block
(bi, bj) owns the T x T tile of C at block-row bi and block-column bj. At step t it copies A's tile
(bi, t) and B's tile (t, bj) into shared memory (one element per thread), synchronises, and every
thread reads a row of the A tile and a column of the B tile from shared memory. After ceil(N/T)
steps the C tile is done.

Counting element reads (a "read" is one element fetched by one thread):

* naive (one thread per C element, no sharing): every thread reads a row of A and a column of B
  from global memory: N^2 threads x 2N = 2 N^3 global reads; each element of A or B is read N times.
* tiled: each element of A is loaded into shared memory once per block that needs it, that is once
  per block-column of C: ceil(N/T) times; the global reads total 2 N^2 ceil(N/T) (= 2 N^3 / T when T
  divides N). The 2 N^3 reads the arithmetic needs still happen, but from shared memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.layout import cdiv


def _steps(n: int, tile: int) -> int:
    if n < 1 or tile < 1:
        raise ValueError(f"need n >= 1 and tile >= 1, got n={n}, tile={tile}")
    return cdiv(n, tile)


@dataclass(frozen=True)
class TileStep:
    """What block ``block`` = (bi, bj) loads at step ``step`` of a T x T tiled GEMM over N x N."""

    n: int
    tile: int
    block: tuple[int, int]
    step: int
    a_tile: tuple[int, int]  # (tile row, tile col) in A
    b_tile: tuple[int, int]  # (tile row, tile col) in B
    a_rows: range  # the element rows/cols of A and B loaded (clipped at the matrix edge)
    a_cols: range
    b_rows: range
    b_cols: range

    @property
    def steps(self) -> int:
        return _steps(self.n, self.tile)

    def describe(self) -> str:
        bi, bj = self.block
        return (
            f"block ({bi}, {bj}), step {self.step + 1} of {self.steps}: loads A tile {self.a_tile} "
            f"(rows {self.a_rows.start}..{self.a_rows.stop - 1}, cols {self.a_cols.start}..{self.a_cols.stop - 1}) "
            f"and B tile {self.b_tile} (rows {self.b_rows.start}..{self.b_rows.stop - 1}, "
            f"cols {self.b_cols.start}..{self.b_cols.stop - 1})"
        )


def tile_step(n: int, tile: int, block: tuple[int, int], step: int) -> TileStep:
    """The tiles of A and B that block (bi, bj) loads at step ``step`` (0-based)."""
    steps = _steps(n, tile)
    bi, bj = block
    if not (0 <= bi < steps and 0 <= bj < steps):
        raise ValueError(f"block {block} is outside the {steps} x {steps} grid of blocks")
    if not 0 <= step < steps:
        raise ValueError(f"step {step} is outside 0..{steps - 1}")

    def span(i: int) -> range:
        return range(i * tile, min(n, (i + 1) * tile))

    return TileStep(n, tile, (bi, bj), step, (bi, step), (step, bj), span(bi), span(step), span(step), span(bj))


def schedule(n: int, tile: int, block: tuple[int, int]) -> list[TileStep]:
    """Every step of one block, in order."""
    return [tile_step(n, tile, block, t) for t in range(_steps(n, tile))]


def global_read_map(n: int, tile: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """How many times each element of A and of B is read from global memory, counted by walking the
    kernel's schedule (``tile=None``: the naive kernel). Returns (counts_a, counts_b), each N x N."""
    if tile is None:
        # naive: thread (i, j) reads row i of A and column j of B, so A[i, k] is read by the N
        # threads of row i and B[k, j] by the N threads of column j.
        return np.full((n, n), n, dtype=np.int64), np.full((n, n), n, dtype=np.int64)
    counts_a = np.zeros((n, n), dtype=np.int64)
    counts_b = np.zeros((n, n), dtype=np.int64)
    steps = _steps(n, tile)
    for bi in range(steps):
        for bj in range(steps):
            for s in schedule(n, tile, (bi, bj)):
                counts_a[s.a_rows.start : s.a_rows.stop, s.a_cols.start : s.a_cols.stop] += 1
                counts_b[s.b_rows.start : s.b_rows.stop, s.b_cols.start : s.b_cols.stop] += 1
    return counts_a, counts_b


@dataclass(frozen=True)
class ReuseCounts:
    """Element reads of A and B together, naive vs tiled (formulas; see the module docstring)."""

    n: int
    tile: int

    @property
    def naive_global(self) -> int:
        return 2 * self.n**3

    @property
    def tiled_global(self) -> int:
        return 2 * self.n**2 * cdiv(self.n, self.tile)

    @property
    def tiled_shared(self) -> int:
        """Reads from shared memory in the tiled kernel: the same 2 N^3 the arithmetic needs."""
        return 2 * self.n**3

    @property
    def per_element_naive(self) -> int:
        """Global reads of one element of A (or B), naive."""
        return self.n

    @property
    def per_element_tiled(self) -> int:
        return cdiv(self.n, self.tile)

    @property
    def saving(self) -> float:
        """How many times fewer global reads tiling needs (T when T divides N)."""
        return self.naive_global / self.tiled_global

    def describe(self) -> str:
        return (
            f"N={self.n}, T={self.tile}: global reads naive 2*N^3 = {self.naive_global:,}; tiled "
            f"2*N^2*ceil(N/T) = {self.tiled_global:,} ({self.saving:g}x fewer); each element of A or B "
            f"read from global {self.per_element_naive} times naive, {self.per_element_tiled} times tiled; "
            f"shared-memory reads (tiled) {self.tiled_shared:,}"
        )


def reuse_counts(n: int, tile: int) -> ReuseCounts:
    _steps(n, tile)
    return ReuseCounts(n, tile)


def draw_tiles(s: TileStep, ax=None):
    """A, B and C side by side: the block's band of A and B, tiles already used (light), the tiles of
    this step (strong), and the block's C tile. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if ax is None:
        fig, axes = plt.subplots(1, 3, figsize=(9.2, 3.9))
    else:
        axes = ax
        fig = axes[0].figure
    n, t = s.n, s.tile
    bi, bj = s.block
    panels = (("A", s.a_rows, None, "tab:blue"), ("B", None, s.b_cols, "tab:orange"), ("C = A @ B", s.a_rows, s.b_cols, "tab:green"))
    for a, (name, rows, cols, color) in zip(axes, panels):
        a.set_xlim(0, n)
        a.set_ylim(n, 0)
        a.set_aspect("equal")
        a.set_title(name, fontsize=10)
        a.set_xticks(range(0, n + 1, t) if n // t <= 16 else [0, n])
        a.set_yticks(range(0, n + 1, t) if n // t <= 16 else [0, n])
        a.tick_params(labelsize=7)
        a.grid(True, color="#dddddd", lw=0.5)
    ax_a, ax_b, ax_c = axes
    for done in range(s.step + 1):
        past = tile_step(n, t, s.block, done)
        alpha = 0.85 if done == s.step else 0.25
        ax_a.add_patch(Rectangle((past.a_cols.start, past.a_rows.start), len(past.a_cols), len(past.a_rows), color="tab:blue", alpha=alpha))
        ax_b.add_patch(Rectangle((past.b_cols.start, past.b_rows.start), len(past.b_cols), len(past.b_rows), color="tab:orange", alpha=alpha))
    # The whole band the block will read, outlined.
    ax_a.add_patch(Rectangle((0, s.a_rows.start), n, len(s.a_rows), fill=False, ec="tab:blue", lw=1.5))
    ax_b.add_patch(Rectangle((s.b_cols.start, 0), len(s.b_cols), n, fill=False, ec="tab:orange", lw=1.5))
    frac = (s.step + 1) / s.steps
    ax_c.add_patch(Rectangle((s.b_cols.start, s.a_rows.start), len(s.b_cols), len(s.a_rows), color="tab:green", alpha=0.25 + 0.6 * frac))
    ax_a.set_xlabel(f"k (column of A)\nstep {s.step + 1}: A tile {s.a_tile} -> shared memory", fontsize=8)
    ax_a.set_ylabel("row of A (and of C)", fontsize=8)
    ax_b.set_xlabel(f"column of B (and of C)\nstep {s.step + 1}: B tile {s.b_tile} -> shared memory", fontsize=8)
    ax_b.set_ylabel("k (row of B)", fontsize=8)
    ax_c.set_xlabel(f"column of C\nblock ({bi}, {bj}) has summed {s.step + 1}/{s.steps} of K", fontsize=8)
    ax_c.set_ylabel("row of C", fontsize=8)
    fig.suptitle(
        f"T x T tiling, N={n}, T={t}: step {s.step + 1} of {s.steps}\n"
        "strong colour: the tiles copied in this step; light: earlier steps; outline: all the block reads",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def tiles_widget(n: int = 64, tile: int = 16):
    """Sliders for N, T, the block (bi, bj) and the step; shows the tiles loaded and the read counts.
    ``.step`` (a :class:`TileStep`) and ``.counts`` (a :class:`ReuseCounts`) hold what is on display;
    ``.controls`` the controls by name ('n', 'tile', 'bi', 'bj', 'step')."""
    import ipywidgets as widgets

    from course_lib.viz._figure import connect, figure_box, figure_png, image_widget, style_controls

    n_s = widgets.IntSlider(value=n, min=8, max=256, step=8, description="N", continuous_update=False)
    t_d = widgets.Dropdown(options=[4, 8, 16, 32], value=tile, description="tile T")
    bi_s = widgets.IntSlider(value=0, min=0, max=0, description="block row bi", continuous_update=False)
    bj_s = widgets.IntSlider(value=0, min=0, max=0, description="block col bj", continuous_update=False)
    step_s = widgets.IntSlider(value=0, min=0, max=0, description="step t", continuous_update=False)
    style_controls(n_s, t_d, bi_s, bj_s, step_s)
    summary = widgets.HTML()
    image = image_widget()
    rows = widgets.VBox([widgets.HBox([bi_s, bj_s]), step_s])
    box = figure_box([widgets.HBox([n_s, t_d]), rows, summary, image], "what a tiled block loads at each step")
    box.summary = summary

    def adjust() -> None:
        steps = _steps(n_s.value, t_d.value)
        for s in (bi_s, bj_s, step_s):  # keep the index sliders inside the grid
            s.max = steps - 1
            s.value = min(s.value, steps - 1)

    def draw() -> None:
        st = tile_step(n_s.value, t_d.value, (bi_s.value, bj_s.value), step_s.value)
        box.step, box.counts = st, reuse_counts(n_s.value, t_d.value)
        summary.value = f"{st.describe()}<br>{box.counts.describe()}"
        image.value = figure_png(draw_tiles(st))

    return connect(box, image, {"n": n_s, "tile": t_d, "bi": bi_s, "bj": bj_s, "step": step_s}, draw, adjust)
