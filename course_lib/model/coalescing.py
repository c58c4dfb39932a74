"""Coalescing: the memory one warp's load touches, in 32-byte sectors and 128-byte lines.

    from course_lib.model.coalescing import matrix_load, warp_access
    matrix_load("row", n=4096).n_sectors       # -> 4: 32 consecutive fp32 = 128 bytes = 4 sectors
    matrix_load("column", n=4096).n_sectors    # -> 32: stride of N elements, one sector per lane
    warp_access(byte_addresses, itemsize=4)    # any pattern, e.g. from course_lib.instruments.trace

The 32 threads of a warp issue one load instruction together. The memory system serves it in
32-byte *sectors* (the unit moved between L2 and DRAM and into L1); sectors group into 128-byte
cache *lines*. A load costs as many sector transfers as distinct sectors its addresses fall in, so
32 threads reading 32 consecutive 4-byte floats cost 4 sectors (128 useful bytes of 128 moved),
while 32 threads reading down a column of a row-major N x N fp32 matrix (stride 4N bytes) cost 32
sectors and use 4 bytes of every 32 moved (12.5 %). Matrices are assumed to start 256-byte aligned,
as cudaMalloc and PyTorch's allocator give them. :mod:`course_lib.viz.coalescing` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.model.hardware import LINE_BYTES, SECTOR_BYTES, WARP_SIZE
from course_lib.model.layout import cdiv
from course_lib.model.text import plural


@dataclass(frozen=True)
class WarpAccess:
    """One warp-wide load or store: the byte address of each active lane and what it touches."""

    byte_addresses: np.ndarray  # (lanes,) start address of each active lane's element
    itemsize: int
    lanes: np.ndarray  # lane ids (0..31) of the active lanes, same order

    @property
    def sectors(self) -> np.ndarray:
        """Distinct 32-byte sector indices (address // 32) touched, sorted."""
        a = self.byte_addresses
        first, last = a // SECTOR_BYTES, (a + self.itemsize - 1) // SECTOR_BYTES
        spans = [np.arange(f, l + 1) for f, l in zip(first, last)]
        return np.unique(np.concatenate(spans)) if spans else np.zeros(0, dtype=np.int64)

    @property
    def lines(self) -> np.ndarray:
        """Distinct 128-byte line indices touched, sorted."""
        return np.unique(self.sectors // (LINE_BYTES // SECTOR_BYTES))

    @property
    def n_sectors(self) -> int:
        """Sector transfers the access costs (the transaction count)."""
        return len(self.sectors)

    @property
    def n_lines(self) -> int:
        return len(self.lines)

    @property
    def bytes_requested(self) -> int:
        """Distinct bytes the lanes asked for (lanes reading the same element count once)."""
        return len(np.unique(self.byte_addresses)) * self.itemsize

    @property
    def bytes_moved(self) -> int:
        return self.n_sectors * SECTOR_BYTES

    @property
    def efficiency(self) -> float:
        """Useful bytes / moved bytes (1.0 = perfectly coalesced)."""
        return self.bytes_requested / self.bytes_moved if self.bytes_moved else 1.0

    @property
    def ideal_sectors(self) -> int:
        """The fewest sectors that could hold the bytes requested."""
        return cdiv(self.bytes_requested, SECTOR_BYTES)

    def describe(self) -> str:
        return (
            f"{plural(len(self.lanes), 'lane')} x {self.itemsize} B: {plural(self.n_sectors, 'sector')} "
            f"(ideal {self.ideal_sectors}), {plural(self.n_lines, 'line')} of {LINE_BYTES} B, {self.bytes_moved} B moved "
            f"for {self.bytes_requested} B used = {self.efficiency:.1%}"
        )


def warp_access(byte_addresses, itemsize: int = 4, lanes=None) -> WarpAccess:
    """A warp access from the byte address each lane reads (lane i = i-th address unless ``lanes``)."""
    addr = np.asarray(byte_addresses, dtype=np.int64).ravel()
    if len(addr) > WARP_SIZE:
        raise ValueError(f"a warp has {WARP_SIZE} lanes, got {len(addr)} addresses")
    if itemsize not in (1, 2, 4, 8, 16):
        raise ValueError(f"itemsize is 1, 2, 4, 8 or 16 bytes, got {itemsize}")
    lanes = np.arange(len(addr)) if lanes is None else np.asarray(lanes, dtype=np.int64).ravel()
    if len(lanes) != len(addr):
        raise ValueError("one lane id per address")
    return WarpAccess(addr, itemsize, lanes)


def matrix_load(pattern: str, n: int, itemsize: int = 4, row: int = 0, col: int = 0, base: int = 0) -> WarpAccess:
    """Lane l of a warp reads element (row, col + l) ('row': along a row) or (row + l, col)
    ('column': down a column) of a row-major n x n matrix starting at byte ``base``."""
    lane = np.arange(WARP_SIZE)
    if pattern == "row":
        r, c = np.full(WARP_SIZE, row), col + lane
    elif pattern == "column":
        r, c = row + lane, np.full(WARP_SIZE, col)
    else:
        raise ValueError("pattern is 'row' or 'column'")
    if n < 1 or (r >= n).any() or (c >= n).any() or row < 0 or col < 0:
        raise ValueError(f"the warp's 32 elements from ({row}, {col}) going {pattern}-wise leave the {n} x {n} matrix")
    return warp_access(base + (r * n + c) * itemsize, itemsize)
