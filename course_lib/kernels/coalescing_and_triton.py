"""Stage 04 — coalescing, bank conflicts, and the tiled GEMM written in Triton.

Notebook: ``notebooks/04_coalescing_and_triton.ipynb``. Every kernel here runs on an NVIDIA GPU
(written for Triton 3.6 on the H200 and Triton 3.7 on learners' machines) and, on the CPU backend,
in Triton's interpreter (``TRITON_INTERPRET=1``, set by :mod:`course_lib.backend`).

Stages registered here (backend ``"triton"``; dtypes fp32 = exact IEEE fp32, tf32, fp16, bf16):

``triton_tiled``
    The teaching kernel: one program per BLOCK_M x BLOCK_N tile of C, a loop over K, ``tl.dot``,
    plain pointer arithmetic, every load and store guarded by a mask (no ``% M`` wrap-around).
``triton_tiled_descriptors``
    The same kernel reading and writing through tensor descriptors (``tl.make_tensor_descriptor``).
    Block pointers (``tl.make_block_ptr``) were removed in Triton 3.9; descriptors replace them. On a
    GPU a descriptor is a TMA descriptor, which needs a 16-byte-aligned base address, 16-byte-aligned
    row strides and a contiguous last dimension: inputs that break this get a ``ValueError``.
``triton_tiled_transposed_b``
    The seed document's "coalesced Y" experiment: B is first copied as B^T (row-major N x K), the
    kernel loads K-contiguous tiles of it and turns them back with ``tl.trans`` before ``tl.dot``.
``triton_fast``
    What Triton adds beyond the tile: grouped launch order (L2 reuse), per-dtype tile shapes,
    ``num_warps`` / ``num_stages``, tensor-descriptor (TMA) loads where the alignment allows (pointer
    loads otherwise), an optional persistent launch, and for TF32 a pre-transposed B. On the GPU it
    autotunes among the candidates of :data:`FAST_CONFIGS`; on the CPU it uses the first one.

Also here: the seed experiment's runner and recorded figures, plain data for the notebook's pictures
(launch order; the addresses a warp reads from the seed kernels' B tile, which the notebook hands to
:mod:`course_lib.viz.banks`), the exercises' reference solutions and checkers, and
:func:`hopper_compile_evidence`, which compiles the seed kernels for sm_90a *without a GPU* (Triton's
wheel ships ptxas) and counts what the compiler made of them.

The H200 measurements that choose :data:`FAST_CONFIGS` come from ``tools/gpu_triton.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
import triton
import triton.language as tl

from course_lib import backend
from course_lib.timing import time_fn
from course_lib.gemm import TORCH_DTYPES, Operands, new_output, prepare
from course_lib.registry import Stage, register

NOTEBOOK = "04_coalescing_and_triton"
COURSE_DTYPES = ("fp32", "tf32", "fp16", "bf16")

# tl.dot's input_precision per course dtype. "ieee": exact fp32 multiply-adds (on NVIDIA GPUs the
# CUDA cores' FMA units, no tensor cores); "tf32": inputs rounded to TensorFloat-32 inside the
# tensor cores. For 16-bit inputs the argument has no effect (Triton's tl.dot docs), so "ieee" is
# passed to keep one kernel signature. The interpreter computes tl.dot with numpy.matmul in fp32 and
# does not round to TF32, so on the CPU "tf32" results are as exact as "fp32" ones.
INPUT_PRECISION = {"fp32": "ieee", "tf32": "tf32", "fp16": "ieee", "bf16": "ieee"}

# =================================================================================================
# 1. Coalescing and bank conflicts: the notebook uses course_lib.viz.coalescing and .banks; here only
#    the addresses one warp reads from the seed kernels' B tile, as plain data for viz.banks
# =================================================================================================
def seed_b_tile_addresses(variant: str, pitch: int = 64, per_thread: int = 4, threads_along_n: int = 16,
                          k: int = 0, j: int = 0) -> tuple[list[int], int]:
    """Byte address of each lane, and bytes per lane, of one shared-memory load of B's tile by the
    FMA code (``input_precision="ieee"``) of the seed kernels.

    A model read off the TTGIR for BLOCK_SIZE 64 (the notebook prints it): the dot's layout gives each
    thread ``per_thread`` neighbouring columns n of B (lane t < 16 owns n = 4 t .. 4 t + 3; lanes
    16-31 repeat lanes 0-15), and the tile sits in shared memory unswizzled (``maxPhase = 1``), one
    stored row every ``pitch`` 4-byte words (``pitch`` = BLOCK_SIZE; more if the rows were padded).
    Each thread loads ``per_thread`` consecutive words, the widest load its data allows:

    * "plain": B's tile is stored row by row (n fastest), so a thread's 4 columns at one k are 4
      neighbouring words: lane t reads words k * pitch + 4 t .. + 3;
    * "transposed": B^T's tile is stored column of B by column (k fastest), so the 4 neighbouring words
      are 4 values of k in one column n = 4 t + j: lane t reads words (4 t + j) * pitch + k .. + 3.
    """
    if variant not in ("plain", "transposed"):
        raise ValueError("variant is 'plain' or 'transposed'")
    word = 4  # fp32
    addrs = []
    for lane in range(32):
        t = lane % threads_along_n
        w = k * pitch + per_thread * t if variant == "plain" else (per_thread * t + j) * pitch + k
        addrs.append(w * word)
    return addrs, per_thread * word


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print a list of same-keyed dicts as an aligned text table."""
    keys = list(rows[0])
    width = {k: max(len(str(k)), *(len(str(r[k])) for r in rows)) for k in keys}
    print("  ".join(f"{k:<{width[k]}}" for k in keys))
    for r in rows:
        print("  ".join(f"{str(r[k]):<{width[k]}}" for k in keys))


# =================================================================================================
# 2. The teaching kernel: one program per tile, pointer arithmetic with masks
# =================================================================================================
@triton.jit
def tiled_matmul_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions: A is M x K, B is K x N, C is M x N
    M, N, K,
    # Strides: elements to step to reach the next row (first) or the next column (second)
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    # ---- which tile of C this program owns ----------------------------------------------------
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of A and of C
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # columns of B and of C
    ks = tl.arange(0, BLOCK_K)

    # ---- pointers to the first K-slice: a BLOCK_M x BLOCK_K block of A, BLOCK_K x BLOCK_N of B ----
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

    # ---- walk along K, accumulating in fp32 -----------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # Masks instead of wrap-around: past the edge of A or B we read zeros, which add nothing.
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(ks[:, None] < K - k0) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # ---- write the tile; elements past the edge of C are not written ------------------------------
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


@dataclass(frozen=True)
class TileConfig:
    """Compile-time shape of one launch of the tiled kernels."""

    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4  # Triton's default
    num_stages: int = 3  # Triton's default on NVIDIA GPUs


# One config for every dtype: the teaching kernel is about the tile, not about tuning.
TILED_CONFIG = TileConfig()



def _interpretable(t: torch.Tensor) -> torch.Tensor:
    """The operand as the kernel should read it on this backend.

    Triton's interpreter keeps bfloat16 as raw 16-bit integers and its ``tl.dot`` multiplies those
    bit patterns (triton-lang/triton issue 11584; the interpreter documents no bfloat16 arithmetic).
    On the CPU backend bf16 operands are therefore widened to fp32 before the launch. The widening
    is exact and a bf16 x bf16 product is exact in fp32, so the kernel computes the same sums it
    computes on a GPU from bf16 tiles with an fp32 accumulator; C is still stored as bf16.
    """
    if t.dtype == torch.bfloat16 and not backend.get().is_gpu:
        return t.float()
    return t


_MAX_OFFSET = 2**31 - 1  # the tiled kernels compute element offsets in 32-bit integers


def _require_32bit_offsets(stage: str, *tensors: torch.Tensor) -> None:
    for t in tensors:
        last = sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
        if last > _MAX_OFFSET:
            raise ValueError(
                f"{stage}: a {tuple(t.shape)} matrix has element offsets beyond 2**31 - 1, which the "
                "kernel computes in 32-bit integers; split the product into smaller blocks"
            )


def _launch_tiled(ops: Operands, dtype: str, cfg: TileConfig, stage: str):
    """Allocate C and launch :func:`tiled_matmul_kernel`; returns (C, compiled kernel or None)."""
    c = new_output(ops.M, ops.N, TORCH_DTYPES[dtype], ops.a.device)
    _require_32bit_offsets(stage, ops.a, ops.b, c)
    grid = (triton.cdiv(ops.M, cfg.block_m), triton.cdiv(ops.N, cfg.block_n))
    a, b = _interpretable(ops.a), _interpretable(ops.b)
    compiled = tiled_matmul_kernel[grid](
        a, b, c, ops.M, ops.N, ops.K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        INPUT_PRECISION=INPUT_PRECISION[dtype], num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c, compiled


def tiled_matmul(a: object, b: object, dtype: str = "fp32", config: TileConfig = TILED_CONFIG) -> object:
    """C = A @ B with :func:`tiled_matmul_kernel` (stage ``triton_tiled``); any strides."""
    ops = prepare(a, b, stage="triton_tiled", dtypes=(dtype,))
    c, _ = _launch_tiled(ops, dtype, config, "triton_tiled")
    return ops.give_back(c)


# =================================================================================================
# 3. The same kernel through tensor descriptors
# =================================================================================================
@triton.jit
def tiled_matmul_descriptor_kernel(
    # Pointers to matrices (row-major: the last dimension is contiguous)
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions
    M, N, K,
    # Row strides (the column stride is 1)
    stride_am, stride_bk, stride_cm,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    # A descriptor knows the whole matrix (shape, strides) and the block it moves; a load of a
    # block that hangs over the edge is filled with zeros, a store over the edge is clipped. So no
    # masks here: the hardware (TMA on Hopper) or the interpreter does the bounds handling.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])

    row0 = tl.program_id(0) * BLOCK_M
    col0 = tl.program_id(1) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([row0, k0])
        b = b_desc.load([k0, col0])
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    c_desc.store([row0, col0], acc.to(c_ptr.dtype.element_ty))


DESCRIPTOR_ALIGN_BYTES = 16  # TMA: base address and every stride but the last, in bytes


def descriptor_problem(t: torch.Tensor, name: str) -> str | None:
    """Why ``t`` cannot be read through a tensor descriptor on a GPU, or None if it can.

    TMA (the copy engine behind descriptors on Hopper) needs a contiguous last dimension and a
    16-byte-aligned base address and row stride (CUDA Driver API, cuTensorMapEncodeTiled; Triton's
    ``tl.make_tensor_descriptor`` docstring). The interpreter checks the same rules.
    """
    item = t.element_size()
    if t.stride(1) != 1 and t.shape[1] > 1:
        return (
            f"{name} is not contiguous in its last dimension (strides {t.stride()}); a tensor "
            f"descriptor reads whole rows: pass {name}.contiguous()"
        )
    if t.data_ptr() % DESCRIPTOR_ALIGN_BYTES:
        return (
            f"{name} starts at an address that is not a multiple of {DESCRIPTOR_ALIGN_BYTES} bytes "
            f"(a view that begins mid-allocation?); a tensor descriptor needs a 16-byte-aligned "
            f"base: pass {name}.clone()"
        )
    if (t.stride(0) * item) % DESCRIPTOR_ALIGN_BYTES:
        per = DESCRIPTOR_ALIGN_BYTES // item
        return (
            f"{name}'s rows are {t.stride(0)} elements = {t.stride(0) * item} bytes apart, not a "
            f"multiple of {DESCRIPTOR_ALIGN_BYTES} bytes; a tensor descriptor needs 16-byte-aligned "
            f"row strides: pad the row length to a multiple of {per} elements, or use the pointer "
            "kernel (stage triton_tiled)"
        )
    return None


_allocator_set = False


def _ensure_allocator() -> None:
    """Descriptors made inside a kernel need a little global memory per program for the TMA
    descriptor; Triton asks for it through the allocator set with ``triton.set_allocator``."""
    global _allocator_set
    if _allocator_set or not backend.get().is_gpu:
        return

    def alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)
    _allocator_set = True


def tiled_matmul_descriptors(a: object, b: object, dtype: str = "fp32", config: TileConfig = TILED_CONFIG) -> object:
    """C = A @ B with :func:`tiled_matmul_descriptor_kernel` (stage ``triton_tiled_descriptors``).

    Raises ``ValueError`` naming the matrix and the rule when an operand (or C, whose row stride
    is N) breaks a tensor descriptor's alignment rules.
    """
    stage = "triton_tiled_descriptors"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, TORCH_DTYPES[dtype], ops.a.device)
    for t, name in ((ops.a, "a"), (ops.b, "b"), (c, "the output c (N columns)")):
        problem = descriptor_problem(t, name)
        if problem:
            raise ValueError(f"{stage}: {problem}")
    _require_32bit_offsets(stage, ops.a, ops.b, c)
    _ensure_allocator()
    grid = (triton.cdiv(ops.M, config.block_m), triton.cdiv(ops.N, config.block_n))
    a, b = _interpretable(ops.a), _interpretable(ops.b)
    tiled_matmul_descriptor_kernel[grid](
        a, b, c, ops.M, ops.N, ops.K, a.stride(0), b.stride(0), c.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        INPUT_PRECISION=INPUT_PRECISION[dtype], num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return ops.give_back(c)


# =================================================================================================
# 4. The seed experiment: pre-transposed B ("coalesced Y") and tl.trans inside the kernel
# =================================================================================================
@triton.jit
def tiled_matmul_transposed_b_kernel(
    # Pointers to matrices: bt_ptr holds B^T, row-major N x K
    a_ptr, bt_ptr, c_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides
    stride_am, stride_ak, stride_btn, stride_btk, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    # A BLOCK_N x BLOCK_K block of B^T: along its rows consecutive k are adjacent in memory, so
    # neighbouring threads read neighbouring addresses (the point of the experiment).
    bt_ptrs = bt_ptr + cols[:, None] * stride_btn + ks[None, :] * stride_btk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - k0), other=0.0)
        bt = tl.load(bt_ptrs, mask=(cols[:, None] < N) & (ks[None, :] < K - k0), other=0.0)
        acc = tl.dot(a, tl.trans(bt), acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        bt_ptrs += BLOCK_K * stride_btk

    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def _launch_transposed_b(ops: Operands, bt: torch.Tensor, dtype: str, cfg: TileConfig, stage: str):
    c = new_output(ops.M, ops.N, TORCH_DTYPES[dtype], ops.a.device)
    _require_32bit_offsets(stage, ops.a, bt, c)
    grid = (triton.cdiv(ops.M, cfg.block_m), triton.cdiv(ops.N, cfg.block_n))
    a, bt = _interpretable(ops.a), _interpretable(bt)
    compiled = tiled_matmul_transposed_b_kernel[grid](
        a, bt, c, ops.M, ops.N, ops.K,
        a.stride(0), a.stride(1), bt.stride(0), bt.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        INPUT_PRECISION=INPUT_PRECISION[dtype], num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c, compiled


def tiled_matmul_transposed_b(a: object, b: object, dtype: str = "fp32", config: TileConfig = TILED_CONFIG) -> object:
    """C = A @ B reading B as B^T (stage ``triton_tiled_transposed_b``).

    Like the seed document's wrapper, the copy ``b.T.contiguous()`` happens inside the call, so a
    timing of this function includes it.
    """
    stage = "triton_tiled_transposed_b"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c, _ = _launch_transposed_b(ops, ops.b.T.contiguous(), dtype, config, stage)
    return ops.give_back(c)


# The seed document's setting: X (8192 x 6144) @ Y (6144 x 4096), fp32, one BLOCK_SIZE for the
# tile's three sides, Triton's default num_warps / num_stages, a 2-D grid over the tiles of Z.
SEED_SHAPE = (8192, 4096, 6144)  # (M, N, K) in the course's naming: a is M x K, b is K x N
SEED_BLOCK_SIZES = (32, 64)
# The seed article's T4 figures, for comparison with the H200 run in
# course_lib/results/nvidia_h200_triton_experiments.json (recorded by tools/gpu_triton.py).
SEED_T4_ARTICLE = (3.15, 1.57)  # plain, transposed; fp32 on a T4 (the seed article's numbers)


def seed_experiment_gemm(
    x: object, y: object, *, block_size: int = 64, input_precision: str = "ieee", transposed_y: bool = False
) -> object:
    """Z = X @ Y as in the seed experiment: ``transposed_y`` copies Y^T first (inside the call)
    and uses :func:`tiled_matmul_transposed_b_kernel`; otherwise :func:`tiled_matmul_kernel`."""
    dtype = {"ieee": "fp32", "tf32": "tf32"}[input_precision]
    cfg = TileConfig(block_size, block_size, block_size)
    stage = "seed experiment"
    ops = prepare(x, y, stage=stage, dtypes=(dtype,))
    if transposed_y:
        c, _ = _launch_transposed_b(ops, ops.b.T.contiguous(), dtype, cfg, stage)
    else:
        c, _ = _launch_tiled(ops, dtype, cfg, stage)
    return ops.give_back(c)


# =================================================================================================
# 5. The fast kernel: grouped launch order, descriptors, optional persistent loop
# =================================================================================================
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
def fast_matmul_tile(
    tile_id, a_desc, b_desc, c_desc, a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    USE_DESCRIPTORS: tl.constexpr, B_IS_TRANSPOSED: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr,
    INPUT_PRECISION: tl.constexpr,
):
    """Compute and store tile ``tile_id`` of C (grouped order) — the body of :func:`fast_matmul_kernel`."""
    pid_m, pid_n = grouped_tile(tile_id, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)

    # ---- K loop: descriptor (TMA) loads, or pointer loads with masks ----------------------------
    if USE_DESCRIPTORS:
        for k0 in range(0, K, BLOCK_K):
            a = a_desc.load([row0, k0])
            if B_IS_TRANSPOSED:
                b = b_desc.load([col0, k0]).T  # a K-major tile of B^T, seen as BLOCK_K x BLOCK_N
            else:
                b = b_desc.load([k0, col0])
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
    else:
        rows = row0 + tl.arange(0, BLOCK_M)
        cols = col0 + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
        b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - k0), other=0.0)
            b = tl.load(b_ptrs, mask=(ks[:, None] < K - k0) & (cols[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk

    # ---- epilogue: convert to C's type and store ---------------------------------------------------
    c = acc.to(c_ptr.dtype.element_ty)
    if USE_DESCRIPTORS:
        if EPILOGUE_SPLIT == 2:
            # Two BLOCK_M x BLOCK_N/2 stores: the staging buffer in shared memory is half the size,
            # which leaves room for one more pipeline stage with 128 x 256 tiles, or for one more
            # program per SM with fp32's 64 x 64 tiles (48 -> 32 KiB: 5 programs instead of 4).
            halves = tl.permute(tl.reshape(c, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
            left, right = tl.split(halves)
            c_desc.store([row0, col0], left)
            c_desc.store([row0, col0 + BLOCK_N // 2], right)
        else:
            c_desc.store([row0, col0], c)
    else:
        rows = row0 + tl.arange(0, BLOCK_M)
        cols = col0 + tl.arange(0, BLOCK_N)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, c, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def fast_matmul_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides (B's are those of the K x N matrix, whichever way it is stored)
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    USE_DESCRIPTORS: tl.constexpr,  # tensor descriptors (TMA) instead of pointers + masks
    B_IS_TRANSPOSED: tl.constexpr,  # b_ptr holds B^T row-major (N x K): B's tiles are K-major
    PERSISTENT: tl.constexpr,  # fewer programs than tiles: each walks tiles pid, pid + P, ...
    EPILOGUE_SPLIT: tl.constexpr,  # store C in this many column halves (less shared memory)
    INPUT_PRECISION: tl.constexpr,
):
    # Descriptors are made once per program, before any loop (on a GPU each one is written to global
    # memory obtained through triton.set_allocator).
    if USE_DESCRIPTORS:
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
        if B_IS_TRANSPOSED:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1], block_shape=[BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
        c_desc = tl.make_tensor_descriptor(
            c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N // EPILOGUE_SPLIT]
        )
    else:
        a_desc = None
        b_desc = None
        c_desc = None

    if PERSISTENT:
        # One program per SM walks the tiles pid, pid + P, pid + 2P, ... The flattened loop lets the
        # compiler start loading the next tile while the current one is being stored.
        num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile_id in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):
            fast_matmul_tile(tile_id, a_desc, b_desc, c_desc, a_ptr, b_ptr, c_ptr, M, N, K,
                             stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                             BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, USE_DESCRIPTORS, B_IS_TRANSPOSED,
                             EPILOGUE_SPLIT, INPUT_PRECISION)
    else:
        # One program per tile. (A loop that runs once would cost registers: measured by compiling
        # both forms for sm_90a, 255 registers and a spill instead of 188 for the fp32 128x128 tile.)
        fast_matmul_tile(tl.program_id(0), a_desc, b_desc, c_desc, a_ptr, b_ptr, c_ptr, M, N, K,
                         stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                         BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, USE_DESCRIPTORS, B_IS_TRANSPOSED,
                         EPILOGUE_SPLIT, INPUT_PRECISION)


@dataclass(frozen=True)
class FastConfig:
    """One candidate configuration of :func:`fast_matmul_kernel` and of its wrapper.

    ``b_layout``: "kn" reads B as given (K x N, row-major: its tiles are N-major); "nk" first copies
    B^T (N x K, row-major) with :func:`transpose` inside the call so that B's tiles are K-major, as
    Hopper's TF32 tensor-core instruction wants; the copy is part of every call and of its timing.
    ``loads``: "descriptors" uses TMA when all three matrices meet the alignment rules and falls back
    to pointers otherwise; "pointers" always uses pointers with masks.
    ``persistent``: launch one program per SM (on the CPU: :data:`CPU_PERSISTENT_PROGRAMS`).
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

    def __post_init__(self) -> None:
        if self.b_layout not in ("kn", "nk"):
            raise ValueError(f"b_layout is 'kn' or 'nk', not {self.b_layout!r}")
        if self.loads not in ("descriptors", "pointers"):
            raise ValueError(f"loads is 'descriptors' or 'pointers', not {self.loads!r}")
        if self.epilogue_split not in (1, 2):
            raise ValueError(f"epilogue_split is 1 or 2, not {self.epilogue_split}")
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
        ])
        return (f"{self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{extra}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# Candidates per course dtype. The first entry is what the CPU backend runs (the interpreter cannot
# time anything); on a GPU every entry is timed on the first call at each shape and the fastest kept.
# Chosen on the H200 by tools/gpu_triton.py (2026-11-29; its sweep is in
# course_lib/results/nvidia_h200_triton_experiments.json, ranked by the worse of the two ratios to
# cuBLAS at 4096^3 and 8192^3, each timed side by side with cuBLAS):
# * fp16/bf16: the persistent loop with 128 x 256 tiles wins (fp16 97.0 / 103.7 %, bf16 with the
#   split epilogue and a 4th stage 95.6 / 105.7 %). The idea of both follows Triton's
#   persistent-matmul tutorial (python/tutorials/09-persistent-matmul.py).
# * tf32: B^T copied (both operands K-major, as Hopper's TF32 wgmma requires; CUTLASS lists Hopper
#   TF32 tensor-op GEMMs only for K-major A and B: media/docs/cpp/functionality.md), persistent,
#   128 x 256 x 32 (a 128-byte fp32 row per tile row, as for 64 fp16 elements). With torch's copy
#   (1.1 TB/s) it reached 76 / 92 %; with :func:`transpose` (3.5-4.0 TB/s) GROUP_M 16 and 8 traded
#   places in two sweeps that day: 94.0 / 98.6 % and 91.5 / 101.9 % at 14:35 UTC (only the printed
#   summary of that run came back from the device), 90.9 / 99.5 % and 93.3 / 101.9 % at 14:46 UTC
#   ("second_sweep" in the experiments file). On a GPU the wrapper times both.
# * fp32 (ieee): CUDA-core FMA path. Pointer loads with 64 x 128 tiles led the first two sweeps
#   (82-85 % at 4096^3). A third round (2026-11-30 19:26 UTC, "third_sweep_fp32" in the experiments
#   file) gave descriptors (TMA) with small 64 x 64 x 32 tiles 88.5 / 91.8 %, 3 stages ahead of 4;
#   larger descriptor tiles (64 x 128, 128 x 64) and a persistent 64 x 64 loop were slower, and so
#   were 8 warps, 2 warps and K slices of 16 in a fourth round ("fourth_sweep_fp32"). A fifth round
#   (2026-11-30 21:24 UTC, "fifth_sweep_fp32") took K slices of 64 with 2 stages: 90.5 / 94.2 %
#   (3 or 4 stages of 64: 83-87 %; slices of 128: 74-77 %). A sixth (22:46 and 22:51 UTC,
#   "sixth_sweep", "sixth_sweep_fp32_b") found shared memory limiting that kernel to 4 programs per
#   SM (48 KiB each, 16 KiB of it staging C for the TMA store); storing C in two half-width boxes
#   (epilogue_split=2) leaves 32 KiB and fits a 5th: 91.2 / 95.2 % with GROUP_M 16. A register cap
#   (maxnreg), pointer stores for C and the persistent loop with 2 programs per SM did not help, and
#   for 16-bit types Triton's automatic warp specialisation was slower. An earlier
#   offline compile for sm_90a gave a descriptor fp32 kernel 32 registers and ~5 KB of local-memory
#   stack per thread with Triton 3.9 (Triton 3.6 on the H200: 96 registers, no spills, in the sixth
#   sweep's warm-up): on a GPU with Triton 3.9
#   descriptors may be slow, so a pointer candidate stays in the list (the wrapper times them all).
# * fp16/bf16, seventh round (2026-12-01 00:24 UTC, "seventh_sweep_16bit"): 128 x 256 x 64 with
#   3 stages and the split C store came first at 4096^3 for both types (fp16 98.5 / 101.5 %, bf16
#   98.1 / 106.5 %; re-measured with the recording's method 98.3 / 106.0 % and 98.3 / 105.1 %), so
#   both types now share one list. cuBLAS's own tile (256 x 128, 3 or 4 stages: 89-92 % at 4096^3)
#   and K slices of 128 with 2 stages (70 %) were slower.
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
# to launch (OutOfResources). These need 32 KB or less, whatever the GPU; on the H200 they never run.
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
# Hopper's TF32 tensor-core instruction reads both operands K-major, so "nk" configs copy B^T first.
# torch's b.T.contiguous() did that at 1.0-1.1 TB/s on the H200 (tools/gpu_triton.py, 0.129 ms for
# 4096^2 fp32: a quarter of the GEMM's time). The kernel below reads a tile along B's rows and
# writes it along B^T's rows - both coalesced; Triton turns the tile around in shared memory.
TRANSPOSE_BLOCK = (64, 64)
TRANSPOSE_WARPS = 4


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
    _require_32bit_offsets("transpose", x, out)
    # Moving bits needs no arithmetic: 16-bit types travel as int16 (the interpreter has no bf16).
    src, dst = (x.view(torch.int16), out.view(torch.int16)) if x.element_size() == 2 else (x, out)
    grid = (triton.cdiv(R, block[0]), triton.cdiv(C, block[1]))
    transpose_kernel[grid](src, dst, R, C, src.stride(0), src.stride(1), dst.stride(0),
                           BLOCK_R=block[0], BLOCK_C=block[1], num_warps=num_warps)
    return out


def _launch_fast(ops: Operands, dtype: str, cfg: FastConfig, c: torch.Tensor):
    """Launch :func:`fast_matmul_kernel` with ``cfg`` into ``c``; returns (compiled, used descriptors)."""
    if cfg.b_layout == "nk":
        # B^T (N x K, row-major): no copy when B is already stored that way (b = w.T, as for the
        # weight of torch.nn.Linear), otherwise one pass of the transpose kernel.
        b_arg = ops.b.T if ops.b.T.is_contiguous() else transpose(ops.b)
    else:
        b_arg = ops.b
    use_desc = cfg.loads == "descriptors" and all(
        descriptor_problem(t, n) is None for t, n in ((ops.a, "a"), (b_arg, "b"), (c, "c"))
    )
    a, b_arg = _interpretable(ops.a), _interpretable(b_arg)
    # The kernel always gets B's strides as a K x N matrix: for B^T that is the view b_arg.T,
    # whose strides are (1, K) — pointer loads then run along K, descriptors use B^T's rows.
    b_view = b_arg.T if cfg.b_layout == "nk" else b_arg
    if use_desc:
        _ensure_allocator()
    tiles = triton.cdiv(ops.M, cfg.block_m) * triton.cdiv(ops.N, cfg.block_n)
    if cfg.persistent:
        programs = backend.sm_count() if backend.get().is_gpu else CPU_PERSISTENT_PROGRAMS
        grid = (min(tiles, programs),)
    else:
        grid = (tiles,)
    compiled = fast_matmul_kernel[grid](
        a, b_view, c, ops.M, ops.N, ops.K,
        a.stride(0), a.stride(1), b_view.stride(0), b_view.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        USE_DESCRIPTORS=use_desc, B_IS_TRANSPOSED=cfg.b_layout == "nk", PERSISTENT=cfg.persistent,
        EPILOGUE_SPLIT=cfg.epilogue_split, INPUT_PRECISION=INPUT_PRECISION[dtype],
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return compiled, use_desc


def fast_matmul(a: object, b: object, dtype: str = "fp32", config: FastConfig | None = None) -> object:
    """C = A @ B with :func:`fast_matmul_kernel` and one given config (no autotuning).

    Without ``config``: the first candidate of :data:`FAST_CONFIGS` for ``dtype``, or, on a GPU
    whose shared memory it does not fit, :data:`PORTABLE_CONFIGS`.
    """
    stage = "triton_fast"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, TORCH_DTYPES[dtype], ops.a.device)
    _require_32bit_offsets(stage, ops.a, ops.b, c)
    try:
        _launch_fast(ops, dtype, config or FAST_CONFIGS[dtype][0], c)
    except triton.runtime.errors.OutOfResources:
        if config is not None:
            raise
        _launch_fast(ops, dtype, PORTABLE_CONFIGS[dtype], c)
    return ops.give_back(c)


# ---- autotuning (GPU only) ----------------------------------------------------------------------
# Autotuning is "try every candidate on the real inputs, time it, keep the fastest" — what
# triton.autotune does for a kernel's meta-parameters. It is done by hand here because two of the
# choices (B's layout, descriptors or not) are made by the wrapper, outside the kernel.
_TUNED: dict[tuple, FastConfig] = {}


def _autotuned_config(ops: Operands, dtype: str, c: torch.Tensor) -> FastConfig:
    candidates = FAST_CONFIGS[dtype]
    if not backend.get().is_gpu or len(candidates) == 1:
        return candidates[0]
    aligned = all(descriptor_problem(t, "x") is None for t in (ops.a, ops.b, c))
    key = (dtype, ops.M, ops.N, ops.K, ops.a.stride(), ops.b.stride(), aligned)
    if key not in _TUNED:
        best, best_ms = candidates[0], float("inf")
        for cfg in candidates:
            try:
                # The course's own timer (CUDA events, L2 flushed, short runs queued behind flushes):
                # triton.testing.do_bench let the host's launch time into small shapes' timings, so
                # the choice at 1024^3 was noise (bf16 then recorded 48.6 % of cuBLAS, fp16 66.4 %,
                # with the same candidates; recording of 2026-11-30 23:06 UTC).
                ms = time_fn(lambda: _launch_fast(ops, dtype, cfg, c), budget_ms=40).median_ms
            except triton.runtime.errors.OutOfResources:
                continue  # e.g. too much shared memory for this GPU: not a candidate here
            if ms < best_ms:
                best, best_ms = cfg, ms
        _TUNED[key] = best if best_ms < float("inf") else PORTABLE_CONFIGS[dtype]
    return _TUNED[key]


def tuned_configs() -> dict[tuple, FastConfig]:
    """What autotuning chose so far in this process: {(dtype, M, N, K, strides..., aligned): config}."""
    return dict(_TUNED)


def fast_matmul_autotuned(a: object, b: object, dtype: str = "fp32") -> object:
    """Stage ``triton_fast``: on a GPU the fastest of :data:`FAST_CONFIGS` for this shape; on the
    CPU the first candidate."""
    stage = "triton_fast"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, TORCH_DTYPES[dtype], ops.a.device)
    _require_32bit_offsets(stage, ops.a, ops.b, c)
    cfg = _autotuned_config(ops, dtype, c)
    _launch_fast(ops, dtype, cfg, c)
    return ops.give_back(c)


# ---- launch order, as plain data (the notebook's picture and Exercise 1) --------------------------
def grouped_order(pid: int, num_pid_m: int, num_pid_n: int, group_m: int) -> tuple[int, int]:
    """Python twin of :func:`grouped_tile`: (pid_m, pid_n) of program ``pid``."""
    tiles_per_band = group_m * num_pid_n
    band = pid // tiles_per_band
    first_m = band * group_m
    band_rows = min(num_pid_m - first_m, group_m)
    return first_m + (pid % tiles_per_band) % band_rows, (pid % tiles_per_band) // band_rows


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


def draw_launch_order(num_pid_m: int, num_pid_n: int, group_m: int, programs: int):
    """Two panels, row-major and grouped order: each tile of C labelled with the program that computes
    it; the first ``programs`` programs (those in flight together) shaded, with the block-rows of A
    and block-columns of B they read marked on the edges. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 0.55 * num_pid_m + 1.6))
    for ax, (name, order, g) in zip(axes, (("row-major order", row_major_order, 1),
                                           (f"grouped order, GROUP_M = {group_m}", grouped_order, group_m))):
        grid = launch_order_grid(order, num_pid_m, num_pid_n, g)
        first = grid < programs
        ax.imshow(first, cmap="Blues", vmin=-0.3, vmax=1.6)
        for (r, c), pid in np.ndenumerate(grid):
            ax.text(c, r, str(pid), ha="center", va="center", fontsize=7)
        rows_read = np.flatnonzero(first.any(axis=1))
        cols_read = np.flatnonzero(first.any(axis=0))
        ax.scatter([-0.9] * len(rows_read), rows_read, marker=">", color="tab:red", clip_on=False,
                   label="block-row of A / block-column of B read")
        ax.scatter(cols_read, [-0.9] * len(cols_read), marker="v", color="tab:red", clip_on=False)
        ax.scatter([], [], marker="s", color=plt.get_cmap("Blues")(0.6), label=f"tile of programs 0-{programs - 1}")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel("tile column (pid_n)", fontsize=8)
        ax.set_ylabel("tile row (pid_m)", fontsize=8)
        ax.set_title(f"{name}\nthe first {programs} programs read {len(rows_read)} block-rows of A "
                     f"+ {len(cols_read)} block-columns of B", fontsize=8)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=2, fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


# =================================================================================================
# 6. Exercises: reference solutions and the library calls that check learners' answers
# =================================================================================================
def check_launch_order(fn: Callable[[int, int, int, int], tuple[int, int]]) -> str:
    """Exercise 1: check a learner's ``fn(pid, num_pid_m, num_pid_n, group_m) -> (pid_m, pid_n)``
    against :func:`grouped_order` on many grid shapes, including ones GROUP_M does not divide.

    Raises ``AssertionError`` naming the first program that lands on the wrong tile.
    """
    cases = [(m, n, g) for m in (1, 3, 8, 9, 13) for n in (1, 2, 7, 16) for g in (1, 2, 4, 8)]
    for m, n, g in cases:
        for pid in range(m * n):
            got, want = tuple(fn(pid, m, n, g)), grouped_order(pid, m, n, g)
            if got != want:
                raise AssertionError(
                    f"program {pid} of a {m} x {n} grid of tiles with group_m={g}: your function "
                    f"gives tile {got}, grouped order gives {want}"
                )
    return f"launch order correct on {len(cases)} grid shapes"


@triton.jit
def exercise_tail_solution_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Exercise 2, reference solution: the K loop must also cover the last, partial K-block."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # ceil(K / BLOCK_K) blocks, not K // BLOCK_K
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def exercise_gemm(kernel: Any, block: int = 32) -> Callable[[object, object], object]:
    """Exercise 2: wrap a learner's kernel (signature of :func:`exercise_tail_solution_kernel`) as
    an fp32 GEMM ``fn(a, b) -> c`` that ``course_lib.check`` can test."""
    def gemm(a: object, b: object) -> object:
        ops = prepare(a, b, stage="exercise", dtypes=("fp32",))
        c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
        grid = (triton.cdiv(ops.M, block), triton.cdiv(ops.N, block))
        kernel[grid](ops.a, ops.b, c, ops.M, ops.N, ops.K, *ops.a.stride(), *ops.b.stride(), *c.stride(),
                     BLOCK_M=block, BLOCK_N=block, BLOCK_K=block)
        return ops.give_back(c)

    gemm.__name__ = f"exercise_gemm({getattr(kernel, '__name__', 'kernel')})"
    return gemm


# =================================================================================================
# 7. What the compiler makes for Hopper, without a GPU
# =================================================================================================
# Triton's wheel ships ptxas, so a kernel can be compiled for sm_90a (the H200) on any machine.
# It has to happen in a fresh Python process: in this one Triton is in interpreter mode.
_EVIDENCE_SCRIPT = r"""
import json, os, sys
import course_lib  # picks the CPU backend, which sets TRITON_INTERPRET=1 ...
os.environ["TRITON_INTERPRET"] = "0"  # ... undone before the kernels are decorated
# Triton 3.9 warns that its default for fusing a*b+c into FMA will change; keep today's default.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
from course_lib.kernels import coalescing_and_triton as mod
print(json.dumps([mod._compile_counts(**case) for case in json.loads(sys.argv[1])]))
"""


def _compile_counts(kernel: str, dtype: str, precision: str, block: int, num_warps: int = 4,
                    num_stages: int = 3, arch: int = 90) -> dict[str, Any]:
    """Compile one seed kernel for ``sm_<arch>`` and count instructions (runs in a fresh process)."""
    import re
    from collections import Counter

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = {"plain": tiled_matmul_kernel, "transposed": tiled_matmul_transposed_b_kernel}[kernel]
    ty = {"fp32": "*fp32", "fp16": "*fp16", "bf16": "*bf16"}[dtype]
    names = fn.arg_names
    signature, constexprs = {}, {}
    for n in names[:3]:
        signature[n] = ty
    for n in names[3:12]:
        signature[n] = "i32"
    # The JIT specialises an integer argument equal to 1 into a constant (a unit column stride).
    unit = {"plain": ("stride_ak", "stride_bn", "stride_cn"), "transposed": ("stride_ak", "stride_btk", "stride_cn")}[kernel]
    for n in unit:
        signature[n] = "constexpr"
        constexprs[n] = 1
    for n, v in (("BLOCK_M", block), ("BLOCK_N", block), ("BLOCK_K", block), ("INPUT_PRECISION", precision)):
        signature[n] = "constexpr"
        constexprs[n] = v
    # ... and marks pointers and integers divisible by 16 (true at the seed shape) as such.
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names[:12]) if n not in unit}
    src = ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)
    ck = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, "num_stages": num_stages})
    ttgir, sass = ck.asm["ttgir"], ck.asm["sass"]
    # SASS (what the GPU executes) lines look like "--:-:-:-:1\tLDS.128 R4, [R2+0x100];".
    ops = Counter(re.findall(r"^[^\t\n]*\t(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M))

    def total(prefix: str) -> int:
        return sum(v for k, v in ops.items() if k == prefix or k.startswith(prefix + "."))

    # How B's tile is laid out in shared memory: the layout of the buffer the dot reads B from.
    aliases = dict(re.findall(r"^(#shared\d*) = #ttg\.(.*)$", ttgir, re.M))
    loads = re.findall(r"ttg\.local_load %\S+(?: token %\S+)? : !ttg\.memdesc<[^,]*, (#shared\d*)[^>]*> -> tensor<[^,]*, ([^\n]*)", ttgir)
    b_alias, note = None, ""
    for alias, result in loads:
        if "opIdx = 1" in result:
            b_alias = alias
    if b_alias is None:
        for alias, result in loads:
            if "opIdx = 0" not in result:  # B is read into registers and transposed there
                b_alias, note = alias, " (then transposed in registers)"
    if b_alias is None:  # wgmma reads B straight from shared memory: its second operand
        m = re.search(r"ttng\.warp_group_dot %\S+, %\S+, .* \* !ttg\.memdesc<[^,]*, (#shared\d*)", ttgir)
        b_alias = m.group(1) if m else None
    b_layout = re.sub(r"\s+", " ", aliases.get(b_alias, "?")).replace("{", "").replace("}", "") + note

    return {
        "kernel": kernel, "dtype": dtype, "precision": precision, "block": block,
        "triton": triton.__version__, "arch": f"sm_{arch}a" if arch == 90 else f"sm_{arch}",
        "HGMMA (wgmma)": total("HGMMA"),
        "HMMA (mma.sync)": total("HMMA"),
        "FFMA (CUDA cores)": total("FFMA"),
        "LDGSTS 16 B": sum(v for k, v in ops.items() if k.startswith("LDGSTS") and k.endswith(".128")),
        "LDGSTS 4 B": sum(v for k, v in ops.items() if k.startswith("LDGSTS") and not k.endswith((".128", ".64"))),
        "LDS (shared loads)": total("LDS"),
        "LDS.128": ops.get("LDS.128", 0),
        "B tile in shared memory": b_layout,
        "layout conversions": ttgir.count("ttg.convert_layout"),
        "shared KiB": ck.metadata.shared // 1024,
    }


def hopper_compile_evidence(cases: Sequence[dict[str, Any]], timeout: float = 300) -> list[dict[str, Any]]:
    """Compile seed kernels for the H200's architecture (sm_90a) on this machine and count what the
    compiler generated. ``cases``: dicts with ``kernel`` ("plain" or "transposed"), ``dtype``,
    ``precision`` ("ieee" or "tf32") and ``block``. Runs in a subprocess (a few seconds a case)."""
    env = dict(os.environ, COURSE_BACKEND="cpu")
    out = subprocess.run([sys.executable, "-c", _EVIDENCE_SCRIPT, json.dumps(list(cases))],
                         capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"compiling for sm_90a failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# =================================================================================================
# 8. Registration
# =================================================================================================
def _per_dtype(fn: Callable, name: str, dtypes: Sequence[str] = COURSE_DTYPES) -> dict[str, Callable]:
    out = {}
    for d in dtypes:
        def gemm(a: object, b: object, _d: str = d) -> object:
            return fn(a, b, _d)

        gemm.__name__ = f"{name}_{d}"
        gemm.__doc__ = f"{fn.__doc__.splitlines()[0]} [{d}]"
        out[d] = gemm
    return out


TRITON_TILED = register(Stage(
    name="triton_tiled", notebook=NOTEBOOK, backend="triton",
    title="Triton tiled (pointers + masks)",
    gemms=_per_dtype(tiled_matmul, "triton_tiled"), order=40,
))
TRITON_TILED_DESCRIPTORS = register(Stage(
    name="triton_tiled_descriptors", notebook=NOTEBOOK, backend="triton",
    title="Triton tiled (tensor descriptors)",
    # check() rounds its shapes up to multiples of 8: 16-byte rows for every course dtype.
    gemms=_per_dtype(tiled_matmul_descriptors, "triton_tiled_descriptors"), shape_multiple=8, order=41,
))
TRITON_TILED_TRANSPOSED_B = register(Stage(
    name="triton_tiled_transposed_b", notebook=NOTEBOOK, backend="triton",
    title="Triton tiled, B pre-transposed (seed experiment)",
    gemms=_per_dtype(tiled_matmul_transposed_b, "triton_tiled_transposed_b"), order=42,
))
TRITON_FAST = register(Stage(
    name="triton_fast", notebook=NOTEBOOK, backend="triton",
    title="Triton fast (grouped, descriptors, tuned)",
    gemms=_per_dtype(fast_matmul_autotuned, "triton_fast"), sweep=True, order=45,
))
