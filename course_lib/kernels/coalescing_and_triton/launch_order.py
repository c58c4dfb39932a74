"""The order in which programs compute the tiles of C, as plain data: the kernels' grouped order
(:func:`course_lib.model.schedules.grouped_order`, importable from here: the reference solution of notebook
05's puzzle), row-major order, and what the programs in flight read. :mod:`course_lib.viz.launch_order` draws it."""

from __future__ import annotations

from typing import Callable

import numpy as np

from course_lib.model.schedules import grouped_order  # noqa: F401 - the grouped order, one home for every stage


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

