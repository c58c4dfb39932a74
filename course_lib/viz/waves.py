"""How many blocks fit on one SM at a time, and how a grid of blocks runs on the H200 in waves.

Notebook 00 (and notebook 03 when it sweeps tile shapes) calls::

    from course_lib.viz.waves import gemm_waves, resident_blocks, waves_widget
    occ = resident_blocks(threads_per_block=256, regs_per_thread=64, smem_per_block=32 * 1024)
    occ.resident, occ.limiter          # -> 4, 'registers'
    w = gemm_waves(4096, 4096, tile_m=128, tile_n=128, occupancy=occ)
    w.waves, w.tail_utilisation        # -> 2, 0.939...  (1024 blocks, 528 per wave)
    gemm_waves(4096, 4096, 128, 128, occupancy=1).idle_sms_in_tail   # -> 32 (8 waves, last 76 % full)
    waves_widget()                     # sliders: matrix size, tile, threads, registers, shared memory

A block is resident on an SM only if the SM has room for *all* of it at once: its threads (as whole
warps), its registers and its shared memory, and the SM also caps the number of blocks. The scarcest
of the four decides how many blocks sit on one SM (:func:`resident_blocks`). The GPU then runs the
grid in *waves* of ``SMs x resident`` blocks; when the number of blocks is not a multiple of that,
the last wave is partly empty and SMs sit idle while it runs (:func:`waves`): "wave quantisation".

Where the limits come from (compute capability 9.0, the H200's):

* CUDA C++ Programming Guide, appendix "Compute Capabilities", table "Technical Specifications per
  Compute Capability": 2048 resident threads = 64 resident warps per SM, 32 resident blocks per SM,
  64 K 32-bit registers per SM, at most 255 registers per thread, 1024 threads per block, 228 KB of
  shared memory per SM of which one block may use at most 227 KB.
* The guide's shared-memory section for compute capabilities 8.x/9.0: the 1 KB of shared memory per
  SM that a block cannot use is reserved for system use, per block.
* The occupancy calculator shipped with the CUDA toolkit (``cuda_occupancy.h``; checked in a public
  copy that covers compute capability 9): blocks per SM 32 for major version 9; registers are
  allocated per warp in units of 256; shared memory per block in units of 128 bytes, after adding the
  driver's reserved bytes per block; registers are split over 4 sub-partitions of the SM, so the warp
  count the register file allows is computed per sub-partition; shared-memory carve-outs for 9.x go
  up to 228 KB.

How they were checked: the ``cuda_occupancy.h`` values above were read in the header's
code; of the guide's table only the opening of the page was retrievable, so 64 warps / 2048 threads
per SM and 227 KB per block were cross-checked in secondary sources (occupancy libraries that quote
the table: 2048 threads/SM for sm_90, 232448 bytes = 227 KB per block on the H100). On a GPU,
``cudaDevAttrMaxSharedMemoryPerBlockOptin`` and ``cudaDevAttrMaxBlocksPerMultiprocessor`` give the
same numbers directly.

Simplifications, said here so nobody mistakes them for hardware facts: the shared-memory carve-out
is taken at its maximum (228 KB; the driver may choose a smaller one, which can only lower the
count), and the picture assumes the block scheduler hands the blocks of the last wave one per SM
(real schedulers are not documented; the *count* of waves does not depend on this).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from course_lib.layout import WARP_SIZE, cdiv, wave_count, whole_tile_efficiency
from course_lib.viz._figure import plural


@dataclass(frozen=True)
class SMLimits:
    """Per-SM limits of one GPU (defaults: compute capability 9.0, NVIDIA H200)."""

    name: str = "NVIDIA H200 (compute capability 9.0)"
    sms: int = 132
    max_threads_per_sm: int = 2048
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256  # registers are given to a warp in multiples of this
    reg_subpartitions: int = 4  # the register file is split over 4 sub-partitions (warp schedulers)
    max_regs_per_thread: int = 255
    smem_per_sm: int = 228 * 1024
    max_smem_per_block: int = 227 * 1024
    reserved_smem_per_block: int = 1024
    smem_alloc_unit: int = 128


H200 = SMLimits()


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


@dataclass(frozen=True)
class Waves:
    """A grid of ``blocks`` run on ``sms`` SMs holding ``resident`` blocks each."""

    blocks: int
    sms: int
    resident: int

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


def draw_waves(w: Waves, ax=None, max_waves: int = 12):
    """Each row a wave, each column an SM; colour = blocks resident. Only the last ``max_waves``
    waves are drawn (the earlier ones are all full). Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap

    grid = w.occupancy_map()
    first = max(0, w.waves - max_waves)
    shown = grid[first:]
    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 0.3 * len(shown) + 1.6))
    else:
        fig = ax.figure
    # One colour per count of resident blocks (grey = none): the colour bar is the legend.
    colors = ["#eeeeee"] + list(plt.get_cmap("Blues")(np.linspace(0.35, 0.95, max(1, w.resident))))
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
