"""Eight-bit floating point: the two formats and scaling into them.

Everything here runs on the CPU (torch has the float8 dtypes there).

* :data:`FORMATS`: e4m3 (more precision, range +-448) and e5m2 (more range, +-57344), read from
  ``torch.finfo``.
* :func:`quantize`: a tensor divided by a scale and rounded into a format, with one scale per tensor,
  per row, per column, or per block (DeepSeek-V3's recipe: 1 x 128 blocks of activations, 128 x 128
  blocks of weights); :meth:`Quantized.dequantize` multiplies back. A block may be cut by the
  matrix's edge: every scale covers the elements it has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from course_lib.model.layout import cdiv


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
    br, bc = cdiv(rows, bm), cdiv(cols, bk)
    padded = torch.zeros(br * bm, bc * bk, dtype=torch.float64, device=x.device)
    padded[:rows, :cols] = x.double().abs()
    amax = padded.reshape(br, bm, bc, bk).amax(dim=(1, 3))
    scales = torch.where(amax > 0, amax / f.max, torch.ones_like(amax)).float()
    values = (x.double() / _spread(scales, (bm, bk), (rows, cols)).double()).clamp(-f.max, f.max).to(f.torch_dtype)
    return Quantized(values, scales, (bm, bk), f)


