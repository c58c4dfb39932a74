"""The tiled GEMM in Triton (stages ``triton_tiled`` and ``triton_tiled_descriptors``).

One program per BLOCK_M x BLOCK_N tile of C, a loop over K, ``tl.dot``. The first kernel reads and
writes through pointers, every load and store guarded by a mask (no ``% M`` wrap-around); the second
through tensor descriptors, which handle the edges themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

from course_lib import dtypes
from course_lib.gemm import Operands, new_output, prepare
from course_lib.kernels.coalescing_and_triton.common import (
    descriptor_problem,
    ensure_allocator,
    interpretable,
    require_32bit_offsets,
)


@triton.jit
def matmul_tile_masked(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    pid_m, pid_n,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, INPUT_PRECISION: tl.constexpr,
):
    """Compute tile (pid_m, pid_n) of C = A @ B and store it: pointers, masks at every edge."""
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
    # One program per tile of C, on a 2-D grid of ceil(M / BLOCK_M) x ceil(N / BLOCK_N) programs.
    matmul_tile_masked(a_ptr, b_ptr, c_ptr, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       tl.program_id(0), tl.program_id(1), BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)


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


def launch_tiled_matmul(ops: Operands, dtype: str, cfg: TileConfig, stage: str):
    """Allocate C and launch :func:`tiled_matmul_kernel`; returns (C, compiled kernel or None)."""
    c = new_output(ops.M, ops.N, dtypes.get(dtype).torch_dtype, ops.a.device)
    require_32bit_offsets(stage, ops.a, ops.b, c)
    grid = (triton.cdiv(ops.M, cfg.block_m), triton.cdiv(ops.N, cfg.block_n))
    a, b = interpretable(ops.a), interpretable(ops.b)
    compiled = tiled_matmul_kernel[grid](
        a, b, c, ops.M, ops.N, ops.K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        INPUT_PRECISION=dtypes.get(dtype).triton_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c, compiled


def tiled_matmul(a: object, b: object, dtype: str = "fp32", config: TileConfig = TILED_CONFIG) -> object:
    """C = A @ B with :func:`tiled_matmul_kernel` (stage ``triton_tiled``); any strides."""
    ops = prepare(a, b, stage="triton_tiled", dtypes=(dtype,))
    c, _ = launch_tiled_matmul(ops, dtype, config, "triton_tiled")
    return ops.give_back(c)


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


def tiled_matmul_descriptors(a: object, b: object, dtype: str = "fp32", config: TileConfig = TILED_CONFIG) -> object:
    """C = A @ B with :func:`tiled_matmul_descriptor_kernel` (stage ``triton_tiled_descriptors``).

    Raises ``ValueError`` naming the matrix and the rule when an operand (or C, whose row stride
    is N) breaks a tensor descriptor's alignment rules.
    """
    stage = "triton_tiled_descriptors"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, dtypes.get(dtype).torch_dtype, ops.a.device)
    for t, name in ((ops.a, "a"), (ops.b, "b"), (c, "the output c (N columns)")):
        problem = descriptor_problem(t, name)
        if problem:
            raise ValueError(f"{stage}: {problem}")
    require_32bit_offsets(stage, ops.a, ops.b, c)
    ensure_allocator()
    grid = (triton.cdiv(ops.M, config.block_m), triton.cdiv(ops.N, config.block_n))
    a, b = interpretable(ops.a), interpretable(ops.b)
    tiled_matmul_descriptor_kernel[grid](
        a, b, c, ops.M, ops.N, ops.K, a.stride(0), b.stride(0), c.stride(0),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        INPUT_PRECISION=dtypes.get(dtype).triton_precision, num_warps=config.num_warps, num_stages=config.num_stages,
    )
    return ops.give_back(c)
