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
  bytes) ``fp8_matmul_tma_kernel`` and ``fp8_blockscaled_tma_kernel``, which read A and W through
  tensor descriptors (TMA).
* The configurations, and the rule that picks one per shape, are in :mod:`.fast_fp8_configs`. The
  wrappers check the operands and choose once per kind of operands (:func:`fp8_plan_key`) and keep
  that as a plan (:class:`Fp8Plan`), which later calls launch into a new C without Triton's JIT.

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

import torch
import triton
import triton.language as tl

from course_lib import backend, features
from course_lib.fp8 import BLOCK_SCALES, Quantized, check_gemm_operands, fp8_plan_key
from course_lib.gemm import LaunchPlans, new_output
from course_lib.kernels.coalescing_and_triton.common import descriptor_problem, require_32bit_offsets
from course_lib.kernels.coalescing_and_triton.fast import grouped_tile
from course_lib.kernels.coalescing_and_triton.fast_configs import persistent_programs
from course_lib.kernels.coalescing_and_triton.fast_fp8_configs import Fp8Config, fp8_blockscaled_config, fp8_config
from course_lib.kernels.coalescing_and_triton.fast_launch import KernelLaunch, tensor_descriptors

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
    # Tensor descriptors (made on the host: Fp8Plan) of A (M x K) and W (N x K) in e4m3, in
    # BLOCK_M x BLOCK_K and BLOCK_N x BLOCK_K boxes, and of C (M x N) in bf16, in BLOCK_M x BLOCK_N boxes
    a_desc, w_desc, c_desc,
    # Pointers to the scales (fp32): of A's rows, of W's rows (= C's columns)
    scale_a_ptr, scale_w_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides of the scales (1 per row, 0 per tensor)
    stride_sa, stride_sw,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    MAX_IMPRECISE_ACC: tl.constexpr, ROUND_BF16_BY_HAND: tl.constexpr, PERSISTENT: tl.constexpr = False,
):
    """fp8_matmul_kernel with A and W read through tensor descriptors (TMA on Hopper): one copy per
    tile and K-slice, the edges zero-filled by the copy engine instead of masks; C stored through
    one too (clipped at C's edges). The descriptors arrive as arguments, as :mod:`.fast`'s do (made
    in the kernel, they cost every program three round trips before its first load). ``PERSISTENT``:
    one program per SM walks tiles pid, pid + P, pid + 2P, ... of the grouped order (P programs), the
    tile loop and the K loop made one (flatten=True), so that the next tile's loads can start while
    this one is stored, as in :func:`.fast.persistent_matmul_kernel`; otherwise one program per tile."""
    if PERSISTENT:
        num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):
            fp8_tma_tile(tile, a_desc, w_desc, c_desc, scale_a_ptr, scale_w_ptr, M, N, K, stride_sa, stride_sw,
                          BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, MAX_IMPRECISE_ACC, ROUND_BF16_BY_HAND)
    else:
        fp8_tma_tile(tl.program_id(0), a_desc, w_desc, c_desc, scale_a_ptr, scale_w_ptr, M, N, K, stride_sa,
                      stride_sw, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, MAX_IMPRECISE_ACC, ROUND_BF16_BY_HAND)


@triton.jit
def fp8_tma_tile(tile, a_desc, w_desc, c_desc, scale_a_ptr, scale_w_ptr, M, N, K, stride_sa, stride_sw,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  MAX_IMPRECISE_ACC: tl.constexpr, ROUND_BF16_BY_HAND: tl.constexpr):
    """fp8_matmul_tma_kernel's work for one tile of C, the ``tile``-th in grouped order."""
    # ---- which tile ---------------------------------------------------------------------------------
    pid_m, pid_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
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
    sa_ptrs = scale_a_ptr + rows * stride_sam  # where each row's scales start

    # ---- mainloop: one block of scales per K-slice -------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (ks[None, :] < K - kb * BLOCK_K), other=0.0)
        w = tl.load(w_ptrs, mask=(cols[:, None] < N) & (ks[None, :] < K - kb * BLOCK_K), other=0.0)
        part = tl.dot(a, tl.trans(w))                                    # this K-slice alone, fp32
        sa = tl.load(sa_ptrs + kb, mask=rows < M, other=0.0)
        acc += part * sa[:, None] * block_scales_of_w(scale_w_ptr, stride_swn, kb, pid_n * BLOCK_N, N, BLOCK_N)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    # ---- epilogue -----------------------------------------------------------------------------------
    c = round_to_bf16(acc) if ROUND_BF16_BY_HAND else acc.to(tl.bfloat16)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def block_scales_of_w(scale_w_ptr, stride_swn, kb, col0, N, BLOCK_N: tl.constexpr):
    """W's scales of K-block ``kb`` for the tile whose first column is ``col0``, as a row (1 x BLOCK_N)
    to multiply the tile by. A tile at most 128 wide lies in one block row of W (its first column is
    a multiple of its width, which divides 128): then one scale serves the whole tile, one load."""
    if BLOCK_N <= 128:
        sw = tl.load(scale_w_ptr + (col0 // 128) * stride_swn + kb)
    else:
        cols = col0 + tl.arange(0, BLOCK_N)
        sw = tl.load(scale_w_ptr + (cols // 128) * stride_swn + kb, mask=cols < N, other=0.0)[None, :]
    return sw


@triton.jit
def fp8_blockscaled_tma_kernel(
    # Tensor descriptors (made on the host: Fp8Plan) of A and W in e4m3 and of C in bf16, as
    # fp8_matmul_tma_kernel takes them
    a_desc, w_desc, c_desc,
    # Pointers to the scales (fp32, row-major): A's M x KB, W's ceil(N / 128) x KB
    scale_a_ptr, scale_w_ptr,
    # Matrix dimensions
    M, N, K,
    # Strides: rows of the two scale matrices
    stride_sam, stride_swn,
    # Meta-parameters (BLOCK_K is the scales' block along K: 128)
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ROUND_BF16_BY_HAND: tl.constexpr, PERSISTENT: tl.constexpr = False,
):
    """fp8_blockscaled_kernel with A and W read, and C written, through tensor descriptors (TMA on
    Hopper), as fp8_matmul_tma_kernel reads them (and, ``PERSISTENT``, walks the tiles as it
    does); the scales through pointers."""
    if PERSISTENT:
        num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):
            blockscaled_tma_tile(tile, a_desc, w_desc, c_desc, scale_a_ptr, scale_w_ptr, M, N, K, stride_sam,
                                  stride_swn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, ROUND_BF16_BY_HAND)
    else:
        blockscaled_tma_tile(tl.program_id(0), a_desc, w_desc, c_desc, scale_a_ptr, scale_w_ptr, M, N, K,
                              stride_sam, stride_swn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, ROUND_BF16_BY_HAND)


@triton.jit
def blockscaled_tma_tile(tile, a_desc, w_desc, c_desc, scale_a_ptr, scale_w_ptr, M, N, K, stride_sam, stride_swn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                          ROUND_BF16_BY_HAND: tl.constexpr):
    """fp8_blockscaled_tma_kernel's work for one tile of C, the ``tile``-th in grouped order."""
    pid_m, pid_n = grouped_tile(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0, col0 = pid_m * BLOCK_M, pid_n * BLOCK_N
    rows = row0 + tl.arange(0, BLOCK_M)
    sa_ptrs = scale_a_ptr + rows * stride_sam

    # ---- mainloop: one block of scales per K-slice -------------------------------------------------
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([row0, kb * BLOCK_K])
        w = w_desc.load([col0, kb * BLOCK_K])
        part = tl.dot(a, w.T)
        sa = tl.load(sa_ptrs + kb, mask=rows < M, other=0.0)
        acc += part * sa[:, None] * block_scales_of_w(scale_w_ptr, stride_swn, kb, col0, N, BLOCK_N)

    # ---- epilogue -----------------------------------------------------------------------------------
    c = round_to_bf16(acc) if ROUND_BF16_BY_HAND else acc.to(tl.bfloat16)
    c_desc.store([row0, col0], c)


# ---- the launch plans: check and decide once per key of operands, then only launch ------------------
class Fp8Plan:
    """One FP8 kernel and configuration, decided for operands of one key (:func:`fp8_plan_key`) and
    launched into ``c``; ``plan(qa, qw)`` launches it again, into a new C, on operands of that key.

    Decided once: the kernel, its grid (one program per tile; with the constexpr ``PERSISTENT``, one
    per SM), and every argument but the tensors (sizes, strides, constexprs), launched again without
    Triton's JIT on a GPU (:class:`.fast_launch.KernelLaunch`). ``descriptors``: the kernel takes A, W
    and C as tensor descriptors, made for the first launch; later launches pass the tensors, which
    :class:`.fast_launch.KernelLaunch` describes alike (the key holds what the descriptors' checks read).
    ``rest`` is the kernel's arguments after the five tensors, where "sa rows" and "sw rows" stand for
    the row strides of the scales as the kernel gets them. Scales that are fp32 and contiguous go to
    the kernel as they are; others are converted on every call (their values may change between
    calls; their dtype and layout, which the key holds, do not). ``flatten``: one scale per tensor or
    per row, which the kernel reads as a flat list.
    """

    def __init__(self, kernel, qa: Quantized, qw: Quantized, c: torch.Tensor, rest: tuple, cfg: Fp8Config,
                 flatten: bool, descriptors: bool, **constexprs) -> None:
        self.M, self.N, self.device, self.cfg, self.flatten = c.shape[0], c.shape[1], c.device, cfg, flatten
        self.boxes = (([cfg.block_m, cfg.block_k], [cfg.block_n, cfg.block_k], [cfg.block_m, cfg.block_n])
                      if descriptors else None)
        self.convert_a, self.convert_w = (not (q.scales.dtype == torch.float32 and q.scales.is_contiguous())
                                          for q in (qa, qw))
        tiles = triton.cdiv(self.M, cfg.block_m) * triton.cdiv(self.N, cfg.block_n)
        if constexprs.get("PERSISTENT"):  # one program per SM (on the CPU: as the bf16 kernels' persistent launch)
            grid = (min(tiles, persistent_programs()),)
        else:
            grid = (tiles,)
        meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, **constexprs,
                    ROUND_BF16_BY_HAND=not backend.get().is_gpu, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        sa, sw = self.scales(qa, qw)
        strides = {"sa rows": sa.stride(0), "sw rows": sw.stride(0)}
        rest = tuple(strides[r] if isinstance(r, str) else r for r in rest)
        matrices = (qa.values, qw.values, c)
        if self.boxes is not None:  # the first launch's descriptors
            matrices = tensor_descriptors(matrices, self.boxes)
        self.kernel = KernelLaunch(kernel, grid, (*matrices, sa, sw), rest, meta)

    def fp32(self, s: torch.Tensor) -> torch.Tensor:
        return (s.reshape(-1) if self.flatten else s).to(torch.float32).contiguous()

    def scales(self, qa: Quantized, qw: Quantized) -> tuple[torch.Tensor, torch.Tensor]:
        """The operands' scales as the kernel reads them: fp32, one after another (a contiguous fp32
        tensor is that already)."""
        sa, sw = qa.scales, qw.scales
        return (self.fp32(sa) if self.convert_a else sa), (self.fp32(sw) if self.convert_w else sw)

    def __call__(self, qa: Quantized, qw: Quantized) -> torch.Tensor:
        c = new_output(self.M, self.N, torch.bfloat16, self.device)
        self.kernel.launch(qa.values, qw.values, c, *self.scales(qa, qw))
        return c


def _planned(plans: LaunchPlans, checked, qa: object, qw: object, config: Fp8Config | None) -> torch.Tensor:
    """``plans``' plan for these operands launched into a new C; the first call with their key takes
    the ``checked`` path, which checks, decides, launches and returns (C, plan). A call that raises
    keeps no plan."""
    if config is not None and type(config) is not Fp8Config:
        raise TypeError(f"{STAGE}: config must be an Fp8Config, or None for the rule's choice; "
                        f"not {type(config).__name__}")
    key = fp8_plan_key(qa, qw, config)
    plan = plans.get(key)
    if plan is not None:  # operands like these passed every check of the checked path
        return plan(qa, qw)
    c, plan = checked(qa, qw, config)
    plans.keep(key, plan)
    return c


def _require_fp8_tensor_cores() -> None:
    # Triton's CUDA backend compiles e4m3 dots for sm_89 and newer (its supported_fp8_dtypes).
    why = features.why_not_here(f"stage '{STAGE}'", (features.FP8_TENSOR_CORES,))
    if why is not None:
        raise features.NotOnThisGPU(why)


def _fitted(make, cfg: Fp8Config, given: bool) -> Fp8Plan:
    """``make(cfg)``: the plan, launched once. The rule's configurations were measured on Hopper, where
    a block may have 227 KB of shared memory; an L4, an RTX 40 or 50 card has 99 KB, and Triton refuses
    a pipeline that does not fit (OutOfResources, before anything runs). The rule's choice then loses a
    stage at a time until it fits (2 at least); a configuration the caller gave is launched as given."""
    while True:
        try:
            return make(cfg)
        except triton.runtime.errors.OutOfResources:
            if given or cfg.num_stages <= 2:
                raise
            cfg = dataclasses.replace(cfg, num_stages=cfg.num_stages - 1)


def _descriptors_fit(qa: Quantized, qw: Quantized, c: torch.Tensor) -> bool:
    return all(descriptor_problem(t, n) is None for t, n in ((qa.values, "A"), (qw.values, "W"), (c, "C")))


# ---- the wrappers: check the operands, allocate C, launch ----------------------------------------
def _checked_scales(qa: object, qw: object, config: Fp8Config | None) -> tuple[torch.Tensor, Fp8Plan]:
    """fp8_matmul's checked path: check, choose the configuration and the kernel, launch."""
    M, N, K, rows_a, rows_w = check_gemm_operands(qa, qw, STAGE)
    _require_fp8_tensor_cores()
    c = new_output(M, N, torch.bfloat16, qa.values.device)
    require_32bit_offsets(STAGE, qa.values, qw.values, c)
    # The scales' strides last: 1 for one per row, 0 for one per tensor (a row that every row shares).
    def make(cfg: Fp8Config) -> Fp8Plan:
        acc = dict(MAX_IMPRECISE_ACC=cfg.max_num_imprecise_acc)
        if cfg.descriptors and _descriptors_fit(qa, qw, c):
            rest = (M, N, K, int(rows_a), int(rows_w))
            return Fp8Plan(fp8_matmul_tma_kernel, qa, qw, c, rest, cfg, True, True, **acc, PERSISTENT=cfg.persistent)
        rest = (M, N, K, qa.values.stride(0), qw.values.stride(0), c.stride(0), c.stride(1), int(rows_a), int(rows_w))
        return Fp8Plan(fp8_matmul_kernel, qa, qw, c, rest, cfg, True, False, **acc)

    return c, _fitted(make, config or fp8_config(M, N, K), config is not None)


def _checked_blocks(qa: object, qw: object, config: Fp8Config | None) -> tuple[torch.Tensor, Fp8Plan]:
    """fp8_matmul_blockscaled's checked path."""
    M, N, K, _, _ = check_gemm_operands(qa, qw, STAGE, blocks=True)
    _require_fp8_tensor_cores()
    if config is not None and config.block_k != 128:
        raise ValueError(f"{STAGE}: block scales cover 128 of K, so BLOCK_K must be 128, not {config.block_k}")
    c = new_output(M, N, torch.bfloat16, qa.values.device)
    require_32bit_offsets(STAGE, qa.values, qw.values, c)

    def make(cfg: Fp8Config) -> Fp8Plan:
        if cfg.descriptors and _descriptors_fit(qa, qw, c):
            rest = (M, N, K, "sa rows", "sw rows")
            return Fp8Plan(fp8_blockscaled_tma_kernel, qa, qw, c, rest, cfg, False, True, PERSISTENT=cfg.persistent)
        rest = (M, N, K, qa.values.stride(0), qw.values.stride(0), c.stride(0), c.stride(1), "sa rows", "sw rows")
        return Fp8Plan(fp8_blockscaled_kernel, qa, qw, c, rest, cfg, False, False)

    return c, _fitted(make, config or fp8_blockscaled_config(M, N, K), config is not None)


def _checked_either(qa: object, qw: object, config: None) -> tuple[torch.Tensor, Fp8Plan]:
    """triton_fp8's checked path: the block-scaled kernel for DeepSeek-V3's blocks, else fp8_matmul's."""
    if isinstance(qa, Quantized) and isinstance(qw, Quantized) and (tuple(qa.block), tuple(qw.block)) == BLOCK_SCALES:
        return _checked_blocks(qa, qw, config)
    return _checked_scales(qa, qw, config)


def fp8_matmul(qa: Quantized, qw: Quantized, config: Fp8Config | None = None) -> torch.Tensor:
    """C = A @ W^T (M x N, bf16) from A = ``qa`` (M x K) and W = ``qw`` (N x K, the weight of
    nn.Linear), each e4m3 with one scale per tensor or per row; ``config``: :func:`fp8_config`'s
    choice when None.

    The first call with operands of a key (:func:`fp8_plan_key`, ``config`` included) checks them,
    chooses and launches; later calls with that key launch its plan into a new C (:class:`Fp8Plan`)."""
    return _planned(_SCALES_PLANS, _checked_scales, qa, qw, config)


def fp8_matmul_blockscaled(qa: Quantized, qw: Quantized, config: Fp8Config | None = None) -> torch.Tensor:
    """C = A @ W^T (M x N, bf16) from A = ``qa`` in 1 x 128 blocks and W = ``qw`` in 128 x 128 blocks
    (each e4m3, one fp32 scale per block); ``config``: :func:`fp8_blockscaled_config`'s choice when
    None, else its BLOCK_K must be 128, the blocks' length. Planned per key as :func:`fp8_matmul`."""
    return _planned(_BLOCK_PLANS, _checked_blocks, qa, qw, config)


def triton_fp8(qa: Quantized, qw: Quantized) -> torch.Tensor:
    """The course's Triton FP8 GEMM as the manifest lists it: :func:`fp8_matmul_blockscaled` for
    DeepSeek-V3's block scales (A per 1 x 128, W per 128 x 128), :func:`fp8_matmul` for one scale per
    tensor or per row; each with its default configuration, planned per key."""
    return _planned(_EITHER_PLANS, _checked_either, qa, qw, None)


# Each wrapper's plans (course_lib.gemm.LaunchPlans: dropped when the backend changes), also the
# wrapper's attribute ``plans``.
_SCALES_PLANS, _BLOCK_PLANS, _EITHER_PLANS = LaunchPlans(), LaunchPlans(), LaunchPlans()
fp8_matmul.plans, fp8_matmul_blockscaled.plans, triton_fp8.plans = _SCALES_PLANS, _BLOCK_PLANS, _EITHER_PLANS
