"""Eight-bit floating point: the two formats, scaling into them, and what their sums lose.

Everything here runs on the CPU (torch has the float8 dtypes there): it is the arithmetic a FP8 GEMM
does, written out so that each loss can be measured on its own.

* :data:`FORMATS`: e4m3 (more precision, range +-448) and e5m2 (more range, +-57344), read from
  ``torch.finfo``.
* :func:`quantize`: a tensor divided by a scale and rounded into a format, with one scale per tensor,
  per row, or per block (DeepSeek-V3's recipe: 1 x 128 blocks of activations, 128 x 128 blocks of
  weights); :meth:`Quantized.dequantize` multiplies back. A block may be cut by the matrix's edge:
  every scale covers the elements it has.
* :func:`fp8_inputs`, :func:`cublas_fp8`: an FP8 GEMM takes its operands quantized,
  ``fn(qa, qw) -> C`` (A: M x K; W: N x K, the weight of ``torch.nn.Linear``, both K-major as
  Hopper's FP8 tensor cores want them; C in bf16); cuBLAS's (``torch._scaled_mm``) is the yardstick,
  and ``course_lib.correctness.check_fp8`` compares any such function with the float64 product of
  the dequantized inputs.
* :func:`limited_sum_matmul`: a model of Hopper's tensor core adding FP8 products with a narrow
  adder (14 bits below the largest exponent), with or without promoting the partial sums into fp32
  every few instructions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from course_lib import backend
from course_lib.gemm import relative_error


@dataclass(frozen=True)
class Fp8Format:
    """One eight-bit format: a sign bit, ``exponent_bits`` and ``mantissa_bits``."""

    name: str
    torch_dtype: torch.dtype
    exponent_bits: int
    mantissa_bits: int
    max: float  # the largest finite value
    min_normal: float  # the smallest normal value; below it precision falls off (subnormals)
    min_subnormal: float  # the smallest value above zero

    @property
    def step(self) -> float:
        """The spacing of values just above 1 (2^-mantissa_bits): twice the worst relative rounding error."""
        return 2.0 ** -self.mantissa_bits


def _format(name: str, dtype: torch.dtype, exponent_bits: int) -> Fp8Format:
    info = torch.finfo(dtype)
    mantissa_bits = round(-math.log2(info.eps))
    return Fp8Format(name, dtype, exponent_bits, mantissa_bits, float(info.max), float(info.tiny),
                     float(info.tiny) * float(info.eps))


# "fn": finite - e4m3 gives up infinities (and all but one NaN pattern) to reach 448 instead of 240.
FORMATS = {"e4m3": _format("e4m3", torch.float8_e4m3fn, 4), "e5m2": _format("e5m2", torch.float8_e5m2, 5)}
SCALINGS = ("tensor", "row", "column", "block")


def get_format(fmt: str | Fp8Format) -> Fp8Format:
    if isinstance(fmt, Fp8Format):
        return fmt
    if fmt not in FORMATS:
        raise ValueError(f"unknown FP8 format {fmt!r}: use one of {sorted(FORMATS)}")
    return FORMATS[fmt]


def round_to(x: torch.Tensor, fmt: str | Fp8Format = "e4m3") -> torch.Tensor:
    """``x`` rounded to the nearest value of ``fmt`` (beyond its range: to +-max), in ``x``'s dtype."""
    f = get_format(fmt)
    return x.clamp(-f.max, f.max).to(f.torch_dtype).to(x.dtype)


@dataclass(frozen=True)
class Quantized:
    """A matrix in FP8: ``values`` (``fmt``'s dtype) times ``scales``, one fp32 scale per
    ``block[0] x block[1]`` block (the last row and column of blocks may be cut by the edge)."""

    values: torch.Tensor
    scales: torch.Tensor  # (ceil(rows / block[0]), ceil(cols / block[1])), float32
    block: tuple[int, int]
    fmt: Fp8Format

    def scale_grid(self) -> torch.Tensor:
        """Each element's scale: ``scales`` spread over the blocks, cut to the matrix's shape."""
        return _spread(self.scales, self.block, tuple(self.values.shape))

    def dequantize(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """The matrix this stands for: values times their scales, in ``dtype``."""
        return self.values.to(dtype) * self.scale_grid().to(dtype)

    @property
    def nbytes(self) -> int:
        """Bytes of the values and the scales."""
        return self.values.numel() + 4 * self.scales.numel()


def _spread(scales: torch.Tensor, block: tuple[int, int], shape: tuple[int, int]) -> torch.Tensor:
    grid = scales.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)
    return grid[:shape[0], :shape[1]]


def scaling_block(shape: tuple[int, int], scaling: str, block: tuple[int, int] | None = None) -> tuple[int, int]:
    """The block one scale covers: the whole tensor, a row, a column, or ``block``."""
    rows, cols = shape
    if scaling == "tensor":
        return (rows, cols)
    if scaling == "row":
        return (1, cols)
    if scaling == "column":
        return (rows, 1)
    if scaling == "block":
        if block is None or len(block) != 2 or min(block) < 1:
            raise ValueError(f"block scaling needs block=(rows, cols), both >= 1, e.g. (1, 128) or (128, 128); got {block}")
        return (int(block[0]), int(block[1]))
    raise ValueError(f"unknown scaling {scaling!r}: use one of {SCALINGS}")


def quantize(x: torch.Tensor, fmt: str | Fp8Format = "e4m3", scaling: str = "tensor",
             block: tuple[int, int] | None = None) -> Quantized:
    """``x`` (a 2-D float tensor) in FP8 with one scale per block: each block's largest magnitude
    maps to the format's max, so nothing saturates and the block's large values keep their digits.
    A block of zeros gets scale 1."""
    f = get_format(fmt)
    if x.dim() != 2 or not x.is_floating_point():
        raise ValueError(f"quantize takes a 2-D float tensor; got {tuple(x.shape)} {x.dtype}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("quantize: the tensor holds inf or NaN; no scale can represent it")
    bm, bk = scaling_block(tuple(x.shape), scaling, block)
    rows, cols = x.shape
    br, bc = -(-rows // bm), -(-cols // bk)
    padded = torch.zeros(br * bm, bc * bk, dtype=torch.float64, device=x.device)
    padded[:rows, :cols] = x.double().abs()
    amax = padded.reshape(br, bm, bc, bk).amax(dim=(1, 3))
    scales = torch.where(amax > 0, amax / f.max, torch.ones_like(amax)).float()
    values = (x.double() / _spread(scales, (bm, bk), (rows, cols)).double()).clamp(-f.max, f.max).to(f.torch_dtype)
    return Quantized(values, scales, (bm, bk), f)


# ---- outliers: what one scale per tensor loses -----------------------------------------------------
OUTLIER_CHANNELS = (7, 900, 2100, 3333)


def outlier_activations(factor: float, tokens: int = 64, channels: int = 4096,
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard normal activations (tokens x channels) whose :data:`OUTLIER_CHANNELS` are ``factor``
    times larger, and the mask of the ordinary channels."""
    x = torch.randn(tokens, channels, generator=torch.Generator().manual_seed(seed))
    x[:, list(OUTLIER_CHANNELS)] *= factor
    ordinary = torch.ones(channels, dtype=torch.bool)
    ordinary[list(OUTLIER_CHANNELS)] = False
    return x, ordinary


def outlier_error(factor: float, fmt: str = "e4m3", scaling: str = "tensor",
                  block: tuple[int, int] | None = None) -> float:
    """The relative error of the ordinary channels of :func:`outlier_activations` quantized with
    ``scaling``: what the outliers' share of the scale costs the rest."""
    x, ordinary = outlier_activations(factor)
    return relative_error(quantize(x, fmt, scaling, block).dequantize()[:, ordinary], x[:, ordinary])


# One Hopper FP8 wgmma multiplies K = 32 (tc_hopper.cuh's k16 for 16-bit types: twice as many 8-bit
# elements in the same 32 bytes of a row).
FP8_WGMMA_K = 32
# The bits the model keeps below the largest exponent. DeepSeek-V3's technical report (section 3.3.2)
# gives "around 14 bits" for FP8 GEMM on H800; with 14, this model gives the errors measured on the
# H200 without promotion - cuBLAS's fast accumulation at K = 1,024 and 4,096, the course's Triton
# kernel at K up to 16,384 - to within 5 % (experiments/JOURNAL.md, "cuBLAS in FP8").
ACCUMULATOR_BITS = 14


def aligned_sum(acc: torch.Tensor, products: torch.Tensor, bits: int) -> torch.Tensor:
    """``acc`` plus the sum of ``products`` (M x k x N) over their middle axis, as a tensor core with
    a narrow adder does it: every addend is aligned to the largest exponent among them (the
    accumulator's or a product's) and cut to ``bits`` bits below it, dropping the rest (toward zero)."""
    largest = torch.maximum(acc.abs(), products.abs().amax(dim=1))
    _, exponent = torch.frexp(largest)  # largest < 2^exponent
    grid = torch.ldexp(torch.ones_like(largest), exponent - bits)  # the value of the last bit kept
    kept = torch.trunc(products / grid[:, None, :]) * grid[:, None, :]
    return torch.trunc(acc / grid) * grid + kept.sum(dim=1)


def limited_sum_matmul(a: torch.Tensor, b: torch.Tensor, *, accumulator_bits: int = ACCUMULATOR_BITS,
                       promote_every: int | None = None, k_step: int = FP8_WGMMA_K) -> torch.Tensor:
    """A model of Hopper's FP8 tensor core summing ``a @ b`` (M x K times K x N, float64 result).

    Each ``k_step`` of K is one instruction: its products are added into the accumulator by
    :func:`aligned_sum`, which keeps ``accumulator_bits`` bits below the largest exponent. Without
    promotion the accumulator runs over the whole of K, and as it grows each new product loses more
    of its bits. With ``promote_every = n``, every n instructions the accumulator is added into an
    fp32 sum in registers and restarts from zero (DeepGEMM's two-level accumulation; cuBLAS without
    fast accumulation). A model: the notebook and the JOURNAL compare it with cuBLAS on the H200.
    """
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"limited_sum_matmul takes M x K and K x N matrices; got {tuple(a.shape)} and {tuple(b.shape)}")
    if promote_every is not None and promote_every < 1:
        raise ValueError(f"promote_every must be a number of instructions >= 1, or None; got {promote_every}")
    a64, b64 = a.double(), b.double()
    acc = torch.zeros(a64.shape[0], b64.shape[1], dtype=torch.float64)
    total = torch.zeros_like(acc)
    for i, k0 in enumerate(range(0, a64.shape[1], k_step)):
        acc = aligned_sum(acc, a64[:, k0:k0 + k_step, None] * b64[None, k0:k0 + k_step, :], accumulator_bits)
        if promote_every is not None and (i + 1) % promote_every == 0:
            total = (total + acc).float().double()  # the fp32 register sum
            acc.zero_()
    return total + acc


# ---- FP8 GEMMs: operands and cuBLAS -----------------------------------------------------------------
# How each scaling scales the two operands: A (activations, M x K) and W (weights, N x K). A scale
# that varies along M or N multiplies whole rows or columns of C: the kernel applies it once, after
# the sum. One that varies along K (blocks) multiplies partial sums: the kernel applies it inside
# the loop over K, every 128 elements.
# DeepSeek-V3's blocks: A (activations) per 1 x 128, W (weights) per 128 x 128.
BLOCK_SCALES = ((1, 128), (128, 128))
OPERAND_SCALING = {
    "tensor": (("tensor", None), ("tensor", None)),
    "row": (("row", None), ("row", None)),  # rows of A, rows of W = columns of C
    "block": (("block", BLOCK_SCALES[0]), ("block", BLOCK_SCALES[1])),
}


def fp8_inputs(M: int, N: int, K: int, scaling: str = "tensor", *, seed: int | None = None,
               device: torch.device | str | None = None) -> tuple[Quantized, Quantized]:
    """Standard normal A (M x K) and W (N x K), quantized to e4m3 with ``scaling`` (:data:`OPERAND_SCALING`),
    on the backend's device; a seed gives the same operands again."""
    if scaling not in OPERAND_SCALING:
        raise ValueError(f"unknown FP8 GEMM scaling {scaling!r}: use one of {sorted(OPERAND_SCALING)}")
    device = backend.get().torch_device if device is None else device
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed) if seed is not None else int(torch.randint(0, 2**62, (1,)).item()))
    a = torch.randn(M, K, generator=gen, device=device)
    w = torch.randn(N, K, generator=gen, device=device)
    (sa, ba), (sw, bw) = OPERAND_SCALING[scaling]
    return quantize(a, "e4m3", sa, ba), quantize(w, "e4m3", sw, bw)


def _scaling_of(qa: Quantized, qw: Quantized) -> str:
    for name, ((sa, ba), (sw, bw)) in OPERAND_SCALING.items():
        if (qa.block == scaling_block(tuple(qa.values.shape), sa, ba)
                and qw.block == scaling_block(tuple(qw.values.shape), sw, bw)):
            return name
    raise ValueError(f"FP8 GEMM operands scaled by blocks {qa.block} (A) and {qw.block} (W): use one of "
                     f"{sorted(OPERAND_SCALING)} (course_lib.fp8.OPERAND_SCALING)")


def cublas_fp8(qa: Quantized, qw: Quantized, *, fast_accumulation: bool = False,
               out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """cuBLAS's FP8 GEMM (``torch._scaled_mm``): C = A W^T in ``out_dtype``, each operand's scales
    passed as cuBLAS wants them; partial sums promoted into fp32 unless ``fast_accumulation``. Needs
    FP8 tensor cores (compute capability 8.9 or newer)."""
    scaling = _scaling_of(qa, qw)
    sa, sw = qa.scales, qw.scales
    if scaling == "tensor":  # 0-d tensors
        sa, sw = sa.reshape(()), sw.reshape(())
    elif scaling == "row":  # A's (M x 1), W's rows as C's columns (1 x N)
        sw = sw.reshape(1, -1)
    else:  # A's (M x K/128) with M contiguous, W's as (K/128 x N/128)
        sa, sw = sa.t().contiguous().t(), sw.t()
    return torch._scaled_mm(qa.values, qw.values.t(), scale_a=sa, scale_b=sw, out_dtype=out_dtype,
                            use_fast_accum=fast_accumulation)


# ---- what the FP8 kernels take (Triton's fp8_matmul, CUDA's stage 7) ---------------------------


def _per_row_or_block_shape(q: Quantized, name: str, stage: str) -> None:
    """Raises where ``q.scales`` is not one scale per block of ``q.block`` over ``q.values``."""
    rows, cols = q.values.shape
    b_rows, b_cols = q.block
    want = (-(-rows // b_rows), -(-cols // b_cols))
    if tuple(q.scales.shape) != want:
        raise ValueError(
            f"{stage}: {name}.scales has shape {tuple(q.scales.shape)}, but {b_rows} x {b_cols} blocks "
            f"over a {rows} x {cols} matrix need {want}; make {name} with course_lib.fp8.quantize"
        )


def _per_row(q: Quantized, name: str, stage: str, block_kernel: str) -> bool:
    """Whether ``q`` has one scale per row (True) or one per tensor (False); anything else raises."""
    _per_row_or_block_shape(q, name, stage)
    rows, cols = q.values.shape
    b_rows, b_cols = q.block
    if b_cols >= cols and b_rows >= rows:
        return False
    if b_cols >= cols and b_rows == 1:
        return True
    raise ValueError(
        f"{stage}: {name} has one scale per {b_rows} x {b_cols} block; this kernel takes one scale per "
        f"tensor or one per row, applied once to each tile's sums: quantize {name} with "
        f"fp8.quantize(x, 'e4m3', 'tensor') or fp8.quantize(x, 'e4m3', 'row'). Block scales (1 x 128, "
        f"128 x 128) change along K: {block_kernel} takes those; column scales no kernel here"
    )


def check_gemm_operands(qa: object, qw: object, stage: str, blocks: bool = False,
                        block_kernel: str = "fp8_matmul_blockscaled") -> tuple[int, int, int, bool, bool]:
    """M, N, K and whether each operand has per-row scales; raises, naming ``stage`` (the kernel's
    function) and saying what to do, where the kernel cannot take the operands. ``blocks``: the
    operands must have DeepSeek-V3's block scales instead (A per 1 x 128, W per 128 x 128:
    :data:`BLOCK_SCALES`), which ``block_kernel`` takes."""
    for name, q in (("qa", qa), ("qw", qw)):
        if not isinstance(q, Quantized):
            raise TypeError(f"{stage}: {name} must be a course_lib.fp8.Quantized (from fp8.quantize), "
                            f"not {type(q).__name__}")
        if q.fmt.name != "e4m3" or q.values.dtype != torch.float8_e4m3fn:
            raise ValueError(
                f"{stage}: {name} is in {q.fmt.name} ({q.values.dtype}); this kernel multiplies e4m3 "
                f"only (e5m2 is the format of gradients): quantize with fp8.quantize(x, 'e4m3', ...)"
            )
        if q.values.dim() != 2:
            raise ValueError(f"{stage}: {name} must be a 2-D matrix, but its shape is "
                             f"{tuple(q.values.shape)}; quantize x.reshape(-1, x.shape[-1])")
    (M, K), (N, K2) = qa.values.shape, qw.values.shape
    if K != K2:
        raise ValueError(
            f"{stage}: qa is {M} x {K} and qw is {N} x {K2}, but both must be K-major with the same K: "
            "qa is M x K (activations) and qw is N x K (the weight of nn.Linear, out x in); if you "
            "hold W^T (K x N), quantize its transpose, w.T.contiguous()"
        )
    if M == 0 or N == 0 or K == 0:
        raise ValueError(f"{stage}: empty matrix (M={M}, N={N}, K={K}); every dimension must be at least 1")
    if blocks:
        for name, q, want in (("qa", qa, BLOCK_SCALES[0]), ("qw", qw, BLOCK_SCALES[1])):
            if tuple(q.block) != want:
                raise ValueError(
                    f"{stage}: {block_kernel} takes A in 1 x 128 blocks and W in 128 x 128 blocks, "
                    f"but {name} has {q.block[0]} x {q.block[1]}: quantize it with "
                    f"fp8.quantize(x, 'e4m3', 'block', {want}), or use fp8_matmul for one scale per tensor or row")
        _per_row_or_block_shape(qa, "qa", stage)
        _per_row_or_block_shape(qw, "qw", stage)
        rows_a = rows_w = True
    else:
        rows_a, rows_w = _per_row(qa, "qa", stage, block_kernel), _per_row(qw, "qw", stage, block_kernel)

    tensors = {"qa.values": qa.values, "qa.scales": qa.scales, "qw.values": qw.values, "qw.scales": qw.scales}
    devices = {str(t.device) for t in tensors.values()}
    if len(devices) > 1:
        where = ", ".join(f"{n} on {t.device}" for n, t in tensors.items())
        raise ValueError(f"{stage}: the operands are on different devices ({where}); move all four "
                         "to one device")
    want = backend.get().torch_device
    if qa.values.device.type != want:
        raise ValueError(f"{stage}: the operands are on {qa.values.device}, but the {backend.get().name} "
                         f"backend runs the kernel on '{want}'; move them there")
    for name, t in (("qa", qa.values), ("qw", qw.values)):
        if t.stride(1) != 1 and K > 1:
            raise ValueError(f"{stage}: {name}.values is not contiguous along K (strides {t.stride()}); "
                             f"the FP8 tensor cores read both operands K-major: pass {name}.values.contiguous()")
    return M, N, K, rows_a, rows_w
