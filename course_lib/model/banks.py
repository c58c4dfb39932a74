"""Shared-memory banks: which bank each lane of a warp hits, the conflict degree, and two fixes.

    from course_lib.model.banks import bank_access, tile_access
    tile_access(32, 32, "column").conflict_degree                     # -> 32 (32-way conflict)
    tile_access(32, 32, "column", layout="padded").conflict_degree    # -> 1 (row pitch 33)
    tile_access(32, 32, "column", layout="swizzled").conflict_degree  # -> 1 (column ^ row)
    bank_access(byte_addresses)       # any pattern, e.g. a shared-memory access from the trace

Shared memory is split into 32 banks, each 4 bytes wide: the 4-byte word at byte address a lives in
bank (a // 4) % 32. In one access, each bank delivers one word; lanes that want *different* words
of the same bank are served one after another (a k-way conflict costs k passes), while lanes that
want the *same* word share it (broadcast, no conflict). A 32 x 32 fp32 tile stored row after row
puts a whole column in one bank (row pitch 128 bytes = 32 banks exactly), so 32 lanes reading a
column conflict 32-way. Two standard fixes: pad each row by one element (pitch 33 words: row r of
a column lands in bank (r + c) % 32, all different), or store element (r, c) at column c XOR r
(a permutation within each row, no wasted memory: the fix Hopper's TMA and wgmma use in hardware,
as 32/64/128-byte "swizzle" modes). :mod:`course_lib.viz.banks` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.model.hardware import BANK_BYTES, N_BANKS, WARP_SIZE
from course_lib.model.layout import cdiv
from course_lib.model.text import plural

LAYOUTS = ("plain", "padded", "swizzled")


@dataclass(frozen=True)
class BankAccess:
    """One warp's shared-memory access: byte address per active lane and the banks it hits."""

    byte_addresses: np.ndarray
    itemsize: int
    lanes: np.ndarray

    @property
    def words(self) -> list[np.ndarray]:
        """The 4-byte words each lane touches (one for 1/2/4-byte elements, more for wider ones)."""
        return [np.arange(a // BANK_BYTES, (a + self.itemsize - 1) // BANK_BYTES + 1) for a in self.byte_addresses]

    @property
    def banks(self) -> np.ndarray:
        """Bank of each lane's first word."""
        return (self.byte_addresses // BANK_BYTES) % N_BANKS

    @property
    def words_per_bank(self) -> np.ndarray:
        """(32,) distinct words requested from each bank (same word twice = broadcast = once)."""
        distinct = np.unique(np.concatenate(self.words)) if len(self.byte_addresses) else np.zeros(0, dtype=np.int64)
        return np.bincount(distinct % N_BANKS, minlength=N_BANKS)

    @property
    def conflict_degree(self) -> int:
        """The most distinct words any one bank must deliver: 1 = conflict-free, 32 = fully serialised."""
        return int(self.words_per_bank.max()) if len(self.byte_addresses) else 0

    @property
    def wavefronts(self) -> int:
        """Passes the access needs: the conflict degree, but at least one per 128 bytes requested."""
        distinct_words = int(self.words_per_bank.sum())
        return max(self.conflict_degree, cdiv(distinct_words, N_BANKS))

    def describe(self) -> str:
        d, passes = self.conflict_degree, self.wavefronts
        least = max(1, cdiv(int(self.words_per_bank.sum()), N_BANKS))  # one pass per 128 bytes requested
        busiest = int(np.argmax(self.words_per_bank))
        if passes <= least:
            kind = "conflict-free" + (f": {least} passes, the fewest for {BANK_BYTES * int(self.words_per_bank.sum())} bytes"
                                      if least > 1 else ", 1 pass")
            return f"{plural(len(self.lanes), 'lane')}: {kind}"
        words = "word" if d == 1 else "words"
        return (f"{plural(len(self.lanes), 'lane')}: {d}-way bank conflict (bank {busiest} serves {d} distinct {words}); "
                f"{passes} passes" + (f" where {least} would do" if least > 1 else ""))


def bank_access(byte_addresses, itemsize: int = 4, lanes=None) -> BankAccess:
    """A warp's shared-memory access from the byte address of each lane (offsets into shared memory)."""
    addr = np.asarray(byte_addresses, dtype=np.int64).ravel()
    if len(addr) > WARP_SIZE:
        raise ValueError(f"a warp has {WARP_SIZE} lanes, got {len(addr)} addresses")
    lanes = np.arange(len(addr)) if lanes is None else np.asarray(lanes, dtype=np.int64).ravel()
    if len(lanes) != len(addr):
        raise ValueError("one lane id per address")
    return BankAccess(addr, itemsize, lanes)


def element_offset(r, c, cols: int, layout: str = "plain", itemsize: int = 4):
    """Element index in shared memory of logical element (r, c) of a tile with ``cols`` columns.

    'plain': row-major, pitch ``cols``; 'padded': pitch ``cols + 1``; 'swizzled': pitch ``cols``
    with the column XOR-ed by the row (modulo the number of elements in one 128-byte bank row), so
    each row is a permutation of itself.
    """
    r, c = np.asarray(r), np.asarray(c)
    if layout == "plain":
        return r * cols + c
    if layout == "padded":
        return r * (cols + 1) + c
    if layout == "swizzled":
        period = N_BANKS * BANK_BYTES // itemsize  # elements in one pass over all 32 banks
        if cols % period:
            raise ValueError(f"the XOR swizzle here needs a multiple of {period} columns, got {cols}")
        return r * cols + (c ^ (r % period))
    raise ValueError(f"layout is one of {LAYOUTS}")


def tile_access(rows: int, cols: int, pattern: str = "column", layout: str = "plain", index: int = 0, itemsize: int = 4) -> BankAccess:
    """One warp reading a rows x cols tile: 'row' = lane l reads element (index, l) (wrapping to the
    next rows if the tile is narrower than 32), 'column' = lane l reads (l, index) (wrapping to the
    next columns if the tile has fewer than 32 rows)."""
    lane = np.arange(WARP_SIZE)
    if pattern == "row":
        r, c = index + lane // cols, lane % cols
    elif pattern == "column":
        r, c = lane % rows, index + lane // rows
    else:
        raise ValueError("pattern is 'row' or 'column'")
    if (r >= rows).any() or (c >= cols).any() or index < 0:
        raise ValueError(f"a warp reading {pattern} {index} leaves the {rows} x {cols} tile")
    return bank_access(element_offset(r, c, cols, layout, itemsize) * itemsize, itemsize)
