"""A Triton GEMM in FP8: C = (A @ W^T) * scale_a[m] * scale_w[n], e4m3 operands, bf16 output.

A (M x K) holds activations and W (N x K) the weight of ``torch.nn.Linear``, both e4m3 and both
row-major: K-major, the only layout Hopper's FP8 tensor-core instruction (wgmma) reads for both
operands (16-bit types may be transposed in shared memory, 8-bit ones may not). ``y = x @ W^T`` thus
needs no copy of the weight.

* Scales: one per tensor or one per row of each operand (:func:`course_lib.fp8.quantize`, scalings
  "tensor" and "row"). A scale that is the same for every k factors out of the sum over k,
  sum_k (sa_m a_mk)(sw_n w_nk) = sa_m sw_n sum_k a_mk w_nk, so the kernel applies both once per tile,
  to the fp32 sums. Block scales (1 x 128 of A, 128 x 128 of W) change along K and are applied to
  each K-slice's partial sum inside the loop: :func:`fp8_matmul_blockscaled` (``fp8_blockscaled_kernel``).
* The accumulator: fp32 in registers. On Hopper the tensor core adds FP8 products with a narrow adder
  (about 14 bits; :func:`course_lib.model.fp8_accumulator.limited_sum_matmul` models it); by default the kernel adds its
  partial sum into the fp32 accumulator once per BLOCK_K slice (Triton's ``max_num_imprecise_acc``),
  as cuBLAS does without fast accumulation. ``Fp8Config.fast_accumulation`` leaves Triton's default
  for FP8 on Hopper instead: the tensor core's accumulator runs over the whole of K.
* One program per tile, in grouped order (:func:`fast.grouped_tile`); pointer loads with masks at
  every edge, K's tail included, or (``Fp8Config.descriptors``, where every row is a multiple of 16
  bytes) ``fp8_matmul_tma_kernel``, which reads A and W through tensor descriptors (TMA).

On a GPU the kernel needs compute capability 8.9 or newer (Triton compiles e4m3 ``tl.dot`` for
sm_89 and later: ``mma`` on Ada, ``wgmma`` on Hopper). On the CPU backend it runs, unchanged, in
Triton's interpreter (3.7.1), which loads float8 tensors as raw bytes and, in ``tl.dot``, converts
e4m3 operands to fp16 - exactly for every finite e4m3 value (a test reads all 254; the NaN
pattern 0x7f becomes 480, which :func:`~course_lib.fp8.quantize` never produces) - and multiplies
them with NumPy in fp32: the same exact products, summed in fp32 (in NumPy's order), without the
narrow adder (``max_num_imprecise_acc`` is ignored there). What the interpreter does differently is
the last step: it converts fp32 to bf16 by dropping the low 16 bits (toward zero: twice the error of
a GPU's rounding, even with ``fp_downcast_rounding="rtne"``), so on the interpreter the kernel rounds
to nearest even itself (``ROUND_BF16_BY_HAND``), as a GPU's conversion does.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from course_lib import backend, features
from course_lib.fp8 import BLOCK_SCALES, Quantized, check_gemm_operands
from course_lib.gemm import new_output
from course_lib.kernels.coalescing_and_triton.common import descriptor_problem, ensure_allocator, require_32bit_offsets
from course_lib.kernels.coalescing_and_triton.fast import grouped_tile
from course_lib.model.hardware import device_sms

STAGE = "fp8_matmul"


@triton.jit
def round_to_bf16(x):
    """fp32 ``x`` rounded to the nearest bf16, ties to even, by integer arithmetic on its bits: add
    just under half of the 16 bits that go (one more when the bit kept last is odd), then drop them.
    For finite x only, which a sum of finite products times finite scales is."""
    bits = x.to(tl.uint32, bitcast=True)
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)


@triton.jit
def fp8_matmul_kernel(
    # Pointers to matrices: A (M x K) and W (N x K) in e4m3, each K-major; C (M x N) in bf16
    a_ptr, w_ptr, c_ptr,
    # Pointers to the scales (fp32): of A's rows, of W's rows (= C's columns)
    scale_a_ptr, scale_w_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides: rows of A, W and C, columns of C (K is contiguous in A and W: the wrapper checks);
    # of the scales: 1 for one per row, 0 for one per tensor
    stride_am, stride_wn, stride_cm, stride_cn, stride_sa, stride_sw,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    MAX_IMPRECISE_ACC: tl.constexpr, ROUND_BF16_BY_HAND: tl.constexpr,
):
    # ---- which tile: one program per tile, on a 1-D grid in grouped order ------------------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # rows of A and of C
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # rows of W, columns of C
    ks = tl.arange(0, BLOCK_K)

    # ---- pointers to the first K-slice: BLOCK_M x BLOCK_K of A, BLOCK_N x BLOCK_K of W -----------
    # Both tiles run along K in memory, as the FP8 tensor-core instruction reads them.
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :]
    w_ptrs = w_ptr + cols[:, None] * stride_wn + ks[None, :]

    # ---- mainloop: walk along K, accumulating in fp32 --------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # Past the edges of A and W the masks give zeros, which add nothing.
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - k0), other=0.0)
        w = tl.load(w_ptrs, mask=(cols[:, None] < N) & (ks[None, :] < K - k0), other=0.0)
        # W's tile seen as BLOCK_K x BLOCK_N: a K-major B operand, no data moved.
        acc = tl.dot(a, tl.trans(w), acc, max_num_imprecise_acc=MAX_IMPRECISE_ACC)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    # ---- epilogue: both scales, once per tile; round to bf16 and store -----------------------------
    # A scale per tensor is read as a scale per row that every row shares (stride 0): one path in
    # the kernel and in the wrapper, for a load of BLOCK_M + BLOCK_N floats per tile, nothing
    # beside the K loop.
    sa = tl.load(scale_a_ptr + rows * stride_sa, mask=rows < M, other=0.0)
    sw = tl.load(scale_w_ptr + cols * stride_sw, mask=cols < N, other=0.0)
    c = acc * sa[:, None] * sw[None, :]
    if ROUND_BF16_BY_HAND:  # the interpreter: its own conversion drops the low bits
        c = round_to_bf16(c)
    else:
        c = c.to(tl.bfloat16)
    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def fp8_matmul_tma_kernel(
    # Pointers to matrices: A (M x K) and W (N x K) in e4m3, each K-major; C (M x N) in bf16
    a_ptr, w_ptr, c_ptr,
    # Pointers to the scales (fp32): of A's rows, of W's rows (= C's columns)
    scale_a_ptr, scale_w_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides: rows of A, W and C; of the scales (1 per row, 0 per tensor)
    stride_am, stride_wn, stride_cm, stride_sa, stride_sw,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    MAX_IMPRECISE_ACC: tl.constexpr, ROUND_BF16_BY_HAND: tl.constexpr,
):
    """fp8_matmul_kernel with A and W read through tensor descriptors (TMA on Hopper): one copy per
    tile and K-slice, the edges zero-filled by the copy engine instead of masks; C stored through
    one too (clipped at C's edges)."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[stride_wn, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])

    # ---- which tile ---------------------------------------------------------------------------------
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0, col0 = pid_m * BLOCK_M, pid_n * BLOCK_N

    # ---- mainloop -----------------------------------------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = a_desc.load([row0, k0])
        w = w_desc.load([col0, k0])
        acc = tl.dot(a, w.T, acc, max_num_imprecise_acc=MAX_IMPRECISE_ACC)

    # ---- epilogue: the scales, once per tile ------------------------------------------------------
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_N)
    sa = tl.load(scale_a_ptr + rows * stride_sa, mask=rows < M, other=0.0)
    sw = tl.load(scale_w_ptr + cols * stride_sw, mask=cols < N, other=0.0)
    c = acc * sa[:, None] * sw[None, :]
    if ROUND_BF16_BY_HAND:
        c = round_to_bf16(c)
    else:
        c = c.to(tl.bfloat16)
    c_desc.store([row0, col0], c)


@triton.jit
def fp8_blockscaled_kernel(
    # Pointers to matrices: A (M x K) and W (N x K) in e4m3, each K-major; C (M x N) in bf16
    a_ptr, w_ptr, c_ptr,
    # Pointers to the scales (fp32, row-major): A's per 1 x 128 block (M x KB), W's per 128 x 128 block
    # (ceil(N / 128) x KB), KB = ceil(K / 128)
    scale_a_ptr, scale_w_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides: rows of A, W and C, columns of C, rows of the two scale matrices
    stride_am, stride_wn, stride_cm, stride_cn, stride_sam, stride_swn,
    # Meta-parameters (BLOCK_K is the scales' block along K: 128)
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ROUND_BF16_BY_HAND: tl.constexpr,
):
    """C = sum over K-blocks kb of (A_kb @ W_kb^T) * sa[m, kb] * sw[n // 128, kb], in bf16.

    A scale that changes along K cannot wait for the end of the sum: each K-slice of 128 (one block
    of scales) is multiplied by the tensor cores into a fresh fp32 sum, which is scaled and added to
    the accumulator in registers. That is also the promotion of section 3: the tensor core never
    sums more than 128 products."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :]
    w_ptrs = w_ptr + cols[:, None] * stride_wn + ks[None, :]
    # Where each row's and column's scales start: A's row m, W's block row n // 128.
    sa_ptrs = scale_a_ptr + rows * stride_sam
    sw_ptrs = scale_w_ptr + (cols // 128) * stride_swn

    # ---- mainloop: one block of scales per K-slice -------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - kb * BLOCK_K), other=0.0)
        w = tl.load(w_ptrs, mask=(cols[:, None] < N) & (ks[None, :] < K - kb * BLOCK_K), other=0.0)
        part = tl.dot(a, tl.trans(w))                                    # this K-slice alone, fp32
        sa = tl.load(sa_ptrs + kb, mask=rows < M, other=0.0)
        sw = tl.load(sw_ptrs + kb, mask=cols < N, other=0.0)
        acc += part * sa[:, None] * sw[None, :]
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    # ---- epilogue -----------------------------------------------------------------------------------
    c = round_to_bf16(acc) if ROUND_BF16_BY_HAND else acc.to(tl.bfloat16)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@dataclass(frozen=True)
class Fp8Config:
    """One launch configuration of :func:`fp8_matmul_kernel`.

    ``fast_accumulation``: False adds the tensor core's partial sum into the fp32 accumulator once
    per BLOCK_K slice (``max_num_imprecise_acc=BLOCK_K``: at 128, every four 32-deep instructions,
    DeepSeek-V3's interval); True leaves Triton's default for FP8 on Hopper, where the tensor core's
    narrow accumulator runs over the whole of K (cuBLAS's ``use_fast_accum``). Other GPUs and the
    interpreter accumulate in fp32 either way.
    """

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 4
    fast_accumulation: bool = False
    descriptors: bool = False  # fp8_matmul_tma_kernel where the operands allow tensor descriptors

    def __post_init__(self) -> None:
        for name, least in (("block_m", 16), ("block_n", 16), ("block_k", 32)):
            v = getattr(self, name)
            # tl.arange needs powers of two; an FP8 mma is 32 deep in K and at least 16 wide
            if v < least or v & (v - 1):
                raise ValueError(f"Fp8Config: {name} must be a power of two >= {least}, not {v}")
        if self.group_m < 1:
            raise ValueError(f"Fp8Config: group_m is a number of tile rows >= 1, not {self.group_m}")

    @property
    def max_num_imprecise_acc(self) -> int | None:
        """tl.dot's argument: products along K summed by the tensor core before an fp32 add."""
        return None if self.fast_accumulation else self.block_k


def fp8_config(M: int, N: int, K: int, sms: int | None = None) -> Fp8Config:
    """The configuration :func:`fp8_matmul` launches for an M x N x K product on a GPU of ``sms`` SMs
    (default: this GPU's; the recorded H200's on the CPU): the best of a sweep on the H200
    (experiments/gpu_fp8_triton.py; experiments/JOURNAL.md), as a rule:

    * 256 x 128 tiles, BLOCK_K 128, 8 warps, 4 stages, operands through tensor descriptors, where
      they make at least one wave (one tile per SM: 132 on the H200) and K is longer than 1,024:
      915-1046 TFLOP/s at the large shapes of the sweep, 4-8 % above pointer loads. (128 x 256 tiles, the bf16 kernel's, reached
      374-393 with pointer loads: with promoted sums the tile's second accumulator does not fit);
    * 64 x 64 tiles, 4 warps, 4 stages, pointer loads otherwise - decode, and short or few tiles:
      many programs to share the weight's bytes (M = 64 x N = 14336: cuBLAS's 282 TFLOP/s;
      2048 x 2304 x 768: 372).

    BLOCK_K is 128, or K rounded up to a power of two (at least 32) when K is shorter.
    """
    block_k = min(128, max(32, triton.next_power_of_2(K)))
    sms = device_sms() if sms is None else sms
    if M > 64 and K > 1024 and triton.cdiv(M, 256) * triton.cdiv(N, 128) >= sms:
        return Fp8Config(256, 128, block_k, num_warps=8, num_stages=4, descriptors=True)
    return Fp8Config(64, 64, block_k, num_warps=4, num_stages=4)


# ---- the wrapper: check the operands, allocate C, launch -----------------------------------------
def fp8_matmul(qa: Quantized, qw: Quantized, config: Fp8Config | None = None) -> torch.Tensor:
    """C = A @ W^T (M x N, bf16) from A = ``qa`` (M x K) and W = ``qw`` (N x K, the weight of
    nn.Linear), each e4m3 with one scale per tensor or per row; ``config``: :func:`fp8_config`'s
    choice when None."""
    M, N, K, rows_a, rows_w = check_gemm_operands(qa, qw, STAGE)
    # Triton's CUDA backend compiles e4m3 dots for sm_89 and newer (its supported_fp8_dtypes).
    why = features.why_not_here(f"stage '{STAGE}'", (features.FP8_TENSOR_CORES,))
    if why is not None:
        raise features.NotOnThisGPU(why)
    c = new_output(M, N, torch.bfloat16, qa.values.device)
    require_32bit_offsets(STAGE, qa.values, qw.values, c)

    cfg = config or fp8_config(M, N, K)
    # One fp32 scale after another: the kernel steps through them with its own stride (1 or 0).
    sa = qa.scales.reshape(-1).to(torch.float32).contiguous()
    sw = qw.scales.reshape(-1).to(torch.float32).contiguous()
    grid = (triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n),)
    if cfg.descriptors and all(descriptor_problem(t, n) is None for t, n in ((qa.values, "A"), (qw.values, "W"), (c, "C"))):
        ensure_allocator()
        fp8_matmul_tma_kernel[grid](
            qa.values, qw.values, c, sa, sw, M, N, K,
            qa.values.stride(0), qw.values.stride(0), c.stride(0), int(rows_a), int(rows_w),
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
            MAX_IMPRECISE_ACC=cfg.max_num_imprecise_acc, ROUND_BF16_BY_HAND=not backend.get().is_gpu,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
        return c
    fp8_matmul_kernel[grid](
        qa.values, qw.values, c, sa, sw, M, N, K,
        qa.values.stride(0), qw.values.stride(0), c.stride(0), c.stride(1), int(rows_a), int(rows_w),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        MAX_IMPRECISE_ACC=cfg.max_num_imprecise_acc, ROUND_BF16_BY_HAND=not backend.get().is_gpu,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c


def fp8_matmul_blockscaled(qa: Quantized, qw: Quantized, config: Fp8Config | None = None) -> torch.Tensor:
    """C = A @ W^T (M x N, bf16) from A = ``qa`` in 1 x 128 blocks and W = ``qw`` in 128 x 128 blocks
    (each e4m3, one fp32 scale per block); ``config``'s BLOCK_K must be 128, the blocks' length."""
    M, N, K, _, _ = check_gemm_operands(qa, qw, STAGE, blocks=True)
    why = features.why_not_here(f"stage '{STAGE}'", (features.FP8_TENSOR_CORES,))
    if why is not None:
        raise features.NotOnThisGPU(why)
    if config is not None and config.block_k != 128:
        raise ValueError(f"{STAGE}: block scales cover 128 of K, so BLOCK_K must be 128, not {config.block_k}")
    cfg = config or dataclasses.replace(fp8_config(M, N, K), block_k=128)
    c = new_output(M, N, torch.bfloat16, qa.values.device)
    require_32bit_offsets(STAGE, qa.values, qw.values, c)
    sa = qa.scales.to(torch.float32).contiguous()
    sw = qw.scales.to(torch.float32).contiguous()
    grid = (triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n),)
    fp8_blockscaled_kernel[grid](
        qa.values, qw.values, c, sa, sw, M, N, K,
        qa.values.stride(0), qw.values.stride(0), c.stride(0), c.stride(1), sa.stride(0), sw.stride(0),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=128, GROUP_M=cfg.group_m,
        ROUND_BF16_BY_HAND=not backend.get().is_gpu, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return c


def triton_fp8(qa: Quantized, qw: Quantized) -> torch.Tensor:
    """The course's Triton FP8 GEMM as the manifest lists it: :func:`fp8_matmul_blockscaled` for
    DeepSeek-V3's block scales (A per 1 x 128, W per 128 x 128), :func:`fp8_matmul` for one scale per
    tensor or per row; each with its default configuration."""
    if isinstance(qa, Quantized) and isinstance(qw, Quantized) and (tuple(qa.block), tuple(qw.block)) == BLOCK_SCALES:
        return fp8_matmul_blockscaled(qa, qw)
    return fp8_matmul(qa, qw)
