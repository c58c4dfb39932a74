"""The order in which programs compute the tiles of C, row-major against grouped, as one picture.

Notebook 05 calls::

    from course_lib.viz.launch_order import draw_launch_order
    draw_launch_order(6, 8, 3, programs=12)   # 6 x 8 tiles, GROUP_M = 3, the first 12 programs shaded

The orders themselves are plain data: the grouped order of the fast kernel, row-major order and the
grid of program ids come from :mod:`course_lib.model.schedules`; this module only draws them.
"""

from __future__ import annotations

import numpy as np

from course_lib.model.schedules import grouped_order, launch_order_grid, row_major_order


def draw_launch_order(num_pid_m: int, num_pid_n: int, group_m: int, programs: int):
    """Two panels, row-major and grouped order: each tile of C labelled with the program that computes
    it; the first ``programs`` programs (those in flight together) shaded, with the block-rows of A
    and block-columns of B they read marked on the edges. Returns the figure."""
    import matplotlib

    from course_lib.viz._figure import subplots

    fig, axes = subplots(1, 2, figsize=(9.5, 0.55 * num_pid_m + 1.6))
    for ax, (name, order, g) in zip(axes, (("row-major order", row_major_order, 1),
                                           (f"grouped order, GROUP_M = {group_m}", grouped_order, group_m))):
        grid = launch_order_grid(order, num_pid_m, num_pid_n, g)
        first = grid < programs
        ax.imshow(first, cmap="Blues", vmin=-0.3, vmax=1.6)
        for (r, c), pid in np.ndenumerate(grid):
            ax.text(c, r, str(pid), ha="center", va="center", fontsize=7)
        rows_read = np.flatnonzero(first.any(axis=1))
        cols_read = np.flatnonzero(first.any(axis=0))
        ax.scatter([-0.9] * len(rows_read), rows_read, marker=">", color="tab:red", clip_on=False,
                   label="block-row of A / block-column of B read")
        ax.scatter(cols_read, [-0.9] * len(cols_read), marker="v", color="tab:red", clip_on=False)
        ax.scatter([], [], marker="s", color=matplotlib.colormaps["Blues"](0.6), label=f"tile of programs 0-{programs - 1}")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("tile column (pid_n)", fontsize=8)
        ax.set_ylabel("tile row (pid_m)", fontsize=8)
        ax.set_title(f"{name}\nthe first {programs} programs read {len(rows_read)} block-rows of A "
                     f"+ {len(cols_read)} block-columns of B", fontsize=8)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=2, fontsize=7, frameon=False)
    fig.tight_layout()
    return fig
