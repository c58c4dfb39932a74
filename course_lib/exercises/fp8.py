"""Exercises of notebook ``09_fp8``: quantize with one scale per 1 x 128 block (you write it), when
the tensor core's sum drops a product, and what block scales of a weight cost.

Every expected answer comes from :mod:`course_lib.fp8`: ``quantize`` for the puzzle, the model of
the FP8 tensor core's sum (``ACCUMULATOR_BITS``) and the block sizes of ``OPERAND_SCALING``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib import fp8, learn
from course_lib.exercises import Puzzle, Question, nothing_yet
from course_lib.learn import Verdict, say

E4M3 = fp8.FORMATS["e4m3"]
BLOCK = 128


# ---- the puzzle: one scale per 1 x 128 block ------------------------------------------------------

def quantize_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (M x K) in e4m3 with one scale per 1 x 128 block: (values, scales), scales M x ceil(K/128)."""
    M, K = x.shape
    blocks = -(-K // BLOCK)
    scales = torch.ones(M, blocks)
    values = torch.empty(M, K, dtype=torch.float8_e4m3fn)
    for j in range(blocks):
        part = x[:, BLOCK * j: BLOCK * (j + 1)]
        amax = part.abs().amax(dim=1)                                   # each row's largest magnitude
        scales[:, j] = torch.where(amax > 0, amax / E4M3.max, 1.0)      # it maps to 448; zeros keep 1
        values[:, BLOCK * j: BLOCK * (j + 1)] = (part / scales[:, j:j + 1]).clamp(-E4M3.max, E4M3.max).to(
            torch.float8_e4m3fn)
    return values, scales


def _cases() -> list[torch.Tensor]:
    """Inputs the learner has not seen: a partial last block, a block of zeros, a row with one huge
    value, values far apart in size, one row of one element."""
    g = torch.Generator().manual_seed(2027)
    x = torch.randn(5, 300, generator=g)
    x[1, 128:256] = 0.0                      # a block of zeros
    x[2, 10] = 3e4                           # an outlier: its block's other values get a coarse scale
    x[3] *= torch.logspace(-3, 3, 300)       # sizes far apart along K
    return [x, torch.randn(1, 1, generator=g), torch.randn(3, 128, generator=g) * 1e-3]


@dataclass(frozen=True)
class BlockQuantizePuzzle(Puzzle):
    """You write ``quantize(x) -> (values, scales)``; the check compares with the course's
    ``fp8.quantize(x, "e4m3", "block", (1, 128))`` on inputs you have not seen."""

    title: str = "Block quantization"
    reference = staticmethod(quantize_blocks)

    def check(self, fn) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        for x in _cases():
            M, K = x.shape
            where = f"for a {M} x {K} input"
            try:
                got = fn(x.clone())
            except Exception as e:  # noqa: BLE001 - a learner's function may raise anything
                say(f"{self.title}: your function raised {type(e).__name__} {where}: {e}")
                return Verdict(False)
            if got is None or (isinstance(got, tuple) and any(v is None for v in got)):
                say(f"{self.title}: not solved yet: your function returns None — fill in the TODO lines.")
                return Verdict(False)
            values, scales = got
            want = fp8.quantize(x, "e4m3", "block", (1, BLOCK))
            if values.dtype != torch.float8_e4m3fn or tuple(values.shape) != (M, K):
                say(f"{self.title}: not yet — values should be {M} x {K} torch.float8_e4m3fn {where}, "
                    f"not {tuple(values.shape)} {values.dtype}.")
                return Verdict(False)
            if tuple(scales.shape) != tuple(want.scales.shape):
                say(f"{self.title}: not yet — scales should be {tuple(want.scales.shape)} (one per row and "
                    f"block of 128) {where}, not {tuple(scales.shape)}.")
                return Verdict(False)
            s, w = scales.double(), want.scales.double()
            if not bool(torch.isfinite(values.float()).all()) or not bool(torch.isfinite(s).all()):
                say(f"{self.title}: not yet — NaN or inf {where}: a block of zeros has largest magnitude 0; "
                    "give it scale 1 instead of dividing by 0.")
                return Verdict(False)
            if not torch.allclose(s, w, rtol=1e-6, atol=0):
                ratio = float((s / w).median())
                if abs(ratio - E4M3.max) < 1:
                    hint = " — the block's largest magnitude should map to 448, e4m3's largest value: divide it by 448"
                elif bool(torch.allclose(s * w, torch.ones_like(w), rtol=1e-5)):
                    hint = (" — a scale is what the stored values are multiplied by, x ≈ values × scale: "
                            "scale = largest magnitude / 448, not its inverse")
                else:
                    hint = " — each row of each block of 128 columns has its own scale"
                say(f"{self.title}: not yet — your scales differ from the course's {where}{hint}.")
                return Verdict(False)
            back = values.double() * _spread(s, K)
            ref = want.dequantize()
            # Rounding in float32 instead of float64 may land a value exactly between two e4m3 values
            # on the other side: allow one step of e4m3 (2^-3 of the value) there, nowhere else.
            off = (back - ref).abs() > E4M3.step * ref.abs() + 1e-30
            if bool(off.any()):
                m, k = (int(i) for i in off.nonzero()[0])
                say(f"{self.title}: not yet — value [{m}, {k}] {where} dequantizes to {float(back[m, k]):.4g}, "
                    f"the course's to {float(ref[m, k]):.4g}: divide each value by its block's scale, then round.")
                return Verdict(False)
        say(f"{self.title}: solved — right on all {len(_cases())} inputs (partial blocks, zeros, an outlier).")
        return Verdict(True)

    def solution(self):
        return learn.show_source(quantize_blocks)


def _spread(scales: torch.Tensor, K: int) -> torch.Tensor:
    return scales.repeat_interleave(BLOCK, dim=1)[:, :K]


block_quantize = BlockQuantizePuzzle()


# ---- questions ----------------------------------------------------------------------------------

vanishing_ratio = Question(
    what="How many times larger than a product the accumulator is when the product is dropped whole",
    expected=lambda: 2 ** fp8.ACCUMULATOR_BITS,
    # between 2^13 and 2^14, by where in its power of two the accumulator lies: both accepted
    accepts=lambda v: 2 ** (fp8.ACCUMULATOR_BITS - 1) <= float(v) <= 2 ** fp8.ACCUMULATOR_BITS,
    hint="the adder keeps 14 bits below the largest exponent; a product smaller than the last bit kept adds 0",
    wrong=((fp8.ACCUMULATOR_BITS, "that is the number of bits kept: how many times larger is the sum than its last bit?"),
           (2 ** E4M3.mantissa_bits, "that is e4m3's mantissa: the products are exact, the adder is what drops bits"),
           (2 ** 23, "that is fp32's mantissa: the promoted sum in registers, not the tensor core's adder")),
)

WEIGHT = (14336, 4096)  # llama3's gate projection, N x K


def _weight_scale_bytes() -> int:
    _, block = fp8.OPERAND_SCALING["block"][1]  # the weight's blocks
    n, k = WEIGHT
    return 4 * -(-n // block[0]) * -(-k // block[1])


weight_scale_bytes = Question(
    what=f"Bytes of fp32 scales of a {WEIGHT[0]} x {WEIGHT[1]} weight in 128 x 128 blocks",
    expected=_weight_scale_bytes,
    wrong=((lambda want: want // 4, "that is the number of scales: each is an fp32 of 4 bytes"),
           (lambda want: want * 128, "that is one scale per 1 x 128 block, the activations' blocks")),
)
