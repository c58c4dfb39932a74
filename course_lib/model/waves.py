"""How many blocks fit on one SM at a time, and how a grid of blocks runs on the H200 in waves.

    from course_lib.model.waves import gemm_waves, resident_blocks
    occ = resident_blocks(threads_per_block=256, regs_per_thread=64, smem_per_block=32 * 1024)
    occ.resident, occ.limiter          # -> 4, 'registers'
    w = gemm_waves(4096, 4096, tile_m=128, tile_n=128, occupancy=occ)
    w.waves, w.tail_utilisation        # -> 2, 0.939...  (1024 blocks, 528 per wave)
    gemm_waves(4096, 4096, 128, 128, occupancy=1).idle_sms_in_tail   # -> 32 (8 waves, last 76 % full)
    gemm_waves(1536, 1536, 128, 128)   # shown: Waves(blocks=144, sms=132, resident=1): 2 waves,
                                       #        last wave 12 blocks = 9% full

A block is resident on an SM only if the SM has room for *all* of it at once: its threads (as whole
warps), its registers and its shared memory, and the SM also caps the number of blocks. The scarcest
of the four decides how many blocks sit on one SM (:func:`resident_blocks`). The GPU then runs the
grid in *waves* of ``SMs x resident`` blocks; when the number of blocks is not a multiple of that,
the last wave is partly empty and SMs sit idle while it runs (:func:`waves`): "wave quantisation".
The limits are :class:`course_lib.model.hardware.SMLimits` (the H200's by default, with their
sources); :mod:`course_lib.viz.waves` draws the waves.

Simplifications, said here so nobody mistakes them for hardware facts: the shared-memory carve-out
is taken at its maximum (228 KB; the driver may choose a smaller one, which can only lower the
count), and the occupancy map (and its picture) assumes the block scheduler hands the blocks of the
last wave one per SM (real schedulers are not documented; the *count* of waves does not depend on
this).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.model.hardware import H200, WARP_SIZE, SMLimits
from course_lib.model.layout import cdiv
from course_lib.model.text import plural


# ---- waves -------------------------------------------------------------------------------------------
# A GPU runs ``slots`` tiles at once (SMs x resident blocks, or resident clusters); more tiles run in
# waves, and the last wave may be partly empty: "wave quantisation".
def wave_count(tiles: int, slots: int) -> int:
    """Waves needed for ``tiles`` tiles, ``slots`` at a time: a partly filled last wave still counts."""
    return cdiv(tiles, slots)


def whole_tile_efficiency(tiles: int, slots: int) -> float:
    """The share of the slots' time that ``tiles`` whole tiles keep busy: 1.0 when they fill every
    wave, ``tiles / slots`` when they fill less than one (1.0 for no tiles: nothing waits)."""
    waves = wave_count(tiles, slots)
    return tiles / (waves * slots) if waves else 1.0


def persistent_ctas(cluster_tiles: int, max_clusters: int, cluster: int) -> int:
    """CTAs of a persistent launch: as many clusters as fit, trimmed so that every cluster walks the
    same number of tiles, +-1 (the waves come out even; the launchers' rule in csrc/tc_schedule.cuh)."""
    return cdiv(cluster_tiles, wave_count(cluster_tiles, max_clusters)) * cluster


def _round_up(x: int, unit: int) -> int:
    return cdiv(x, unit) * unit


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of one kind fit on one SM, and which resource decides it."""

    threads_per_block: int
    regs_per_thread: int
    smem_per_block: int  # bytes the kernel asks for (static + dynamic)
    warps_per_block: int
    regs_per_block: int  # registers actually allocated (rounded per warp)
    smem_allocated: int  # bytes actually allocated per block (reserved + rounding)
    by_warps: int
    by_blocks: int
    by_registers: int
    by_shared: int
    gpu: SMLimits = H200

    @property
    def resident(self) -> int:
        """Blocks resident on one SM at the same time."""
        return min(self.by_warps, self.by_blocks, self.by_registers, self.by_shared)

    @property
    def limiter(self) -> str:
        """The resource (or resources, joined by ' and ') that sets :attr:`resident`."""
        names = {
            "threads/warps": self.by_warps,
            "blocks per SM": self.by_blocks,
            "registers": self.by_registers,
            "shared memory": self.by_shared,
        }
        return " and ".join(k for k, v in names.items() if v == self.resident)

    @property
    def resident_warps(self) -> int:
        return self.resident * self.warps_per_block

    @property
    def occupancy(self) -> float:
        """Resident warps as a fraction of the SM's 64 warp slots."""
        return self.resident_warps / self.gpu.max_warps_per_sm

    def describe(self) -> str:
        return (
            f"{self.threads_per_block} threads ({self.warps_per_block} warps), {self.regs_per_thread} "
            f"registers/thread, {self.smem_per_block / 1024:g} KB shared per block -> per SM: "
            f"{self.by_warps} by warps, {self.by_registers} by registers, {self.by_shared} by shared "
            f"memory, {self.by_blocks} by the block cap => {self.resident} resident "
            f"({self.resident_warps} warps, occupancy {self.occupancy:.0%}; limited by {self.limiter})"
        )


def resident_blocks(threads_per_block: int, regs_per_thread: int = 32, smem_per_block: int = 0, gpu: SMLimits = H200) -> Occupancy:
    """Blocks of this shape that one SM holds at once (the CUDA occupancy calculation, simplified).

    Raises ``ValueError`` for a block that cannot be launched at all (too many threads, registers
    or bytes of shared memory), with the limit named.
    """
    if not 1 <= threads_per_block <= gpu.max_threads_per_block:
        raise ValueError(f"a block has 1..{gpu.max_threads_per_block} threads, got {threads_per_block}")
    if not 1 <= regs_per_thread <= gpu.max_regs_per_thread:
        raise ValueError(f"a thread uses 1..{gpu.max_regs_per_thread} registers, got {regs_per_thread}")
    if not 0 <= smem_per_block <= gpu.max_smem_per_block:
        raise ValueError(
            f"a block may use at most {gpu.max_smem_per_block // 1024} KB of shared memory, "
            f"asked for {smem_per_block / 1024:g} KB"
        )
    warps = cdiv(threads_per_block, WARP_SIZE)
    by_warps = gpu.max_warps_per_sm // warps
    # Registers go to whole warps, rounded up to the allocation unit, and each of the SM's
    # sub-partitions holds a whole number of warps' registers.
    regs_per_warp = _round_up(regs_per_thread * WARP_SIZE, gpu.reg_alloc_unit)
    warps_per_subpartition = (gpu.regs_per_sm // gpu.reg_subpartitions) // regs_per_warp
    by_registers = (warps_per_subpartition * gpu.reg_subpartitions) // warps
    if regs_per_warp * _round_up(warps, gpu.reg_subpartitions) > gpu.regs_per_sm:
        raise ValueError(
            f"{threads_per_block} threads x {regs_per_thread} registers needs more than the "
            f"{gpu.regs_per_sm} registers one block may use: use fewer threads or registers"
        )
    smem_allocated = _round_up(smem_per_block + gpu.reserved_smem_per_block, gpu.smem_alloc_unit)
    by_shared = gpu.smem_per_sm // smem_allocated
    return Occupancy(
        threads_per_block, regs_per_thread, smem_per_block, warps,
        regs_per_block=regs_per_warp * warps, smem_allocated=smem_allocated,
        by_warps=by_warps, by_blocks=gpu.max_blocks_per_sm, by_registers=by_registers,
        by_shared=by_shared, gpu=gpu,
    )


@dataclass(frozen=True, repr=False)
class Waves:
    """A grid of ``blocks`` run on ``sms`` SMs holding ``resident`` blocks each. Shown (``repr``,
    what a notebook cell prints for it), it says its waves and how full the last one is."""

    blocks: int
    sms: int
    resident: int

    def __repr__(self) -> str:
        return (
            f"Waves(blocks={self.blocks}, sms={self.sms}, resident={self.resident}): {plural(self.waves, 'wave')}, "
            f"last wave {plural(self.tail_blocks, 'block')} = {self.tail_utilisation:.0%} full"
        )

    @property
    def slots(self) -> int:
        """Blocks running at once on the whole GPU (one wave)."""
        return self.sms * self.resident

    @property
    def waves(self) -> int:
        return wave_count(self.blocks, self.slots)

    @property
    def full_waves(self) -> int:
        return self.blocks // self.slots

    @property
    def tail_blocks(self) -> int:
        """Blocks in the last wave (a full wave's worth when the grid divides evenly)."""
        return self.blocks - (self.waves - 1) * self.slots

    @property
    def tail_utilisation(self) -> float:
        """Fraction of the block slots the last wave fills."""
        return self.tail_blocks / self.slots

    @property
    def idle_sms_in_tail(self) -> int:
        """SMs with no block at all during the last wave (blocks handed out one per SM first)."""
        return max(0, self.sms - self.tail_blocks)

    @property
    def efficiency(self) -> float:
        """Blocks run / slots offered over all waves: 1.0 means no slot ever sat empty."""
        return whole_tile_efficiency(self.blocks, self.slots)

    def occupancy_map(self) -> np.ndarray:
        """(waves, sms) array: blocks on each SM in each wave (the last wave spread one per SM first)."""
        grid = np.full((self.waves, self.sms), self.resident, dtype=int)
        tail = np.zeros(self.sms, dtype=int)
        for k in range(self.resident):  # fill the tail round-robin, one block per SM per pass
            take = min(self.sms, self.tail_blocks - k * self.sms)
            if take <= 0:
                break
            tail[:take] += 1
        grid[-1] = tail
        return grid

    def describe(self) -> str:
        return (
            f"{plural(self.blocks, 'block')} on {self.sms} SMs x {self.resident} resident = {self.slots} per wave: "
            f"{self.blocks / self.slots:.2f} waves -> {self.waves} "
            f"(last wave {plural(self.tail_blocks, 'block')} = {self.tail_utilisation:.0%} full, "
            f"{plural(self.idle_sms_in_tail, 'SM')} idle in it; overall {self.efficiency:.0%} of slots used)"
        )


def waves(blocks: int, resident: int | Occupancy, gpu: SMLimits = H200) -> Waves:
    """Waves for a grid of ``blocks`` blocks, with ``resident`` blocks per SM (a number or an Occupancy)."""
    if isinstance(resident, Occupancy):
        resident = resident.resident
    if blocks < 1:
        raise ValueError(f"a grid has at least one block, got {blocks}")
    if resident < 1:
        raise ValueError("no block fits on an SM (resident = 0)")
    return Waves(blocks, gpu.sms, resident)


def gemm_waves(m: int, n: int, tile_m: int = 128, tile_n: int = 128, occupancy: Occupancy | int = 1, gpu: SMLimits = H200) -> Waves:
    """Waves for a GEMM whose output of m x n is cut into tile_m x tile_n blocks (one block per tile)."""
    blocks = cdiv(m, tile_m) * cdiv(n, tile_n)
    return waves(blocks, occupancy, gpu)
