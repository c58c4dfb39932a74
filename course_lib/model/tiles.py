"""Tiles and reuse: what a block of a T x T tiled GEMM loads at each step, and what tiling saves.

    from course_lib.model.tiles import reuse_counts, tile_step
    tile_step(n=64, tile=16, block=(1, 2), step=0)   # A tile (1, 0) and B tile (0, 2): rows/cols named
    reuse_counts(n=4096, tile=32).describe()         # naive 2*N^3 global reads vs tiled 2*N^3/T

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

:func:`tile_hierarchy` gives the three levels of a register-tiled block (notebook 03): block tile,
warp tiles, thread tiles. :mod:`course_lib.viz.tiles` and :mod:`course_lib.viz.hierarchy` draw them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from course_lib.model.hardware import WARP_SIZE
from course_lib.model.layout import cdiv


def tile_steps(n: int, tile: int) -> int:
    """Steps of a T x T tiled GEMM over N x N: ceil(N / T) tiles of K."""
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
        return tile_steps(self.n, self.tile)

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
    steps = tile_steps(n, tile)
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
    return [tile_step(n, tile, block, t) for t in range(tile_steps(n, tile))]


def global_read_map(n: int, tile: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """How many times each element of A and of B is read from global memory, counted by walking the
    kernel's schedule (``tile=None``: the naive kernel). Returns (counts_a, counts_b), each N x N."""
    if tile is None:
        # naive: thread (i, j) reads row i of A and column j of B, so A[i, k] is read by the N
        # threads of row i and B[k, j] by the N threads of column j.
        return np.full((n, n), n, dtype=np.int64), np.full((n, n), n, dtype=np.int64)
    counts_a = np.zeros((n, n), dtype=np.int64)
    counts_b = np.zeros((n, n), dtype=np.int64)
    steps = tile_steps(n, tile)
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
    tile_steps(n, tile)
    return ReuseCounts(n, tile)


def tile_hierarchy(cfg: Any) -> dict[str, Any]:
    """The three levels of a register-tiled block - its tile, its warps' tiles, its threads' tiles - for
    a :class:`course_lib.kernels.thread_coarsening.RegisterTileConfig` (or anything with BM, BN, TM,
    TN, lanes_n, threads and warp_tile); :func:`course_lib.viz.hierarchy.draw_tile_hierarchy` draws them."""
    wm, wn = cfg.warp_tile
    return {
        "block": (cfg.BM, cfg.BN),
        "warp": (wm, wn),
        "thread": (cfg.TM, cfg.TN),
        "warps": (cfg.BM // wm, cfg.BN // wn),
        "lanes": (WARP_SIZE // cfg.lanes_n, cfg.lanes_n),
        "threads": cfg.threads,
    }
