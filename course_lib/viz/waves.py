"""Waves drawn: each wave a row, each SM a column, coloured by the blocks resident on it; and the
widget of notebook 00 (the model: :mod:`course_lib.model.waves`).

Notebook 00 (and notebook 03 when it sweeps tile shapes) calls::

    from course_lib.viz.waves import draw_waves, waves_widget
    waves_widget()                     # sliders: matrix size, tile, threads, registers, shared memory
    draw_waves(gemm_waves(4096, 4096, 128, 128, occupancy=1))
"""

from __future__ import annotations

import numpy as np

from course_lib.model.text import plural
from course_lib.model.waves import Waves, gemm_waves, resident_blocks


def draw_waves(w: Waves, ax=None, max_waves: int = 12):
    """Each row a wave, each column an SM; colour = blocks resident. Only the last ``max_waves``
    waves are drawn (the earlier ones are all full). Returns the figure."""
    import matplotlib
    from matplotlib.colors import BoundaryNorm, ListedColormap

    from course_lib.viz._figure import subplots

    grid = w.occupancy_map()
    first = max(0, w.waves - max_waves)
    shown = grid[first:]
    if ax is None:
        fig, ax = subplots(figsize=(9, 0.3 * len(shown) + 1.6))
    else:
        fig = ax.figure
    # One colour per count of resident blocks (grey = none): the colour bar is the legend.
    colors = ["#eeeeee"] + list(matplotlib.colormaps["Blues"](np.linspace(0.35, 0.95, max(1, w.resident))))
    cmap = ListedColormap(colors)
    norm = BoundaryNorm(np.arange(-0.5, w.resident + 1), cmap.N)
    im = ax.imshow(shown, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest")
    ticks = range(w.resident + 1) if w.resident <= 16 else sorted({0, *range(0, w.resident + 1, 4), w.resident})
    bar = fig.colorbar(im, ax=ax, ticks=list(ticks), pad=0.01, fraction=0.04)
    bar.set_label("blocks on the SM", fontsize=8)
    bar.ax.tick_params(labelsize=8)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"wave {first + i + 1}" for i in range(len(shown))], fontsize=8)
    ax.set_xlabel(f"SM (0..{w.sms - 1}); colour = blocks resident on it (scale on the right), grey = idle")
    hidden = f" (waves 1-{first}, all full, not drawn)" if first else ""
    ax.set_title(
        f"{w.blocks} blocks, {w.resident} per SM -> {plural(w.waves, 'wave')}{hidden}; "
        f"last wave {w.tail_utilisation:.0%} full, {plural(w.idle_sms_in_tail, 'SM')} idle",
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def waves_widget(size: int = 4096, tile: int = 128, threads: int = 256, regs: int = 64, smem_kb: int = 32):
    """Sliders for the matrix size, tile, threads/registers/shared memory per block; the occupancy
    and the waves on the H200 update. ``.occupancy`` and ``.waves`` hold what is on display;
    ``.controls`` the controls by name ('size', 'tile', 'threads', 'regs', 'smem_kb')."""
    import ipywidgets as widgets

    from course_lib.viz._figure import connect, figure_box, figure_png, image_widget, style_controls

    size_s = widgets.IntSlider(value=size, min=128, max=16384, step=128, description="matrix size N", continuous_update=False)
    tile_d = widgets.Dropdown(options=[16, 32, 64, 128, 256], value=tile, description="tile T x T")
    threads_d = widgets.Dropdown(options=[32, 64, 128, 256, 512, 1024], value=threads, description="threads / block")
    regs_s = widgets.IntSlider(value=regs, min=16, max=255, step=8, description="registers / thread", continuous_update=False)
    smem_s = widgets.IntSlider(value=smem_kb, min=0, max=227, description="shared KB / block", continuous_update=False)
    style_controls(size_s, tile_d, threads_d, regs_s, smem_s)
    summary = widgets.HTML()
    image = image_widget()
    rows = widgets.VBox([widgets.HBox([threads_d, regs_s]), smem_s])
    box = figure_box([widgets.HBox([size_s, tile_d]), rows, summary, image], "occupancy and waves on the H200")
    box.summary = summary

    def update(_=None) -> None:
        try:
            occ = resident_blocks(threads_d.value, regs_s.value, smem_s.value * 1024)
            w = gemm_waves(size_s.value, size_s.value, tile_d.value, tile_d.value, occ)
        except ValueError as e:
            summary.value = f"<b style='color:#b00'>{e}</b>"
            return
        box.occupancy, box.waves = occ, w
        summary.value = f"{occ.describe()}<br>{w.describe()}"
        image.value = figure_png(draw_waves(w))

    return connect(box, image, {"size": size_s, "tile": tile_d, "threads": threads_d, "regs": regs_s, "smem_kb": smem_s}, update)
