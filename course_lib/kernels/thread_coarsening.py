"""Stage 03, thread coarsening and register tiling (notebook ``03_thread_coarsening``).

In the tiled kernel every multiply-add reads two operands from shared memory, so shared memory,
not arithmetic, sets the pace. Giving each thread more outputs lets it reuse operands from its
registers: a thread that computes TM x TN outputs loads TM values of A and TN values of B per step
of k and does TM * TN multiply-adds with them.

Two kernels:

* ``coarsened_2x2``: the German article's idea written correctly (its printed version's bugs are
  listed in notebooks/deep_dives/source_articles.ipynb). A block of (TILE/2) x (TILE/2) threads computes a TILE x TILE tile of C,
  each thread the 2 x 2 outputs (ty + i*TILE/2, tx + j*TILE/2), copying four elements of each tile.
* ``register_tiling``: the general form. A block of (BM/TM) * (BN/TN) threads computes a BM x BN
  tile of C, walking K in BK-deep slabs staged in shared memory; each thread keeps TM x TN
  accumulators in registers.

Python has no templates and no ``#pragma unroll``, and a ``cuda.local.array`` indexed inside loops
may be kept in local memory (off-chip, cached) rather than registers (with numba-cuda 0.30 and NVVM
13.0 it is not: the ``register_tiling_local_arrays`` variant compiles to the same SASS counts). So the register-tiled kernel
is *generated*: :func:`register_tiling_source` writes its source with TM * TN scalar accumulators
and the TM * TN multiply-adds of one step of k written out (the loop over the BK steps stays a
loop), and numba compiles that. The notebook shows the generated text.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch
from numba import cuda, float32, uint32

from course_lib.gemm import new_output, prepare
from course_lib.kernels._numba_support import cdiv, check_launch, kernel_array
from course_lib.model.hardware import WARP_SIZE, itemsize

# ---- the article's 2 x 2 idea, written correctly -------------------------------------------------
COARSE_TILE = 32  # the block's tile of C is COARSE_TILE x COARSE_TILE
COARSE = 2  # each thread computes COARSE x COARSE outputs
COARSE_THREADS = COARSE_TILE // COARSE  # threads per block along x and along y


@cuda.jit(fastmath=True)
def coarsened_2x2_kernel(a, b, c):
    a_tile = cuda.shared.array((COARSE_TILE, COARSE_TILE), float32)
    b_tile = cuda.shared.array((COARSE_TILE, COARSE_TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row0 = cuda.blockIdx.y * COARSE_TILE
    col0 = cuda.blockIdx.x * COARSE_TILE
    M, K = a.shape
    N = b.shape[1]
    acc00 = float32(0.0)
    acc01 = float32(0.0)
    acc10 = float32(0.0)
    acc11 = float32(0.0)
    for k0 in range(0, K, COARSE_TILE):
        # ---- each thread copies COARSE x COARSE elements of each tile (zero past the edges)
        for i in range(COARSE):
            for j in range(COARSE):
                r = ty + i * COARSE_THREADS
                cc = tx + j * COARSE_THREADS
                if row0 + r < M and k0 + cc < K:
                    a_tile[r, cc] = a[row0 + r, k0 + cc]
                else:
                    a_tile[r, cc] = float32(0.0)
                if k0 + r < K and col0 + cc < N:
                    b_tile[r, cc] = b[k0 + r, col0 + cc]
                else:
                    b_tile[r, cc] = float32(0.0)
        cuda.syncthreads()
        # ---- two values of A and two of B feed four multiply-adds
        for k in range(COARSE_TILE):
            a0 = a_tile[ty, k]
            a1 = a_tile[ty + COARSE_THREADS, k]
            b0 = b_tile[k, tx]
            b1 = b_tile[k, tx + COARSE_THREADS]
            acc00 += a0 * b0
            acc01 += a0 * b1
            acc10 += a1 * b0
            acc11 += a1 * b1
        cuda.syncthreads()
    r0 = row0 + ty
    r1 = r0 + COARSE_THREADS
    c0 = col0 + tx
    c1 = c0 + COARSE_THREADS
    if r0 < M and c0 < N:
        c[r0, c0] = acc00
    if r0 < M and c1 < N:
        c[r0, c1] = acc01
    if r1 < M and c0 < N:
        c[r1, c0] = acc10
    if r1 < M and c1 < N:
        c[r1, c1] = acc11


def launch_2x2(kernel, a, b, *, stage: str = "your kernel"):
    """Run a 2 x 2-per-thread kernel ``kernel(a, b, c)`` as ``fn(a, b) -> c``: blocks of 16 x 16
    threads, one per 32 x 32 tile of C."""
    ops = prepare(a, b, stage=stage, dtypes=("fp32",))
    block = (COARSE_THREADS, COARSE_THREADS)
    check_launch(stage, block, shared_bytes=2 * COARSE_TILE * COARSE_TILE * itemsize("fp32"))
    c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
    grid = (cdiv(ops.N, COARSE_TILE), cdiv(ops.M, COARSE_TILE))
    kernel[grid, block](kernel_array(ops.a), kernel_array(ops.b), kernel_array(c))
    return ops.give_back(c)


def coarsened_2x2(a, b):
    """C = A @ B; each thread computes 2 x 2 outputs of a 32 x 32 tile (the article's idea, fixed)."""
    return launch_2x2(coarsened_2x2_kernel, a, b, stage="coarsened_2x2")


# ---- register tiling, generated ---------------------------------------------------------------
@dataclass(frozen=True)
class RegisterTileConfig:
    """Block tile BM x BN, K-slab BK, per-thread tile TM x TN, and how threads are arranged.

    ``lanes_n``: the 32 lanes of a warp form a (32 // lanes_n) x lanes_n grid of threads, so a warp
    computes a (32 // lanes_n * TM) x (lanes_n * TN) "warp tile" of C; the warps tile the block.
    ``prefetch``: load the next slab from global memory into registers while computing this one.
    ``scalar_accumulators``: TM x TN named scalars (False: the natural ``cuda.local.array`` version,
    kept to show what it costs). ``unsigned_index``: thread offsets as uint32 (False: as int64, kept
    to show that signed indices cost the 128-bit shared loads).
    """

    BM: int = 128
    BN: int = 128
    BK: int = 8
    TM: int = 8
    TN: int = 8
    lanes_n: int = 4
    prefetch: bool = True
    scalar_accumulators: bool = True
    unsigned_index: bool = True

    @property
    def threads(self) -> int:
        return (self.BM // self.TM) * (self.BN // self.TN)

    @property
    def warp_tile(self) -> tuple[int, int]:
        return (WARP_SIZE // self.lanes_n * self.TM, self.lanes_n * self.TN)

    @property
    def warps_n(self) -> int:
        return self.BN // self.warp_tile[1]

    @property
    def a_stride(self) -> int:
        # A's slab is stored transposed, a_slab[k, m], so a thread reads its TM values of A as
        # consecutive words. Rows are padded by 4 words: the transposing stores of one warp then
        # fall in 32 different banks, and rows stay 16-byte aligned for 128-bit shared loads.
        return self.BM + 4

    @property
    def shared_bytes(self) -> int:
        return (self.BK * self.a_stride + self.BK * self.BN) * itemsize("fp32")

    def validate(self, stage: str = "register_tiling") -> None:
        for name, whole, part in (("BM", self.BM, self.TM), ("BN", self.BN, self.TN)):
            if whole % part:
                raise ValueError(f"{stage}: {name}={whole} is not a multiple of the per-thread tile {part}")
        if self.threads % WARP_SIZE or WARP_SIZE % self.lanes_n:
            raise ValueError(f"{stage}: {self.threads} threads is not a whole number of warps, "
                             f"or lanes_n does not divide {WARP_SIZE}")
        wm, wn = self.warp_tile
        if self.BM % wm or self.BN % wn or (self.BM // wm) * (self.BN // wn) != self.threads // WARP_SIZE:
            raise ValueError(
                f"{stage}: warp tiles of {wm}x{wn} do not tile the {self.BM}x{self.BN} block with "
                f"{self.threads // WARP_SIZE} warps; change lanes_n"
            )
        for name, n in (("A", self.BM * self.BK), ("B", self.BK * self.BN)):
            if n % self.threads:
                raise ValueError(
                    f"{stage}: the {name} slab has {n} elements, not a multiple of the {self.threads} "
                    "threads that copy it; change BK or the tile sizes"
                )
        check_launch(stage, (self.threads,), self.shared_bytes)


def register_tiling_source(cfg: RegisterTileConfig) -> str:
    """Source of the register-tiled kernel for ``cfg``: scalar accumulators, one step of k written out."""
    BM, BN, BK, TM, TN = cfg.BM, cfg.BN, cfg.BK, cfg.TM, cfg.TN
    threads = cfg.threads
    wm, wn = cfg.warp_tile
    na, nb = BM * BK // threads, BK * BN // threads  # elements of each slab one thread copies
    L: list[str] = []
    w = L.append

    def load_slab(indent: str, checked: bool, into_registers: bool, k0: str) -> None:
        """Code that copies the slab at ``k0`` of A and of B; into registers or into shared memory."""
        for i in range(na):
            r, k = f"row0 + tid // {BK} + {i * threads // BK}", f"{k0} + tid % {BK}"
            value = f"a[{r}, {k}]" if not checked else f"a[{r}, {k}] if {r} < M and {k} < K else float32(0.0)"
            target = f"pa_{i}" if into_registers else f"a_slab[tid % {BK}, tid // {BK} + {i * threads // BK}]"
            w(f"{indent}{target} = {value}")
        for i in range(nb):
            k, cc = f"{k0} + tid // {BN} + {i * threads // BN}", f"col0 + tid % {BN}"
            value = f"b[{k}, {cc}]" if not checked else f"b[{k}, {cc}] if {k} < K and {cc} < N else float32(0.0)"
            target = f"pb_{i}" if into_registers else f"b_slab[tid // {BN} + {i * threads // BN}, tid % {BN}]"
            w(f"{indent}{target} = {value}")

    def load_either(indent: str, into_registers: bool, k0: str) -> None:
        w(f"{indent}if interior and {k0} + {BK} <= K:  # the common case: no bounds checks")
        load_slab(indent + "    ", False, into_registers, k0)
        w(f"{indent}else:  # an edge: zero past the edges")
        load_slab(indent + "    ", True, into_registers, k0)

    w("def register_tiling_kernel(a, b, c):")
    w(f"    a_slab = cuda.shared.array(({BK}, {cfg.a_stride}), float32)  # A's slab, transposed: [k, m]")
    w(f"    b_slab = cuda.shared.array(({BK}, {BN}), float32)  # B's slab: [k, n]")
    w("    tid = cuda.threadIdx.x")
    w(f"    warp = tid // {WARP_SIZE}")
    w(f"    lane = tid % {WARP_SIZE}")
    w(f"    # this thread's {TM}x{TN} outputs: lane (lane // {cfg.lanes_n}, lane % {cfg.lanes_n}) of a "
      f"{wm}x{wn} warp tile")
    # uint32: numba treats signed indices as possibly negative (Python's a[-1]) and adds a check
    # that hides their alignment from LLVM; unsigned ones let it merge 4 loads into one 128-bit load.
    cast = "uint32" if cfg.unsigned_index else ""
    w(f"    trow = {cast}((warp // {cfg.warps_n}) * {wm} + (lane // {cfg.lanes_n}) * {TM})")
    w(f"    tcol = {cast}((warp % {cfg.warps_n}) * {wn} + (lane % {cfg.lanes_n}) * {TN})")
    w(f"    row0 = cuda.blockIdx.y * {BM}")
    w(f"    col0 = cuda.blockIdx.x * {BN}")
    w("    M, K = a.shape")
    w("    N = b.shape[1]")
    w(f"    interior = row0 + {BM} <= M and col0 + {BN} <= N  # no edge in this block's rows/columns")
    if cfg.scalar_accumulators:
        for i in range(TM):
            w("    " + " = ".join(f"acc_{i}_{j}" for j in range(TN)) + " = float32(0.0)")
    else:
        w(f"    acc = cuda.local.array(({TM}, {TN}), float32)")
        w(f"    a_frag = cuda.local.array({TM}, float32)")
        w(f"    b_frag = cuda.local.array({TN}, float32)")
        w(f"    for i in range({TM}):")
        w(f"        for j in range({TN}):")
        w("            acc[i, j] = float32(0.0)")
    if cfg.prefetch:
        w("    # ---- the first slab into registers")
        load_either("    ", into_registers=True, k0="0")
    w(f"    for k0 in range(0, K, {BK}):")
    if cfg.prefetch:
        w("        # ---- registers -> shared memory; then fetch the next slab while computing this one")
        for i in range(na):
            w(f"        a_slab[tid % {BK}, tid // {BK} + {i * threads // BK}] = pa_{i}")
        for i in range(nb):
            w(f"        b_slab[tid // {BN} + {i * threads // BN}, tid % {BN}] = pb_{i}")
        w("        cuda.syncthreads()")
        w(f"        k_next = k0 + {BK}")
        w("        if k_next < K:")
        load_either("            ", into_registers=True, k0="k_next")
    else:
        w(f"        # ---- copy the slabs: {na} elements of A and {nb} of B per thread")
        load_either("        ", into_registers=False, k0="k0")
        w("        cuda.syncthreads()")
    w(f"        # ---- {BK} steps of k: {TM} + {TN} shared loads feed {TM * TN} multiply-adds each")
    w(f"        for k in range({BK}):")
    if cfg.scalar_accumulators:
        for i in range(TM):
            w(f"            a_{i} = a_slab[k, trow + {i}]")
        for j in range(TN):
            w(f"            b_{j} = b_slab[k, tcol + {j}]")
        for i in range(TM):
            for j in range(TN):
                w(f"            acc_{i}_{j} += a_{i} * b_{j}")
    else:
        w(f"            for i in range({TM}):")
        w("                a_frag[i] = a_slab[k, trow + i]")
        w(f"            for j in range({TN}):")
        w("                b_frag[j] = b_slab[k, tcol + j]")
        w(f"            for i in range({TM}):")
        w(f"                for j in range({TN}):")
        w("                    acc[i, j] += a_frag[i] * b_frag[j]")
    w("        cuda.syncthreads()  # all reads of the slabs are done before they are overwritten")
    w("    # ---- write the outputs that lie inside C")
    if not cfg.scalar_accumulators:
        w(f"    for i in range({TM}):")
        w("        r = row0 + trow + i")
        w(f"        for j in range({TN}):")
        w("            if r < M and col0 + tcol + j < N:")
        w("                c[r, col0 + tcol + j] = acc[i, j]")
        return "\n".join(L) + "\n"
    for i in range(TM):
        w(f"    r = row0 + trow + {i}")
        w("    if r < M:")
        for j in range(TN):
            w(f"        if col0 + tcol + {j} < N:")
            w(f"            c[r, col0 + tcol + {j}] = acc_{i}_{j}")
    return "\n".join(L) + "\n"


@lru_cache(maxsize=None)
def make_register_tiling_kernel(cfg: RegisterTileConfig):
    """Compile (lazily, once per config) the generated kernel for ``cfg``."""
    cfg.validate()
    namespace = {"cuda": cuda, "float32": float32, "uint32": uint32}
    source = register_tiling_source(cfg)
    exec(compile(source, f"<register_tiling {cfg}>", "exec"), namespace)  # noqa: S102 - our own generated code
    return cuda.jit(fastmath=True)(namespace["register_tiling_kernel"])


DEFAULT_CONFIG = RegisterTileConfig()


def register_tiling(a, b, *, config: RegisterTileConfig = DEFAULT_CONFIG):
    """C = A @ B; each thread computes TM x TN outputs of a BM x BN block tile."""
    stage = "register_tiling"
    config.validate(stage)
    ops = prepare(a, b, stage=stage, dtypes=("fp32",))
    c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
    grid = (cdiv(ops.N, config.BN), cdiv(ops.M, config.BM))
    make_register_tiling_kernel(config)[grid, (config.threads,)](kernel_array(ops.a), kernel_array(ops.b), kernel_array(c))
    return ops.give_back(c)


# The notebook's sweep: each variant changes one thing of DEFAULT_CONFIG (what each step buys), or
# the per-thread tile and block tile.
SWEEP_CONFIGS = {
    "register_tiling_local_arrays": replace(DEFAULT_CONFIG, scalar_accumulators=False),
    "register_tiling_signed_index": replace(DEFAULT_CONFIG, unsigned_index=False),
    "register_tiling_no_prefetch": replace(DEFAULT_CONFIG, prefetch=False),
    "register_tiling_row_warps": replace(DEFAULT_CONFIG, lanes_n=16),
    "register_tiling_bk16": replace(DEFAULT_CONFIG, BK=16),
    "register_tiling_4x4_64": RegisterTileConfig(BM=64, BN=64, TM=4, TN=4),
    "register_tiling_8x8_64": RegisterTileConfig(BM=64, BN=64, TM=8, TN=8),
    "register_tiling_4x4_128": RegisterTileConfig(BM=128, BN=128, TM=4, TN=4),
    "register_tiling_8x4_128": RegisterTileConfig(BM=128, BN=128, TM=8, TN=4),
}


def variant_title(cfg: RegisterTileConfig) -> str:
    """Tile shape plus whatever differs from DEFAULT_CONFIG in the code it generates, so that no two
    variants share a title (charts label bars by title)."""
    what = []
    if not cfg.scalar_accumulators:
        what.append("local-array accumulators")
    if not cfg.unsigned_index:
        what.append("signed indices")
    if not cfg.prefetch:
        what.append("no prefetch")
    if cfg.lanes_n != DEFAULT_CONFIG.lanes_n:
        what.append(f"{cfg.lanes_n} lanes along N")
    extra = f" ({', '.join(what)})" if what else ""
    return f"03 register tiling {cfg.TM}x{cfg.TN}/thread, {cfg.BM}x{cfg.BN}/block, BK={cfg.BK}{extra}"
