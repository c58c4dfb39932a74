"""Tiles and reuse drawn: what a block of a T x T tiled GEMM loads at each step, with sliders (the
model: :mod:`course_lib.model.tiles`).

Notebook 02 calls::

    from course_lib.viz.tiles import tiles_widget
    tiles_widget()                                   # sliders: N, T, block row/col, step
"""

from __future__ import annotations

from course_lib.model.tiles import TileStep, reuse_counts, tile_step, tile_steps


def draw_tiles(s: TileStep, ax=None):
    """A, B and C side by side: the block's band of A and B, tiles already used (light), the tiles of
    this step (strong), and the block's C tile. Returns the figure."""
    from course_lib.viz._figure import subplots
    from matplotlib.patches import Rectangle

    if ax is None:
        fig, axes = subplots(1, 3, figsize=(9.2, 3.9))
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


def tiles_widget(n: int = 64, tile: int = 16, block: tuple[int, int] = (0, 0)):
    """Sliders for N, T, the block (bi, bj) and the step; shows the tiles loaded and the read counts.
    ``block`` is the block shown first, (block row, block column), as :func:`tile_step` takes it.
    ``.step`` (a :class:`TileStep`) and ``.counts`` (a :class:`ReuseCounts`) hold what is on display;
    ``.controls`` the controls by name ('n', 'tile', 'bi', 'bj', 'step')."""
    import ipywidgets as widgets

    from course_lib.viz._figure import connect, figure_box, figure_png, image_widget, style_controls

    n_s = widgets.IntSlider(value=n, min=8, max=256, step=8, description="N", continuous_update=False)
    t_d = widgets.Dropdown(options=[4, 8, 16, 32], value=tile, description="tile T")
    steps = tile_steps(n, tile)
    if len(block) != 2 or not all(0 <= b < steps for b in block):
        raise ValueError(f"tiles_widget: block {block} is outside the {steps} x {steps} grid of blocks of N = {n}, "
                         f"T = {tile}; give (block row, block column), each from 0 to {steps - 1}")
    bi_s = widgets.IntSlider(value=block[0], min=0, max=steps - 1, description="block row bi",
                             continuous_update=False)
    bj_s = widgets.IntSlider(value=block[1], min=0, max=steps - 1, description="block col bj",
                             continuous_update=False)
    step_s = widgets.IntSlider(value=0, min=0, max=0, description="step t", continuous_update=False)
    style_controls(n_s, t_d, bi_s, bj_s, step_s)
    summary = widgets.HTML()
    image = image_widget()
    rows = widgets.VBox([widgets.HBox([bi_s, bj_s]), step_s])
    box = figure_box([widgets.HBox([n_s, t_d]), rows, summary, image], "what a tiled block loads at each step")
    box.summary = summary

    def adjust() -> None:
        steps = tile_steps(n_s.value, t_d.value)
        for s in (bi_s, bj_s, step_s):  # keep the index sliders inside the grid
            s.max = steps - 1
            s.value = min(s.value, steps - 1)

    def draw() -> None:
        st = tile_step(n_s.value, t_d.value, (bi_s.value, bj_s.value), step_s.value)
        box.step, box.counts = st, reuse_counts(n_s.value, t_d.value)
        summary.value = f"{st.describe()}<br>{box.counts.describe()}"
        image.value = figure_png(draw_tiles(st))

    return connect(box, image, {"n": n_s, "tile": t_d, "bi": bi_s, "bj": bj_s, "step": step_s}, draw, adjust)
