"""Stage ``triton_fast``: the tiled GEMM with what the GPU rewards.

* grouped launch order: programs that run at the same time share blocks of A and B in L2;
* tensor descriptors (TMA on Hopper) where the three matrices meet the alignment rules, masked
  pointer loads where they do not;
* large tiles and several K-slices in flight (``num_stages``) for the tensor cores;
* a persistent launch for the 16-bit types and TF32: one program per SM walks the tiles;
* for TF32, B^T: Hopper's TF32 tensor-core instruction reads both operands K-major.

One kernel per way of launching, each written out whole, top to bottom - descriptors, which tile,
the mainloop over K, the epilogue - as Triton's persistent-matmul tutorial writes separate kernels
rather than one kernel with switches: :func:`fast_matmul_kernel` (descriptors, one program per
tile), :func:`persistent_matmul_kernel` (the same tile in a loop, one program per SM),
:func:`split_k_matmul_kernel` (one program per tile and range of K) and
:func:`grouped_matmul_kernel` (pointers and masks, where a matrix breaks TMA's rules). The one
helper they share is :func:`grouped_tile`, the order in which programs take the tiles.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import triton
import triton.language as tl
from triton.compiler import CompiledKernel

from course_lib import backend
from course_lib import dtypes
from course_lib.gemm import Operands, new_output, prepare
from course_lib.kernels.coalescing_and_triton import common
from course_lib.kernels.coalescing_and_triton.tiled import matmul_tile_masked


@triton.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of the tile that program ``tile_id`` computes, in grouped order.

    Tiles are numbered column by column inside bands of GROUP_M tile rows: programs that run at
    the same time share a few block-rows of A and block-columns of B, which then stay in L2.
    """
    tiles_per_band = GROUP_M * num_pid_n
    band = tile_id // tiles_per_band
    first_m = band * GROUP_M
    band_rows = tl.minimum(num_pid_m - first_m, GROUP_M)  # the last band may be shorter
    pid_m = first_m + (tile_id % tiles_per_band) % band_rows
    pid_n = (tile_id % tiles_per_band) // band_rows
    return pid_m, pid_n


@triton.jit
def fast_matmul_kernel(
    # Pointers to matrices (with B_K_MAJOR, b_ptr holds B^T)
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides of A, of B as a K x N matrix (whichever way it is stored), of C
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    B_K_MAJOR: tl.constexpr, C_STORE_SPLIT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # ---- descriptors of A, B and C ---------------------------------------------------------------
    # On a GPU each is written to global memory obtained through triton.set_allocator. C is stored
    # in C_STORE_SPLIT boxes of BLOCK_N / C_STORE_SPLIT columns.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    if B_K_MAJOR:  # b_ptr holds B^T (N x K, row-major)
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // C_STORE_SPLIT])

    # ---- which tile: one program per tile, on a 1-D grid in grouped order ------------------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N

    # ---- mainloop: walk along K, accumulating in fp32 --------------------------------------------
    # Slices past K are read as zeros (the descriptor fills them).
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([row0, k0])
        if B_K_MAJOR:
            b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
        else:
            b = b_desc.load([k0, col0])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

    # ---- epilogue: round to C's type and store (the descriptor clips at C's edges) ---------------
    c = acc.to(c_ptr.dtype.element_ty)
    if C_STORE_SPLIT == 2:
        # Two BLOCK_M x BLOCK_N/2 stores: the staging buffer in shared memory is half the size,
        # which leaves room for one more pipeline stage with 128 x 256 tiles, or for one more
        # program per SM with fp32's 64 x 64 tiles.
        halves = tl.permute(tl.reshape(c, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([row0, col0], left)
        c_desc.store([row0, col0 + BLOCK_N // 2], right)
    else:
        c_desc.store([row0, col0], c)


@triton.jit
def persistent_matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    B_K_MAJOR: tl.constexpr, C_STORE_SPLIT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # fast_matmul_kernel's tile, inside a loop over tiles: one program per SM computes tiles
    # pid, pid + P, pid + 2P, ... of the grouped order (P programs).

    # ---- descriptors, made once per program ------------------------------------------------------
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    if B_K_MAJOR:  # b_ptr holds B^T (N x K, row-major)
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // C_STORE_SPLIT])

    # ---- the loop over this program's tiles ------------------------------------------------------
    # flatten=True makes the tile loop and the K loop one loop, so that the compiler can start
    # loading the next tile while the current one is being stored.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        row0 = pid_m * BLOCK_M
        col0 = pid_n * BLOCK_N

        # ---- mainloop ----------------------------------------------------------------------------
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([row0, k0])
            if B_K_MAJOR:
                b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
            else:
                b = b_desc.load([k0, col0])
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

        # ---- epilogue (C in halves: see fast_matmul_kernel) --------------------------------------
        c = acc.to(c_ptr.dtype.element_ty)
        if C_STORE_SPLIT == 2:
            halves = tl.permute(tl.reshape(c, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([row0, col0], left)
            c_desc.store([row0, col0 + BLOCK_N // 2], right)
        else:
            c_desc.store([row0, col0], c)


# ---- split-K: when C has too few tiles to give every SM one --------------------------------------
# A 768 x 2304 C (the weight gradient of a GPT-2 projection, K = 16384 tokens) is 54 tiles of
# 128 x 256: one program per tile leaves 78 of the H200's 132 SMs idle for the whole run. Split-K
# cuts K into SPLIT_K ranges and gives each (tile, range) its own program: SPLIT_K times as many
# programs, each with a SPLIT_K-th of the work. Each writes its fp32 partial sums to a workspace
# and counts itself done on the tile's counter; the last of a tile's programs to arrive adds the
# SPLIT_K partials, in the order of their ranges (the same sum whatever the arrival order), rounds
# once to C's type and stores the tile. One launch, no second kernel to wait for.
@triton.jit
def split_k_matmul_kernel(
    a_ptr, b_ptr, c_ptr, partial_ptr, counter_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    K_PER_SPLIT,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, B_K_MAJOR: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    # ---- descriptors of A and B (the last program of a tile stores C through pointers) -----------
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    if B_K_MAJOR:  # b_ptr holds B^T (N x K, row-major)
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])

    # ---- which tile and which range of K ---------------------------------------------------------
    # Program (tile, split) on a 2-D grid: axis 0 the tile in grouped order, axis 1 its range of K.
    tile = tl.program_id(0)
    pid_m, pid_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    split = tl.program_id(1)
    k_begin = split * K_PER_SPLIT  # K_PER_SPLIT is a multiple of BLOCK_K
    k_end = tl.minimum(k_begin + K_PER_SPLIT, K)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N

    # ---- mainloop over this program's range of K -------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_begin, k_end, BLOCK_K):
        a = a_desc.load([row0, k0])
        if B_K_MAJOR:
            b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
        else:
            b = b_desc.load([k0, col0])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)

    # ---- partial sums: split s writes plane s of the workspace, a (SPLIT_K, M, N) fp32 array -----
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    in_plane = rows[:, None] * N + cols[None, :]
    tl.store(partial_ptr + split.to(tl.int64) * M * N + in_plane, acc, mask=mask)

    # ---- count in; the last program of the tile adds the partials and stores C -------------------
    # Every thread's stores come before the count; the count is a release (our partials are visible
    # to whoever reads the count after us) and an acquire (we see the partials of all before us).
    tl.debug_barrier()
    arrived = tl.atomic_add(counter_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == SPLIT_K - 1:  # the last of this tile's programs
        total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):
            # .cg reads from L2: another SM wrote these, this SM's L1 may hold nothing newer.
            total += tl.load(partial_ptr + s * M * N + in_plane, mask=mask, other=0.0,
                             cache_modifier=".cg")
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
                 total.to(c_ptr.dtype.element_ty), mask=mask)
        tl.atomic_xchg(counter_ptr + tile, 0, sem="relaxed", scope="gpu")  # ready for the next one


@triton.jit
def grouped_matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    # Where a matrix breaks TMA's rules: notebook 04's tile (pointers and masks, any strides, any
    # alignment; its K loop is in matmul_tile_masked, shown there), one program per tile in grouped order.
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    matmul_tile_masked(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)


@dataclass(frozen=True)
class FastConfig:
    """One candidate configuration of the fast kernels and of their wrapper.

    ``b_layout``: "kn" reads B as given (K x N, row-major: its tiles are N-major); "nk" first copies
    B^T (N x K, row-major) with :func:`transpose` inside the call so that B's tiles are K-major, as
    Hopper's TF32 tensor-core instruction wants; the copy is part of every call and of its timing.
    ``loads``: "descriptors" uses TMA when all three matrices meet the alignment rules and falls back
    to pointers otherwise; "pointers" always uses pointers with masks.
    ``persistent``: one program per SM (on the CPU: :data:`CPU_PERSISTENT_PROGRAMS`).
    ``epilogue_split``: C stored in this many column halves (1 or 2; descriptors only).
    ``split_k``: K cut into this many ranges, one program per (tile, range); the last program of a
    tile adds the partial sums (descriptors only: with pointer loads the config runs unsplit).
    """

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3
    b_layout: str = "kn"
    loads: str = "descriptors"
    persistent: bool = False
    epilogue_split: int = 1
    split_k: int = 1

    def __post_init__(self) -> None:
        if self.b_layout not in ("kn", "nk"):
            raise ValueError(f"b_layout is 'kn' or 'nk', not {self.b_layout!r}")
        if self.loads not in ("descriptors", "pointers"):
            raise ValueError(f"loads is 'descriptors' or 'pointers', not {self.loads!r}")
        if self.epilogue_split not in (1, 2):
            raise ValueError(f"epilogue_split is 1 or 2, not {self.epilogue_split}")
        if self.split_k < 1:
            raise ValueError(f"split_k is a number of K ranges >= 1, not {self.split_k}")
        if self.split_k > 1 and self.persistent:
            raise ValueError("split_k > 1 launches one program per (tile, K range): it cannot also be persistent")
        for name in ("block_m", "block_n", "block_k"):
            v = getattr(self, name)
            if v < 16 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two >= 16 (tl.dot's minimum), not {v}")

    @property
    def label(self) -> str:
        extra = "".join([
            " B^T" if self.b_layout == "nk" else "",
            " ptr" if self.loads == "pointers" else "",
            " persistent" if self.persistent else "",
            " split2" if self.epilogue_split == 2 else "",
            f" splitK{self.split_k}" if self.split_k > 1 else "",
        ])
        return (f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{extra}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Candidates per course dtype, each measured on the H200 against cuBLAS (notebook 05 shows how they
# compare). The first is what the CPU backend runs (the interpreter cannot time anything); on a GPU
# every candidate is timed on the first call at each shape and the fastest kept.
# * fp16 / bf16: 128 x 256 tiles, 8 warps (two warpgroups of wgmma on 64 rows each), 3-4 K-slices
#   in flight, persistent; C stored in halves leaves shared memory for the deeper pipeline.
# * tf32: the same shape with K-slices of 32 (a 128-byte fp32 row, like 64 fp16), and B^T, so both
#   operands are K-major as Hopper's TF32 wgmma requires (CUTLASS lists Hopper TF32 tensor-op GEMMs
#   only for K-major A and B: media/docs/cpp/functionality.md).
# * fp32 (exact, CUDA cores): small 64 x 64 tiles through TMA, so that several programs share an SM
#   and keep its FMA units fed; C stored in halves fits a fifth program per SM. A pointer candidate
#   stays in the list for GPUs and Triton versions where descriptors compile poorly.
_SIXTEEN_BIT = (
    FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3, persistent=True, epilogue_split=2),
    FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3, persistent=True),
    FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=4, persistent=True, epilogue_split=2),
    FastConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=4, persistent=True),
)
FAST_CONFIGS: dict[str, tuple[FastConfig, ...]] = {
    "fp16": _SIXTEEN_BIT,
    "bf16": _SIXTEEN_BIT,
    "tf32": (
        FastConfig(128, 256, 32, group_m=16, num_warps=8, num_stages=3, b_layout="nk", persistent=True, epilogue_split=2),
        FastConfig(128, 256, 32, group_m=8, num_warps=8, num_stages=3, b_layout="nk", persistent=True, epilogue_split=2),
        FastConfig(128, 128, 32, group_m=8, num_warps=8, num_stages=4, b_layout="nk", persistent=True),
    ),
    "fp32": (
        FastConfig(64, 64, 64, group_m=16, num_warps=4, num_stages=2, epilogue_split=2),
        FastConfig(64, 64, 32, group_m=8, num_warps=4, num_stages=3, epilogue_split=2),
        FastConfig(128, 128, 32, group_m=8, num_warps=8, num_stages=3, loads="pointers"),
    ),
}

# What runs when no candidate above fits this GPU: every candidate asks for more shared memory than
# an RTX card or an L4 (99 KB per block) or a T4 (64 KB) has for some dtype, and Triton then refuses
# to launch (OutOfResources). These need 32 KB or less, whatever the GPU.
PORTABLE_CONFIGS: dict[str, FastConfig] = {
    "fp16": FastConfig(128, 128, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
    "bf16": FastConfig(128, 128, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
    "tf32": FastConfig(64, 64, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
    "fp32": FastConfig(64, 64, 32, group_m=8, num_warps=4, num_stages=2, loads="pointers"),
}

# The interpreter runs programs one after another; a few programs are enough to exercise the
# persistent loop (each program then walks several tiles).
CPU_PERSISTENT_PROGRAMS = 3


# ---- B^T for TF32: a transpose at memory speed ----------------------------------------------------
# torch's b.T.contiguous() reads B along columns or writes B^T along columns. The kernel below reads
# a tile along B's rows and writes it along B^T's rows - both coalesced; Triton turns the tile
# around in shared memory.
TRANSPOSE_BLOCK = (64, 64)
TRANSPOSE_WARPS = 4


def candidates(dtype: str) -> tuple[FastConfig, ...]:
    """The fast kernels' candidates for ``dtype`` (FAST_CONFIGS), or a ValueError saying where they go."""
    if dtype not in FAST_CONFIGS or dtype not in PORTABLE_CONFIGS:
        raise ValueError(f"triton_fast has no configurations for {dtype!r} (it has {', '.join(FAST_CONFIGS)}); "
                         "a new dtype needs its candidates in FAST_CONFIGS and PORTABLE_CONFIGS (fast.py)")
    return FAST_CONFIGS[dtype]


@triton.jit
def transpose_kernel(src_ptr, dst_ptr, R, C, stride_sr, stride_sc, stride_dr,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """dst (C x R, row-major) = src (R x C)^T, one BLOCK_R x BLOCK_C tile of src per program."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    tile = tl.load(src_ptr + rows[:, None] * stride_sr + cols[None, :] * stride_sc,
                   mask=(rows[:, None] < R) & (cols[None, :] < C))
    tl.store(dst_ptr + cols[:, None] * stride_dr + rows[None, :], tl.trans(tile),
             mask=(cols[:, None] < C) & (rows[None, :] < R))


def transpose(x: torch.Tensor, block: tuple[int, int] = TRANSPOSE_BLOCK, num_warps: int = TRANSPOSE_WARPS) -> torch.Tensor:
    """``x.T.contiguous()`` with :func:`transpose_kernel` (a 2-D tensor on the backend's device)."""
    if x.dim() != 2:
        raise ValueError(f"transpose takes a 2-D tensor, not {x.dim()}-D")
    want = backend.get().torch_device
    if x.device.type != torch.device(want).type:
        raise ValueError(f"transpose: the tensor is on {x.device}, the {backend.get().name} backend runs on "
                         f"{want}; pass x.to({want!r})")
    R, C = x.shape
    out = torch.empty((C, R), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    common.require_32bit_offsets("transpose", x, out)
    # Moving bits needs no arithmetic: 16-bit types travel as int16 (the interpreter has no bf16).
    src, dst = (x.view(torch.int16), out.view(torch.int16)) if x.element_size() == 2 else (x, out)
    grid = (triton.cdiv(R, block[0]), triton.cdiv(C, block[1]))
    transpose_kernel[grid](src, dst, R, C, src.stride(0), src.stride(1), dst.stride(0),
                           BLOCK_R=block[0], BLOCK_C=block[1], num_warps=num_warps)
    return out


def launch_fast(ops: Operands, dtype: str, cfg: FastConfig, c: torch.Tensor):
    """Launch the fast kernel ``cfg`` asks for into ``c``; returns (compiled, used descriptors)."""
    plan = FastPlan(ops, dtype, cfg, c)
    return plan.compiled, plan.descriptors


class FastPlan:
    """One configuration of the fast kernels on operands of one key (:func:`course_lib.gemm.plan_key`),
    made by launching it into ``c``; ``plan(a, b, c)`` launches it again on operands of that key.

    Decided once: B's layout, descriptors or pointers, the kernel and its grid, and every argument but
    A, B and C - sizes, strides, constexprs. Split-K's fp32 workspace and tile counters are not part of
    the plan: every launch takes its own (:func:`split_k_workspace`), so that two streams, or a CUDA
    graph and the stream it was captured on, never share them.

    The first launch goes through Triton's JIT, ``kernel[grid](*args, **meta)``, which binds the
    arguments, specialises, finds (or compiles) the kernel and launches it. On a GPU it returns the
    ``CompiledKernel``, and later launches call it directly: ``compiled[grid]`` gives a runner that
    takes every parameter of the kernel positionally in its signature's order, constexprs included
    (what ``JITFunction.run`` passes it, ``*bound_args.values()``, in Triton 3.6 and 3.7). That skips
    the JIT's keyword binding, specialisation and cache look-up, and is right while the
    specialisation would come out the same: it reads each integer argument (1, a multiple of 16) and
    each pointer's 16-byte alignment. The key holds A's and B's shapes, strides and alignment; C
    (:func:`course_lib.gemm.new_output`), B^T (the transpose kernel's output) and the workspace are
    new allocations, whose alignment is far more than 16 bytes (a test holds new_output to this).
    The interpreter (the CPU backend) returns no compiled kernel: there every launch is ``kernel[grid]``.
    """

    def __init__(self, ops: Operands, dtype: str, cfg: FastConfig, c: torch.Tensor) -> None:
        self.cfg, self.M, self.N, self.c_dtype = cfg, ops.M, ops.N, c.dtype
        self.widen = not backend.get().is_gpu  # the interpreter's bf16 (common.interpretable)
        # B^T (N x K, row-major) for "nk": no copy when B is already stored that way (b = w.T, as for the
        # weight of torch.nn.Linear), otherwise one pass of the transpose kernel on every call.
        self.copy_b = cfg.b_layout == "nk" and not ops.b.T.is_contiguous()
        b_arg = self.b_arg(ops.b)
        self.descriptors = cfg.loads == "descriptors" and all(
            common.descriptor_problem(t, n) is None for t, n in ((ops.a, "a"), (b_arg, "b"), (c, "c"))
        )
        a, b_view = self.kernel_operands(ops.a, b_arg)
        # The kernels always get B's strides as a K x N matrix: for B^T that is the view b_arg.T,
        # whose strides are (1, K) - pointer loads then run along K, descriptors use B^T's rows.
        args = (a, b_view, c, ops.M, ops.N, ops.K,
                a.stride(0), a.stride(1), b_view.stride(0), b_view.stride(1), c.stride(0), c.stride(1))
        meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                    INPUT_PRECISION=dtypes.get(dtype).triton_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        tiles = triton.cdiv(ops.M, cfg.block_m) * triton.cdiv(ops.N, cfg.block_n)
        if self.descriptors:
            common.ensure_allocator()
        if not self.descriptors:
            kernel, grid, rest = grouped_matmul_kernel, (tiles,), args[3:]
        elif cfg.split_k > 1:
            kernel, grid, rest, meta = launch_split_k(args, meta, cfg, c, tiles)
        else:
            meta.update(B_K_MAJOR=cfg.b_layout == "nk", C_STORE_SPLIT=cfg.epilogue_split)
            if cfg.persistent:
                programs = backend.sm_count() if backend.get().is_gpu else CPU_PERSISTENT_PROGRAMS
                kernel, grid = persistent_matmul_kernel, (min(tiles, programs),)
            else:
                kernel, grid = fast_matmul_kernel, (tiles,)
            rest = args[3:]
        self.kernel, self.grid, self.rest, self.meta = kernel, grid, rest, meta
        self.split_k = kernel is split_k_matmul_kernel  # rest starts with the workspace and the counters
        self.compiled = kernel[grid](*args[:3], *rest, **meta)
        self.runner = None
        if isinstance(self.compiled, CompiledKernel):  # a GPU
            self.runner = self.compiled[grid + (1,) * (3 - len(grid))]  # the runner reads three axes
            self.tail = rest + tuple(meta[name] for name in kernel.arg_names[3 + len(rest):])  # the constexprs

    def b_arg(self, b: torch.Tensor) -> torch.Tensor:
        """B as the kernel reads it: as given ("kn"), or B^T, N x K row-major ("nk")."""
        if self.cfg.b_layout == "kn":
            return b
        return transpose(b) if self.copy_b else b.T

    def kernel_operands(self, a: torch.Tensor, b_arg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A, and B as a K x N view, as the kernel takes them."""
        if self.widen:
            a, b_arg = common.interpretable(a), common.interpretable(b_arg)
        return a, (b_arg.T if self.cfg.b_layout == "nk" else b_arg)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
        """Launch again, into a new ``c``, on operands ``a`` and ``b`` of the plan's key."""
        a, b_view = self.kernel_operands(a, self.b_arg(b))
        rest, tail = self.rest, getattr(self, "tail", ())
        if self.split_k:  # this launch's own workspace and counters, in place of the first launch's
            ws = split_k_workspace(self.rest[0].shape, self.grid[0], c.device)
            rest, tail = ws + rest[2:], ws + tail[2:]
        if self.runner is not None:
            self.runner(a, b_view, c, *tail)
        else:
            self.kernel[self.grid](a, b_view, c, *rest, **self.meta)


def split_k_ranges(K: int, block_k: int, split_k: int) -> int:
    """Elements of K per split: whole BLOCK_K slices, shared out as evenly as they go (the last
    range may be shorter; none is empty)."""
    slices = triton.cdiv(K, block_k)
    per_split = triton.cdiv(slices, min(split_k, slices))
    return per_split * block_k


def split_k_workspace(shape: tuple[int, int, int], tiles: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """One split-K launch's fp32 partial sums (``shape``: splits x M x N) and its ``tiles`` counters.

    The partial sums are a new tensor per launch, from PyTorch's caching allocator: it hands a freed
    block out again only to work queued after it on the same stream, and inside a CUDA graph's capture
    it takes memory from the graph's own pool. The counters come from :func:`common.zeroed_counters`
    (zero when the launch starts; the last program of a tile leaves its counter zero again)."""
    partial = torch.empty(shape, dtype=torch.float32, device=device)
    return partial, common.zeroed_counters(tiles, device)


def launch_split_k(args: tuple, meta: dict, cfg: FastConfig, c: torch.Tensor, tiles: int):
    """How :func:`split_k_matmul_kernel` is launched into ``c`` (``args`` and ``meta``: what the other
    fast kernels get): the kernel, its grid, its arguments after C - a new fp32 workspace, the tile
    counters, sizes, strides, K_PER_SPLIT - and its meta-parameters."""
    M, N, K = args[3:6]
    k_per_split = split_k_ranges(K, cfg.block_k, cfg.split_k)
    splits = triton.cdiv(K, k_per_split)  # after rounding to whole slices, maybe fewer than asked
    partial, counters = split_k_workspace((splits, M, N), tiles, c.device)
    common.require_32bit_offsets("triton_fast (split-K workspace)", partial.view(splits * M, N))
    rest = (partial, counters, *args[3:], k_per_split)
    return split_k_matmul_kernel, (tiles, splits), rest, dict(meta, SPLIT_K=splits, B_K_MAJOR=cfg.b_layout == "nk")


def fast_matmul(a: object, b: object, dtype: str = "fp32", config: FastConfig | None = None) -> object:
    """C = A @ B with one given config of the fast kernels (no autotuning).

    Without ``config``: the first candidate of :data:`FAST_CONFIGS` for ``dtype``, or, on a GPU
    whose shared memory it does not fit, :data:`PORTABLE_CONFIGS`.
    """
    stage = "triton_fast"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, dtypes.get(dtype).torch_dtype, ops.a.device)
    common.require_32bit_offsets(stage, ops.a, ops.b, c)
    try:
        launch_fast(ops, dtype, config or candidates(dtype)[0], c)
    except triton.runtime.errors.OutOfResources:
        if config is not None:
            raise
        launch_fast(ops, dtype, PORTABLE_CONFIGS[dtype], c)
    return ops.give_back(c)
