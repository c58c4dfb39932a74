"""The Russian article's experiment: "transpose Y so its loads coalesce" (stage
``triton_tiled_transposed_b``), its runner, and a model of the shared-memory loads it causes.

The article multiplies X (8192 x 6144) by Y (6144 x 4096) in fp32 with one BLOCK_SIZE for the tile's
three sides, then stores Y^T and turns each block back with ``tl.trans`` before ``tl.dot``; on a T4
that made the kernel half as fast. Here B is the article's Y.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course_lib import dtypes
from course_lib.gemm import Operands, new_output, prepare
from course_lib.kernels.coalescing_and_triton.common import interpretable, require_32bit_offsets
from course_lib.kernels.coalescing_and_triton.tiled import TILED_CONFIG, TileConfig, launch_tiled_matmul


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


def launch_transposed_b(ops: Operands, bt: torch.Tensor, dtype: str, cfg: TileConfig, stage: str):
    c = new_output(ops.M, ops.N, dtypes.get(dtype).torch_dtype, ops.a.device)
    require_32bit_offsets(stage, ops.a, bt, c)
    grid = (triton.cdiv(ops.M, cfg.block_m), triton.cdiv(ops.N, cfg.block_n))
    a, bt = interpretable(ops.a), interpretable(bt)
    compiled = tiled_matmul_transposed_b_kernel[grid](
        a, bt, c, ops.M, ops.N, ops.K,
        a.stride(0), a.stride(1), bt.stride(0), bt.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        INPUT_PRECISION=dtypes.get(dtype).triton_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c, compiled


def tiled_matmul_transposed_b(a: object, b: object, dtype: str = "fp32", config: TileConfig = TILED_CONFIG) -> object:
    """C = A @ B reading B as B^T (stage ``triton_tiled_transposed_b``).

    Like the article's wrapper, the copy ``b.T.contiguous()`` happens inside the call, so a timing of
    this function includes it.
    """
    stage = "triton_tiled_transposed_b"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c, _ = launch_transposed_b(ops, ops.b.T.contiguous(), dtype, config, stage)
    return ops.give_back(c)


# The article's setting: X (8192 x 6144) @ Y (6144 x 4096), fp32, one BLOCK_SIZE for the tile's
# three sides, Triton's default num_warps / num_stages, a 2-D grid over the tiles of Z.
ARTICLE_SHAPE = (8192, 4096, 6144)  # (M, N, K) in the course's naming: a is M x K, b is K x N
ARTICLE_BLOCK_SIZES = (32, 64)


def article_experiment_gemm(
    x: object, y: object, *, block_size: int = 64, input_precision: str = "ieee", transposed_y: bool = False
) -> object:
    """Z = X @ Y as in the article's experiment: ``transposed_y`` copies Y^T first (inside the call)
    and uses :func:`tiled_matmul_transposed_b_kernel`; otherwise the plain tiled kernel."""
    dtype = {"ieee": "fp32", "tf32": "tf32"}[input_precision]
    cfg = TileConfig(block_size, block_size, block_size)
    stage = "article experiment"
    ops = prepare(x, y, stage=stage, dtypes=(dtype,))
    if transposed_y:
        c, _ = launch_transposed_b(ops, ops.b.T.contiguous(), dtype, cfg, stage)
    else:
        c, _ = launch_tiled_matmul(ops, dtype, cfg, stage)
    return ops.give_back(c)


def article_b_tile_addresses(variant: str, pitch: int = 64, per_thread: int = 4, threads_along_n: int = 16,
                             k: int = 0, j: int = 0, swizzle: bool = False) -> tuple[list[int], int]:
    """Byte address of each lane, and bytes per lane, of one shared-memory load of B's tile by the
    FMA code (``input_precision="ieee"``) of the article's two kernels.

    A model read off the TTGIR for BLOCK_SIZE 64 (notebooks/deep_dives/triton_lab.ipynb (section 6) says it in words; deep_dives/triton_lab prints it): the dot's layout gives each
    thread ``per_thread`` neighbouring columns n of B (lane t < 16 owns n = 4 t .. 4 t + 3; lanes
    16-31 repeat lanes 0-15), and the tile sits in shared memory unswizzled (``maxPhase = 1``), one
    stored row every ``pitch`` 4-byte words (``pitch`` = BLOCK_SIZE; more if the rows were padded).
    Each thread loads ``per_thread`` consecutive words, the widest load its data allows:

    * "plain": B's tile is stored row by row (n fastest), so a thread's 4 columns at one k are 4
      neighbouring words: lane t reads words k * pitch + 4 t .. + 3;
    * "transposed": B^T's tile is stored column of B by column (k fastest), so the 4 neighbouring words
      are 4 values of k in one column n = 4 t + j: lane t reads words (4 t + j) * pitch + k .. + 3.

    A load of ``per_thread`` words needs an address that is a multiple of its width, in every stored
    row: a ``pitch`` that is not a multiple of ``per_thread`` words is refused. ``swizzle`` (transposed
    only): the ``per_thread``-word chunks of stored row n are permuted, chunk c stored at c XOR
    ((n // per_thread) mod 8), so the columns of neighbouring lanes start in different banks.
    """
    if variant not in ("plain", "transposed"):
        raise ValueError("variant is 'plain' or 'transposed'")
    if pitch % per_thread:
        raise ValueError(f"{per_thread}-word loads need every stored row to start {4 * per_thread}-byte aligned: "
                         f"a pitch of {pitch} words is not a multiple of {per_thread} (the compiler would fall back "
                         "to 4-byte loads, one per word)")
    if swizzle and variant != "transposed":
        raise ValueError("the swizzle here is for the transposed tile")
    word = 4  # fp32
    addrs = []
    for lane in range(32):
        t = lane % threads_along_n
        if variant == "plain":
            w = k * pitch + per_thread * t
        else:
            n = per_thread * t + j
            chunk = k // per_thread
            if swizzle:
                chunk ^= (n // per_thread) % 8
            w = n * pitch + chunk * per_thread + k % per_thread
        addrs.append(w * word)
    return addrs, per_thread * word
