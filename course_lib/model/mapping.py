"""Which block, warp and thread computes each element of the output matrix.

:func:`thread_mapping` says, for a launch of ``grid`` blocks of ``block`` threads over an ``n_rows``
x ``n_cols`` output (threadIdx.x along columns, as in ``cuda.grid(2)`` with ``col, row =
cuda.grid(2)``), for every element which block, warp and thread owns it, and counts the threads that
fall past the edge and must be stopped by a bounds check. :mod:`course_lib.viz.mapping` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.model.hardware import H200, WARP_SIZE
from course_lib.model.layout import cdiv


@dataclass(frozen=True)
class Mapping:
    n_rows: int
    n_cols: int
    block: tuple[int, int]  # (threads along x = columns, threads along y = rows)
    grid: tuple[int, int]  # (blocks along x, blocks along y)
    block_id: np.ndarray  # (n_rows, n_cols): linear block index, blockIdx.y * grid_x + blockIdx.x
    warp_id: np.ndarray  # warp index inside the block
    thread_id: np.ndarray  # linear thread index inside the block, threadIdx.y * block_x + threadIdx.x

    @property
    def threads_launched(self) -> int:
        return self.grid[0] * self.grid[1] * self.block[0] * self.block[1]

    @property
    def idle_threads(self) -> int:
        """Threads whose (row, col) is outside the matrix: the bounds check must stop them."""
        return self.threads_launched - self.n_rows * self.n_cols

    @property
    def warps_per_block(self) -> int:
        return cdiv(self.block[0] * self.block[1], WARP_SIZE)

    def describe(self) -> str:
        bx, by = self.block
        gx, gy = self.grid
        return (
            f"{self.n_rows}x{self.n_cols} output, blocks of {bx}x{by} = {bx * by} threads "
            f"({self.warps_per_block} warps),\ngrid {gx}x{gy} = {gx * gy} blocks, "
            f"{self.threads_launched} threads launched, {self.idle_threads} idle past the edge"
        )


def blocks_needed(n: int, threads: int) -> int:
    """Blocks of ``threads`` needed to cover ``n`` elements: ceil(n / threads), e.g. (n + 15) // 16."""
    if n < 1 or threads < 1:
        raise ValueError(f"need n >= 1 and threads >= 1, got n={n}, threads={threads}")
    return cdiv(n, threads)


def thread_mapping(n_rows: int, n_cols: int, block: tuple[int, int] = (16, 16), grid: tuple[int, int] | None = None) -> Mapping:
    """The owner of every output element for a 2-D launch (grid computed to cover if not given)."""
    bx, by = block
    if bx < 1 or by < 1 or bx * by > H200.max_threads_per_block:
        raise ValueError(f"a block has 1..{H200.max_threads_per_block} threads, got {bx}x{by} = {bx * by}")
    if grid is None:
        grid = (blocks_needed(n_cols, bx), blocks_needed(n_rows, by))
    gx, gy = grid
    if gx * bx < n_cols or gy * by < n_rows:
        raise ValueError(
            f"grid {gx}x{gy} of {bx}x{by} blocks covers only {gy * by}x{gx * bx} elements, "
            f"less than {n_rows}x{n_cols}: use grid = ({blocks_needed(n_cols, bx)}, {blocks_needed(n_rows, by)})"
        )
    rows, cols = np.indices((n_rows, n_cols))
    tid = (rows % by) * bx + (cols % bx)
    return Mapping(
        n_rows, n_cols, (bx, by), (gx, gy),
        block_id=(rows // by) * gx + (cols // bx),
        warp_id=tid // WARP_SIZE,
        thread_id=tid,
    )
