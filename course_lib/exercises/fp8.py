"""Exercises of notebook ``12_fp8``: quantize with one scale per 1 x 128 block (you write it), when
the tensor core's sum drops a product, and what block scales of a weight cost.

Every expected answer comes from :mod:`course_lib.fp8`: ``quantize`` for the puzzle, the model of
the FP8 tensor core's sum (``ACCUMULATOR_BITS``) and the block sizes of ``OPERAND_SCALING``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib import fp8, learn
from course_lib.model import fp8_accumulator
from course_lib.exercises import NumberQuestion, Puzzle, nothing_yet
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
    value, values far apart in size, one row of one element, and :func:`_edges`."""
    g = torch.Generator().manual_seed(2027)
    x = torch.randn(5, 300, generator=g)
    x[1, 128:256] = 0.0                      # a block of zeros
    x[2, 10] = 3e4                           # an outlier: its block's other values get a coarse scale
    x[3] *= torch.logspace(-3, 3, 300)       # sizes far apart along K
    # ... and a second input of the first one's shape: scales kept from an earlier call go wrong there
    again = torch.randn(5, 300, generator=g) * torch.logspace(1, -2, 300)
    return [x, torch.randn(1, 1, generator=g), torch.randn(3, 128, generator=g) * 1e-3, _edges(), again]


def _edges() -> torch.Tensor:
    """Blocks whose largest magnitude sits in a block's first or last column (a maximum over 127 of the
    128 columns, or over windows of 127, misses it), blocks whose largest magnitude is about 1e-6, 3e-9
    and 1e-11 (a zero guard such as amax.clamp(min=1e-6), or a test amax > 1e-9, changes their scales)
    and a block of zeros."""
    g = torch.Generator().manual_seed(2028)
    x = torch.rand(4, 300, generator=g) * 2 - 1       # |x| < 1 everywhere but where set below
    x[0, [0, 255, 299]] = torch.tensor([3.0, -5.0, 7.0])     # first column of block 0, last of 1 and of 2
    x[1, [127, 128, 256]] = torch.tensor([-6.0, 4.0, -2.5])  # last column of block 0, first of 1 and of 2
    x[2, 0:128] *= 1e-6                                        # a block of largest magnitude about 1e-6,
    x[2, 127] = 1.1e-6                                         # in its last column
    x[2, 128:256] = 0.0                                        # a block of zeros
    x[3, 256:300] *= 1e-6                                      # a partial block about 1e-6, largest first
    x[3, 256] = -1.3e-6
    x[3, 0:128] *= 3e-9                                        # a block of about 3e-9: a guard of 1e-6 or
                                                               # 1e-8 (a common epsilon) changes its scale
    x[0, 128:256] *= 3e-12                                     # and one of about 1e-11 (its -5 times 3e-12):
    return x                                                   # a zero test such as amax > 1e-9 flushes it


@dataclass(frozen=True)
class BlockQuantizePuzzle(Puzzle):
    """You write ``quantize(x) -> (values, scales)``; the check compares with the course's
    ``fp8.quantize(x, "e4m3", "block", (1, 128))`` on inputs you have not seen, every row of them.
    Scales that differ are told what differs: the blocks (which values share a scale) or the factor
    (every block's scale off by the same factor, and by how much). Scales rounded up to a power of
    two pass (a recipe of their own: every block's largest magnitude lands between 224 and 448).
    Values must be x over their block's scale rounded to the nearest e4m3 value."""

    title: str = "Block quantization"
    reference = staticmethod(quantize_blocks)

    def check(self, fn) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        powers_of_two = False
        for x in _cases():
            M, K = x.shape
            where = f"for a {M} x {K} input"
            given = x.clone()
            try:
                got = fn(given)
            except Exception as e:  # noqa: BLE001 - a learner's function may raise anything
                say(f"{self.title}: your function raised {type(e).__name__} {where}: {e}")
                return Verdict(False)
            if got is None or (isinstance(got, (tuple, list)) and got and all(v is None for v in got)):
                say(f"{self.title}: not solved yet: your function returns None — fill in the TODO lines.")
                return Verdict(False)
            if not (isinstance(got, (tuple, list)) and len(got) == 2
                    and all(isinstance(v, torch.Tensor) for v in got)):
                kinds = (f"a {type(got).__name__} of {len(got)}: "
                         f"{', '.join(type(v).__name__ for v in got)}" if isinstance(got, (tuple, list))
                         else type(got).__name__)
                say(f"{self.title}: not yet — return two torch tensors, (values, scales), {where}; yours "
                    f"returns {kinds}.")
                return Verdict(False)
            if not torch.equal(given, x):
                say(f"{self.title}: not yet — your function changed its input x {where} (an in-place "
                    "operation such as x /= ..., x.div_(...) or part[...] = ...): the caller's matrix must stay "
                    "as it was; write the quotients into `values`.")
                return Verdict(False)
            values, scales = got
            if (values.dtype != torch.float8_e4m3fn and scales.dtype == torch.float8_e4m3fn
                    and tuple(scales.shape) == (M, K)):
                say(f"{self.title}: not yet — your function returns (scales, values) {where}: the two are "
                    "swapped; return values, scales (values first, as the docstring says).")
                return Verdict(False)
            want = fp8.quantize(x, "e4m3", "block", (1, BLOCK))
            if values.dtype != torch.float8_e4m3fn or tuple(values.shape) != (M, K):
                say(f"{self.title}: not yet — values should be {M} x {K} torch.float8_e4m3fn {where}, "
                    f"not {tuple(values.shape)} {values.dtype}.")
                return Verdict(False)
            if tuple(scales.shape) != tuple(want.scales.shape):
                say(f"{self.title}: not yet — scales should be {tuple(want.scales.shape)} (one per row and "
                    f"block of 128) {where}, not {tuple(scales.shape)}.")
                return Verdict(False)
            if scales.dtype != torch.float32:
                say(f"{self.title}: not yet — scales should be torch.float32 {where}, not {scales.dtype}: the "
                    "kernels read one fp32 scale per block (the starter's torch.ones(M, blocks) is float32).")
                return Verdict(False)
            s, w = scales.double(), want.scales.double()
            amax = _block_amax(x)
            problem = _not_finite(values, s, amax, where)
            if problem is None:
                problem, recipe = _scale_problem(x, s, w, amax, where)
                powers_of_two = powers_of_two or recipe
            if problem is None:
                problem = _rounding_problem(x, values, s, where)
            if problem is not None:
                say(f"{self.title}: not yet — {problem}")
                return Verdict(False)
        say(f"{self.title}: solved — right on all {len(_cases())} inputs (partial blocks, zeros, an outlier, "
            "a block's largest magnitude in its first or last column, blocks of about 1e-6 to 1e-11, a second "
            "input of one shape).")
        if powers_of_two:
            say(f"  Your scales are powers of two, rounded up: each block's largest magnitude lands between "
                f"{E4M3.max / 2:g} and {E4M3.max:g}, a recipe that works too (multiplying by a power of two is "
                f"exact); the course's scale puts it on {E4M3.max:g} exactly.")
        return Verdict(True)

    def solution(self):
        return learn.show_source(quantize_blocks)


def _spread(scales: torch.Tensor, K: int) -> torch.Tensor:
    return scales.repeat_interleave(BLOCK, dim=1)[:, :K]


def _block_amax(x: torch.Tensor, signed: bool = False) -> torch.Tensor:
    """Each row's largest magnitude (or, ``signed``, largest value) in each block of 128 columns."""
    parts = torch.split(x.double() if signed else x.double().abs(), BLOCK, dim=1)
    return torch.stack([p.amax(dim=1) for p in parts], dim=1)


def _columns(j: int, K: int) -> str:
    return f"columns {BLOCK * j}-{min(BLOCK * (j + 1), K) - 1}"


def _not_finite(values: torch.Tensor, s: torch.Tensor, amax: torch.Tensor, where: str) -> str | None:
    """What is wrong where a scale is not a positive number or a value is NaN or inf."""
    # A block of zeros may keep any positive scale, or 0 (its values 0, it dequantizes to 0 all the same).
    bad_scale = ~torch.isfinite(s) | (s < 0) | ((s == 0) & (amax > 0))
    bad_value = ~torch.isfinite(values.float())
    if not bool(bad_scale.any()) and not bool(bad_value.any()):
        return None
    if bad_scale.any():
        m, j = (int(i) for i in bad_scale.nonzero()[0])
    else:
        m, k = (int(i) for i in bad_value.nonzero()[0])
        j = k // BLOCK
    if float(amax[m, j]) == 0:
        return (f"NaN, inf or a scale of 0 {where}: a block of zeros has largest magnitude 0; give it scale 1 "
                "instead of dividing by 0.")
    if bad_scale.any():
        return (f"the scale of row {m}, block {j} {where} is {float(s[m, j]):.4g}: a scale is a positive number, "
                "the block's largest magnitude (|x|) over 448.")
    return (f"value [{m}, {k}] {where} is {float(values[m, k].float())}: every value must be written, "
            "x divided by its block's scale and rounded to e4m3.")


def _scale_problem(x: torch.Tensor, s: torch.Tensor, w: torch.Tensor, amax: torch.Tensor,
                   where: str) -> tuple[str | None, bool]:
    """What is wrong with the learner's scales ``s`` against the course's ``w``, by what differs: the
    block layout (which values share a scale) or the factor (the scale of each block, off by the same
    factor everywhere). Scales that are powers of two, rounded up from the course's, are a recipe of
    their own and pass. Returns (the problem or None, whether the scales are that recipe)."""
    M, K = x.shape
    nz = amax > 0
    if bool(torch.allclose(s[nz], w[nz], rtol=1e-6, atol=0)):
        return None, False
    mantissa, _ = torch.frexp(s[nz])
    powers = bool((mantissa == 0.5).all())
    lands = amax[nz] / s[nz]  # where each block's largest magnitude lands, in e4m3's units
    if powers and bool(((lands > E4M3.max / 2) & (lands <= E4M3.max * (1 + 1e-9))).all()):
        return None, True
    blocks_right = " The blocks are right; the factor is not."
    if bool(torch.allclose(s[nz] * w[nz], torch.ones_like(w[nz]), rtol=1e-5)):
        return (f"your scales differ from the course's {where}: a scale is what the stored values are multiplied "
                "by, x ≈ values × scale: scale = largest magnitude / 448, not its inverse." + blocks_right), False
    if s.numel() > 1 and bool((s == s.flatten()[0]).all()):
        return (f"one scale for the whole input {where}: each row of each block of 128 columns has its own, the "
                "largest magnitude of those (up to) 128 values over 448."), False
    if s.shape[1] > 1 and bool((s == s[:, :1]).all()):
        return (f"one scale for each whole row {where} (the row's largest magnitude over all of K): each block of "
                "128 columns of a row has its own scale, the largest magnitude of those 128 values over 448."), False
    if M > 1 and bool((s == s[:1, :]).all()):
        return (f"the same scale for every row of a block {where} (the whole block's largest magnitude, or row "
                "0's): each row of each block has its own scale, the largest magnitude of that row's 128 "
                "values over 448."), False
    signed = _block_amax(x, signed=True) / E4M3.max
    if bool(torch.allclose(s[nz], signed[nz], rtol=1e-6)):
        return (f"your scales come from each block's largest value {where}, not its largest magnitude: take "
                "|x| before the maximum, or the negative values of a block saturate."), False
    if powers:
        m_j = (~((amax / s > E4M3.max / 2) & (amax / s <= E4M3.max * (1 + 1e-9))) & nz).nonzero()[0]
        m, j = (int(i) for i in m_j)
        at = float(amax[m, j] / s[m, j])
        fix = ("beyond 448, where it saturates: round the exponent up, not down" if at > E4M3.max
               else "no more than half of 448, wasting a bit of e4m3's range: round up to the next power of "
                    "two, no further")
        return (f"your scales are powers of two {where}, but in row {m}, block {j} the largest magnitude "
                f"lands on {at:.4g}, {fix}."), False
    ratio = s[nz] / w[nz]
    if float(ratio.max() / ratio.min()) < 1 + 1e-5:
        c = float(ratio.median())
        if abs(c - 1) < 1e-3:
            return (f"your scales are a hair {'above' if c > 1 else 'below'} the course's in every block {where} "
                    f"(by a factor {c:.7f}): a scale is exactly the largest magnitude over 448; a small number "
                    "added to it (amax + eps) or a divisor a little off 448 changes every scale. Guard only "
                    "the blocks of zeros, where the largest magnitude is 0."), False
        d = E4M3.max / c  # the learner's scale is amax / d
        if abs(d - 1) < 1e-3:
            return (f"your scales are the blocks' largest magnitudes {where}: the largest magnitude should map to "
                    "448, e4m3's largest value: divide it by 448." + blocks_right), False
        lands_on = (f"lands on {d:.4g}, beyond e4m3's largest value: it saturates" if d > E4M3.max
                    else f"lands on {d:.4g} instead of 448, wasting range")
        fnuz = " (240 is the largest value of e4m3fnuz, another FP8 variant)" if abs(d - 240) < 0.5 else ""
        return (f"your scales are {c:.4g} times the course's in every block {where}: you divide the largest "
                f"magnitude by {d:.4g}{fnuz}, the notebook by 448 (E4M3_MAX), so the largest value {lands_on}."
                + blocks_right), False
    off = ~torch.isclose(s, w, rtol=1e-6, atol=0) & nz
    m, j = (int(i) for i in off.nonzero()[0])
    return (f"each row of each block of 128 columns has its own scale, the largest magnitude of its values over "
            f"448: at row {m}, {_columns(j, K)} {where}, yours is {float(s[m, j]):.4g}, the course's "
            f"{float(w[m, j]):.4g} = {float(amax[m, j]):.4g} / 448."), False


def _nearest_e4m3(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to the nearest e4m3 value (saturating at +-448), as float64."""
    return t.clamp(-E4M3.max, E4M3.max).to(torch.float8_e4m3fn).double()


def _rounding_problem(x: torch.Tensor, values: torch.Tensor, s: torch.Tensor, where: str) -> str | None:
    """Whether every value is x over its block's scale rounded to a nearest e4m3 value (either one
    at a tie: dividing in float32 instead of float64 may land there), in every row."""
    M, K = x.shape
    exact = x.double() / _spread(torch.where(s == 0, 1.0, s), K)  # a scale of 0 only for a block of zeros
    nearest = _nearest_e4m3(exact)
    mine = values.double()
    off = (mine - exact).abs() > (nearest - exact).abs() + 1e-6 * exact.abs() + 1e-30
    if not bool(off.any()):
        return None
    m, k = (int(i) for i in off.nonzero()[0])
    scale = s[m, k // BLOCK]
    text = (f"value [{m}, {k}] {where} is {float(mine[m, k]):.4g} (dequantized {float(mine[m, k] * scale):.4g}), "
            f"but x / scale = {float(exact[m, k]):.4g} rounds to {float(nearest[m, k]):.4g} (dequantized "
            f"{float(nearest[m, k] * scale):.4g})")
    spacing = E4M3.step * max(abs(float(nearest[m, k])), 2.0 ** -6)  # between e4m3 values here
    whole = _nearest_e4m3(torch.round(exact))
    if bool((mine == whole).all()):
        return text + (": every value of yours is x / scale rounded to a whole number; e4m3 holds fractions "
                       "too (1.125, 0.0625, ...): leave the rounding to .to(torch.float8_e4m3fn).")
    if float(mine[m, k]) == 0 and 0 < abs(float(nearest[m, k])) < 2.0 ** -6:
        return text + (": e4m3's values below 2^-6 (its subnormals, down to 2^-9) are kept, not flushed to 0; "
                       "let .to(torch.float8_e4m3fn) round.")
    if float(mine[m, k]) * float(nearest[m, k]) > 0 and abs(float(mine[m, k] - nearest[m, k])) <= 1.01 * spacing:
        return text + ": the next e4m3 value instead of the nearest; let .to(torch.float8_e4m3fn) round."
    j = k // BLOCK
    neighbours = [n for n in (j - 1, j + 1) if 0 <= n < s.shape[1] and float(s[m, n]) > 0]
    if any(float(mine[m, k]) == float(_nearest_e4m3(x[m, k].double() / s[m, n])) for n in neighbours):
        return text + (f": that is x divided by a neighbouring block's scale; block j covers columns {BLOCK} j to "
                       f"{BLOCK} j + {BLOCK - 1}, and each value is divided by its own block's scale.")
    return text + ": divide each value by its block's scale, then round."


block_quantize = BlockQuantizePuzzle()


# ---- questions ----------------------------------------------------------------------------------

def _near(value: float, target: float) -> bool:
    """Within 1 % (an answer rounded to a few digits), far enough apart for the units told apart here."""
    return abs(value - target) <= 0.01 * abs(target)


_BITS = fp8_accumulator.ACCUMULATOR_BITS
_RATIO_RIGHT = (f"Any answer from 2^{_BITS - 1} = {2 ** (_BITS - 1):,} to 2^{_BITS} = {2 ** _BITS:,} counts: the "
                f"last bit kept is 2^-{_BITS} of the power of two just above the sum, so a sum just above a power "
                f"of two is 2^{_BITS - 1} times that bit, and a sum just below the next one almost 2^{_BITS} times.")

vanishing_ratio = NumberQuestion(
    what="How many times larger than a product the accumulator is when the product is dropped whole",
    expected=lambda: 2 ** fp8_accumulator.ACCUMULATOR_BITS,
    # between 2^13 and 2^14, by where in its power of two the accumulator lies: both accepted
    accepts=lambda v: 2 ** (fp8_accumulator.ACCUMULATOR_BITS - 1) <= v <= 2 ** fp8_accumulator.ACCUMULATOR_BITS,
    # which answers count, and why: said to every right one
    after_right=lambda answer: "  " + _RATIO_RIGHT,
    hint=(f"the last bit kept is worth 2^-{_BITS} of the power of two just above the running sum; a product "
          "smaller than that bit adds 0"),
    wrong=((fp8_accumulator.ACCUMULATOR_BITS, "that is the number of bits kept: how many times larger is the sum than its last bit?"),
           (2 ** E4M3.mantissa_bits, "that is e4m3's mantissa: the products are exact, the adder is what drops bits"),
           (2 ** 23, "that is fp32's mantissa: the promoted sum in registers, not the tensor core's adder"),
           (2 ** (fp8_accumulator.ACCUMULATOR_BITS + 1),
            f"one bit too far: 2^{_BITS + 1} would hold if the {_BITS} bits counted down from the sum's own "
            f"leading bit (2^e in section 1's ±1.m × 2^e), or if the adder rounded to nearest (a product below "
            f"half the last bit vanishes). Here they count down from the power of two just above the sum, "
            f"2^(e+1), and the adder truncates: count again from that power of two, for a sum just above "
            f"2^e and for one just below 2^(e+1).")),
    # the ratio upside down (2^-14, or anything from 2^-16 to 2^-12): product / sum
    wrong_when=((lambda v, want: 0 < v < 1 and want / 4 <= 1 / v <= want * 4,
                 "that is product / sum, a fraction of the sum; the question asks sum / product: how many "
                 "times larger than the product the running sum is."),
                # above 2^14 (2^15 has its own message above): a product is dropped there, wherever the sum lies
                (lambda v, want: want < v < 2 * want,
                 f"at that ratio a product is dropped wherever the sum lies in its power of two; the question "
                 f"asks from what ratio on it is dropped: from 2^{_BITS - 1} to 2^{_BITS}, by where the sum "
                 f"lies.")),
)

# Qwen2.5 7B's MLP down projection, N x K (course_lib/model_shapes.py, "qwen2.5 down 2k"): its scales'
# bytes differ from both of its sides, so no answer about a side is right by coincidence.
WEIGHT = (3584, 18944)


def _weight_blocks() -> tuple[int, int]:
    """The weight's 128 x 128 blocks along N and along K."""
    _, block = fp8.OPERAND_SCALING["block"][1]  # the weight's blocks
    n, k = WEIGHT
    return -(-n // block[0]), -(-k // block[1])


def _weight_scale_bytes() -> int:
    bn, bk = _weight_blocks()
    return 4 * bn * bk


weight_scale_bytes = NumberQuestion(
    what=f"Bytes of fp32 scales of a {WEIGHT[0]} x {WEIGHT[1]} weight in 128 x 128 blocks",
    expected=_weight_scale_bytes,
    unit="bytes",
    hint=(f"the blocks form a grid, {WEIGHT[0]}/128 along N by {WEIGHT[1]}/128 along K, one fp32 scale "
          "(4 bytes) each; the answer is in bytes"),
    # the right count in another unit, to the digits a learner may round it to
    wrong_when=((lambda v, want: _near(v, want / 1000), "that is in kB (1,000 bytes); the answer is in bytes"),
                (lambda v, want: _near(v, want / 1024), "that is in KiB (1,024 bytes); the answer is in bytes"),
                (lambda v, want: _near(v, want / 1e6), "that is in MB (a million bytes); the answer is in bytes"),
                (lambda v, want: _near(v, want / 2**20), "that is in MiB (2^20 bytes); the answer is in bytes")),
    wrong=((lambda want: want // 4, "that is the number of scales: each is an fp32 of 4 bytes"),
           (lambda want: want * 128, "that is one scale per 1 x 128 block, the activations' blocks"),
           (lambda want: want // 2, "that counts 2 bytes a scale: each is an fp32 of 4 bytes"),
           (lambda want: want * 2, "that counts 8 bytes a scale (an fp64): each is an fp32 of 4 bytes"),
           (lambda want: WEIGHT[0] * WEIGHT[1] + want, "that is the e4m3 weight and its scales together; the "
                                                       "question asks for the scales alone"),
           (4 * sum(_weight_blocks()), "that adds the blocks along N to those along K: the blocks form a grid, "
                                        "so multiply the two counts"),
           (4 * WEIGHT[0], "that is one scale per row of the weight (per-row scaling); a 128 x 128 block "
                           "shares one scale among 128 rows and 128 columns"),
           (WEIGHT[0] * WEIGHT[1], "that is the e4m3 weight itself, a byte per element; the question asks "
                                   "for its scales, one fp32 per 128 x 128 block")),
)
