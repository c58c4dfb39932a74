"""The orders and plans in which the course's kernels hand out their tiles: the grouped order of
Triton's tutorial and of the tensor-core stages' ``GroupedTiles``, row-major order against it and
what the programs in flight read (notebook 05), and stream-K's share of whole tiles and K slices
among the persistent stages' clusters (``WorkCursor`` in csrc/tc_stream_k.cuh).

The kernels' wrappers and models, their tests, the exercises and :mod:`course_lib.viz.launch_order`
read them here. When stage 6 takes stream-K, and its fix-up protocol, read stage 6's own constants
and stay with it (:mod:`course_lib.kernels.tensor_cores.model`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np


# ---- the grouped order of tiles --------------------------------------------------------------------
# The order Triton's matmul tutorial calls grouped: tiles numbered column by column inside bands of
# group_m tile rows, the last band maybe shorter. Triton's grouped_tile (notebook 05), the tensor-core
# stages' GroupedTiles::locate (csrc/tc_schedule.cuh, over clusters of tile rows) and notebook 05's
# puzzle solution are this function; its text is what notebook 05 reveals.
def grouped_order(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """Python twin of :func:`grouped_tile`: (pid_m, pid_n) of program ``pid``."""
    tiles_per_band = group_m * num_pid_n
    band = pid // tiles_per_band
    first_m = band * group_m
    band_rows = min(num_pid_m - first_m, group_m)
    return first_m + (pid % tiles_per_band) % band_rows, (pid % tiles_per_band) // band_rows


# ---- row-major order against it, and what the programs in flight read (notebook 05) ---------------
def row_major_order(pid: int, num_pid_m: int, num_pid_n: int, group_m: int = 1) -> tuple[int, int]:
    """The naive order: programs sweep C's tile rows one after another (``group_m`` is ignored, so
    that every order takes the same arguments)."""
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


# ---- the persistent stages' schedules --------------------------------------------------------------
def grouped_tile_order(cluster_rows: int, cols: int, group_m: int) -> list[tuple[int, int]]:
    """The order in which the persistent stages hand out cluster tiles (GroupedTiles::locate in
    tc_schedule.cuh): the grouped order over rows of clusters."""
    return [grouped_order(t, cluster_rows, cols, group_m) for t in range(cluster_rows * cols)]


def stream_k_work(cluster_tiles: int, clusters: int, slices: int,
                  stream_k: bool = True) -> list[list[tuple[int, int, int]]]:
    """Each cluster's work units (tile, first K slice, end K slice), in order, as ``WorkCursor`` in
    tc_stream_k.cuh hands them out: whole waves of whole tiles round robin, then the rest shared out
    by slices."""
    dp_tiles = cluster_tiles - cluster_tiles % clusters if stream_k else cluster_tiles
    split = (cluster_tiles - dp_tiles) * slices
    out = []
    for c in range(clusters):
        units = [(t, 0, slices) for t in range(c, dp_tiles, clusters)]
        pos, end = split * c // clusters, split * (c + 1) // clusters
        while pos < end:
            k = pos % slices
            k_end = min(slices, k + end - pos)
            units.append((dp_tiles + pos // slices, k, k_end))
            pos += k_end - k
        out.append(units)
    return out


def stream_k_contributors(cluster_tiles: int, clusters: int, slices: int, owner: int, tile: int) -> list[int]:
    """The clusters whose partial sums the owner of split tile ``tile`` adds (the kernel's loop)."""
    dp_tiles = cluster_tiles - cluster_tiles % clusters
    split = (cluster_tiles - dp_tiles) * slices

    def start(c: int) -> int:
        return split * c // clusters

    tile_end = (tile - dp_tiles + 1) * slices
    out, c = [], owner + 1
    while c < clusters and start(c) < tile_end:
        if start(c + 1) > start(c):
            out.append(c)
        c += 1
    return out
