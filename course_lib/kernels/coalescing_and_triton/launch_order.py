"""The order in which programs compute the tiles of C, as plain data: the Python twin of the
kernels' grouped order (the reference solution of notebook 05's puzzle), what the programs in flight
read, a picture."""

from __future__ import annotations

from typing import Callable

import numpy as np


def grouped_order(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """Python twin of :func:`grouped_tile`: (pid_m, pid_n) of program ``pid``."""
    tiles_per_band = group_m * num_pid_n
    band = pid // tiles_per_band
    first_m = band * group_m
    band_rows = min(num_pid_m - first_m, group_m)
    return first_m + (pid % tiles_per_band) % band_rows, (pid % tiles_per_band) // band_rows


def row_major_order(pid: int, num_pid_m: int, num_pid_n: int, group_m: int = 1) -> tuple[int, int]:
    """The naive order: programs sweep C's tile rows one after another."""
    return pid // num_pid_n, pid % num_pid_n


def launch_order_grid(order: Callable, num_pid_m: int, num_pid_n: int, group_m: int = 1) -> np.ndarray:
    """num_pid_m x num_pid_n array: the program id that computes each tile of C under ``order``."""
    grid = np.full((num_pid_m, num_pid_n), -1, dtype=np.int64)
    for pid in range(num_pid_m * num_pid_n):
        pm, pn = order(pid, num_pid_m, num_pid_n, group_m)
        grid[pm, pn] = pid
    return grid


def blocks_loaded(order: Callable, num_pid_m: int, num_pid_n: int, group_m: int, programs: int) -> dict[str, int]:
    """Distinct block-rows of A and block-columns of B that the first ``programs`` programs read
    (the programs in flight together): fewer means more reuse from L2."""
    tiles = [order(p, num_pid_m, num_pid_n, group_m) for p in range(min(programs, num_pid_m * num_pid_n))]
    a_rows = len({pm for pm, _ in tiles})
    b_cols = len({pn for _, pn in tiles})
    return {"programs": len(tiles), "A block-rows": a_rows, "B block-columns": b_cols,
            "A + B": a_rows + b_cols}


def draw_launch_order(num_pid_m: int, num_pid_n: int, group_m: int, programs: int):
    """Two panels, row-major and grouped order: each tile of C labelled with the program that computes
    it; the first ``programs`` programs (those in flight together) shaded, with the block-rows of A
    and block-columns of B they read marked on the edges. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9.5, 0.55 * num_pid_m + 1.6))
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
        ax.scatter([], [], marker="s", color=plt.get_cmap("Blues")(0.6), label=f"tile of programs 0-{programs - 1}")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("tile column (pid_n)", fontsize=8)
        ax.set_ylabel("tile row (pid_m)", fontsize=8)
        ax.set_title(f"{name}\nthe first {programs} programs read {len(rows_read)} block-rows of A "
                     f"+ {len(cols_read)} block-columns of B", fontsize=8)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=2, fontsize=7, frameon=False)
    fig.tight_layout()
    return fig
