"""Exercises of notebook ``11_decode_and_host_time``: the bytes a decode step must move at least, and
its least time on the memory roof (you write it, for any shape and element size).

Every expected answer comes from the course's models: the bytes a GEMM must move
(``course_lib.model_shapes.bytes_moved``: A and B read once, C written once) and the copy bandwidth
of the course's recording (its ``ceilings``), the memory roof of notebook 06's roofline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from course_lib import learn
from course_lib.exercises import (NumberQuestion, Puzzle, as_number, call_on_every_case, nothing_yet,
                                  recorded_copy_gbs)
from course_lib.learn import Verdict, say
from course_lib.model.hardware import BF16_BYTES
from course_lib.model_shapes import MODEL_SHAPES, bytes_moved

# NVIDIA's H200 datasheet gives its HBM3e 4.8 TB/s; a copy kernel reaches less (the recording's
# copy bandwidth), and the course's memory roof is what a kernel can reach.
HBM_PEAK_GBS = 4800.0


# ---- the lead-in question: the bytes of llama3 qkv M=1 --------------------------------------------

DECODE_SHAPE = (1, 6144, 4096)  # llama3 qkv M=1
DECODE_TOLERANCE = 0.02


def _decode_bytes(itemsize: int = BF16_BYTES, a: bool = True, b: bool = True, c: bool = True) -> int:
    M, N, K = DECODE_SHAPE
    return (a * M * K + b * K * N + c * M * N) * itemsize


def _exactly(notes: Sequence[tuple[Any, str]]) -> Callable[[Any], str | None]:
    """After a right answer: what it left out, where it is exactly one of ``notes`` (value, what)."""
    return lambda answer: next((f"  (Exactly, {m})" for v, m in notes if answer == v), None)


decode_bytes = NumberQuestion(
    what="bytes",
    unit="bytes",
    expected=lambda: bytes_moved(*DECODE_SHAPE, BF16_BYTES),
    rel_tol=DECODE_TOLERANCE,
    hint="A (1 x 4096), B (4096 x 6144) and C (1 x 6144), 2 bytes an element",
    wrong=[
        (_decode_bytes(itemsize=4), "that counts 4 bytes an element; bf16 is 2."),
        (lambda want: want / 1e6, "that is in MB; the answer is in bytes."),
        (_decode_bytes(b=False), "that leaves out the weight B, almost all of the bytes."),
    ],
    # inside the tolerance, but one of these exactly: right, and told what it left out
    after_right=_exactly([
        (_decode_bytes(c=False), "you left out writing C: 1 x 6144 x 2 bytes, next to the weight's 50 MB."),
        (_decode_bytes(a=False), "you left out reading A: 1 x 4096 x 2 bytes, next to the weight's 50 MB."),
        (_decode_bytes(a=False, c=False), "you counted the weight alone; A and C add 20 KB."),
    ]),
)


# ---- the puzzle: the least time of any product on the memory roof -------------------------------

def decode_roof_us(M: int, N: int, K: int, itemsize: int) -> float:
    """The least time of an M x N x K product on the memory roof, in microseconds: A (M x K) and
    B (K x N) read once, C (M x N) written once, every element ``itemsize`` bytes, at the recorded
    copy bandwidth (GB/s: 10^9 bytes per second)."""
    nbytes = (M * K + K * N + M * N) * itemsize     # A, B read; C written: all in the input's type
    return nbytes / (recorded_copy_gbs() * 1e9) * 1e6  # seconds at the copy bandwidth, in microseconds


# The table's decode rows in bf16 (what the notebook prints), then shapes the learner has not seen:
# odd batches, fp32 (4 bytes) and 1-byte elements (an FP8 product that writes C in FP8 too, as
# cuBLASLt can), a batch of 255 where A and C weigh most, and a single token against a wide weight.
HIDDEN_CASES: tuple[tuple[int, int, int, int], ...] = (
    (7, 4096, 4096, 4),
    (33, 14336, 4096, 1),
    (255, 4096, 14336, 4),
    (129, 5120, 13824, 1),
    (1, 18944, 3584, 4),
    (200, 3584, 18944, 2),
)


def roof_cases() -> list[tuple[int, int, int, int]]:
    """(M, N, K, itemsize) of every decode row of the shape table in bf16, then :data:`HIDDEN_CASES`."""
    return [(*s.shape, BF16_BYTES) for s in MODEL_SHAPES if s.phase == "decode"] + list(HIDDEN_CASES)


def _label(case: tuple[int, int, int, int]) -> str:
    M, N, K, itemsize = case
    row = next((s.label for s in MODEL_SHAPES if s.phase == "decode" and s.shape == (M, N, K)), None)
    if row and itemsize == BF16_BYTES:
        return f"{row} ({M}, {N}, {K}), itemsize {itemsize}"
    return f"({M}, {N}, {K}), itemsize {itemsize} (unseen)"


def _us(nbytes: float, gbs: float | None = None) -> float:
    return nbytes / ((gbs if gbs is not None else recorded_copy_gbs()) * 1e9) * 1e6


def _weights_only(M, N, K, itemsize):
    return _us(N * K * itemsize)


def _without_c(M, N, K, itemsize):
    return _us((M * K + K * N) * itemsize)


def _c_in_fp32(M, N, K, itemsize):
    return _us((M * K + K * N) * itemsize + M * N * 4)


def _gib(M, N, K, itemsize):
    return bytes_moved(M, N, K, itemsize) / (recorded_copy_gbs() * 2**30) * 1e6


def _hbm_peak(M, N, K, itemsize):
    return _us(bytes_moved(M, N, K, itemsize), HBM_PEAK_GBS)


def _flops(M, N, K, itemsize):
    return _us(2 * M * N * K)


def _always_bf16(M, N, K, itemsize):
    return _us(bytes_moved(M, N, K, BF16_BYTES))


def _elements(M, N, K, itemsize):
    return _us(M * K + K * N + M * N)


def _b_per_token(M, N, K, itemsize):
    return _us((M * K + M * K * N + M * N) * itemsize)


def _roofline_bound(M, N, K, itemsize):
    """The larger of the two roofs: bytes over bandwidth, or FLOPs over the best cuBLAS rate."""
    from course_lib import results  # noqa: PLC0415

    peak = results.load().ceilings["cublas_peak_tflops"][{1: "e4m3", 2: "bf16", 4: "fp32"}[itemsize]]
    return max(decode_roof_us(M, N, K, itemsize), 2 * M * N * K / (peak * 1e6))


def _milliseconds(M, N, K, itemsize):
    return decode_roof_us(M, N, K, itemsize) / 1e3


ROOF_WRONG: tuple[tuple[Callable, str], ...] = (
    (_weights_only, "you count the weight B alone. A (M x K) is read and C (M x N) written too: at a "
                    "batch of one they are small, at a batch of 200 they are not."),
    (_without_c, "you leave out writing C (M x N): the product's result goes to memory too."),
    (_c_in_fp32, "you write C in fp32. The sums are fp32 inside the SM, but C is stored in the input's "
                 "type: itemsize bytes an element, like A and B."),
    (_gib, "GB/s here means 10^9 bytes per second, not 2^30: the copy bandwidth is measured in "
           "decimal gigabytes."),
    (_hbm_peak, f"you used {HBM_PEAK_GBS / 1000:g} TB/s, the HBM peak of the datasheet. No kernel "
                "reaches it: the course's memory roof is the recorded copy bandwidth, copy_gbs."),
    (_flops, "you divide the FLOPs (2 M N K) by the bandwidth. The memory roof divides bytes by bytes per "
             "second; FLOPs belong to the other roof, the peak rate."),
    (_always_bf16, "right in bf16, wrong with other element sizes: multiply by itemsize, not by 2."),
    (_elements, "you count elements, not bytes: multiply by itemsize."),
    (_b_per_token, "you read the weight once per token. On the roof every byte moves once: a kernel "
                   "keeps a tile of B on chip for all M rows."),
    (_roofline_bound, "you take the larger of the two bounds, bytes over bandwidth and FLOPs over the peak "
                      "rate. That is the attainable time, the right idea, but not this exercise's question: "
                      "the memory roof alone is asked here, bytes over the copy bandwidth."),
    (_milliseconds, "that is in milliseconds; the answer is in microseconds."),
)

ROOF_TOLERANCE = 0.002  # a bandwidth typed as 4275 (or 4.27 TB/s) instead of copy_gbs is inside it


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=ROOF_TOLERANCE)


def _larger_of_two_bounds(got: dict, want: dict, cases: list, wrong: list) -> bool:
    """Whether ``got`` looks like max(memory roof, 2MNK / P) for some peak P per element size, whatever
    P the learner took (the recorded best cuBLAS, a datasheet's): every wrong case above the memory
    roof, the peak it implies (2MNK / time) the same within the tolerance at every wrong case of one
    element size, and no right case of that size that would have been above the roof at that peak."""
    if not wrong or any(got[c] <= want[c] for c in wrong):
        return False
    for size in {c[3] for c in wrong}:
        peaks = [2 * c[0] * c[1] * c[2] / got[c] for c in wrong if c[3] == size]   # FLOP per µs
        peak = sum(peaks) / len(peaks)
        if max(peaks) / min(peaks) > 1 + 2 * ROOF_TOLERANCE:
            return False
        right = [c for c in cases if c[3] == size and c not in wrong]
        if any(2 * c[0] * c[1] * c[2] / peak > want[c] * (1 + ROOF_TOLERANCE) for c in right):
            return False
    return True


@dataclass(frozen=True)
class RoofPuzzle(Puzzle):
    """You write ``fn(M, N, K, itemsize) -> microseconds``; the check compares it with the course's
    ``reference`` within :data:`ROOF_TOLERANCE` on every case of ``cases``, some of which the
    notebook never shows. A function that agrees with one of ``known_wrong`` everywhere is told what
    that function does wrong; one that is off by the same factor everywhere is told the bandwidth or
    unit that factor means; one right in bf16 only is told to use ``itemsize``."""

    title: str
    reference: Callable
    cases: Callable[[], Sequence[tuple]]
    known_wrong: Sequence[tuple[Callable, str]] = ()

    def check(self, fn: Callable) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        cases = list(self.cases())
        got = call_on_every_case(self.title, fn, cases, lambda case: f"for {_label(case)}")
        if got is None:
            return Verdict(False)
        for c in cases:
            value = as_number(got[c])  # a numpy scalar or a one-element tensor counts as its number
            if value is None or not math.isfinite(value):
                say(f"{self.title}: for {_label(c)} your function returns {learn.fmt(got[c])}; return a "
                    f"number of microseconds.")
                return Verdict(False)
            got[c] = value
        want = {c: self.reference(*c) for c in cases}
        wrong = [c for c in cases if not _close(got[c], want[c])]
        if not wrong:
            say(f"{self.title}: solved — right on all {len(cases)} cases, "
                f"{len(cases) - len(self._table_cases())} of them shapes or element sizes you have not seen.")
            return Verdict(True)
        say(f"{self.title}: not yet — " + self._diagnosis(got, want, cases, wrong))
        for c in wrong[:3]:
            say(f"{_label(c)}: yours {float(got[c]):.5g}, the roof {want[c]:.5g} µs", indent=2)
        return Verdict(False)

    def _table_cases(self) -> list[tuple]:
        return [(*s.shape, BF16_BYTES) for s in MODEL_SHAPES if s.phase == "decode"]

    def _diagnosis(self, got: dict, want: dict, cases: list, wrong: list) -> str:
        for known, meaning in self.known_wrong:
            if all(_close(got[c], known(*c)) for c in cases):
                return meaning
        if _larger_of_two_bounds(got, want, cases, wrong):
            return dict((k.__name__, m) for k, m in self.known_wrong)["_roofline_bound"]
        ratios = [got[c] / want[c] for c in cases]
        if min(ratios) > 0 and max(ratios) / min(ratios) < 1 + ROOF_TOLERANCE:
            r = sum(ratios) / len(ratios)
            power = round(math.log10(r) / 3) * 3
            if power and _close(r, 10.0**power):
                return (f"yours is 10^{power} times the roof on every case: a unit. The answer is in "
                        f"microseconds (10^-6 s).")
            return (f"yours is {r:.4g} times the roof on every case: the bytes are right, the rate or the "
                    f"unit is not (as if the bandwidth were {recorded_copy_gbs() / r:.0f} GB/s). Divide by "
                    f"copy_gbs x 10^9 bytes per second, and give microseconds.")
        if all(c[3] != BF16_BYTES for c in wrong):
            return "right in bf16, wrong with other element sizes: every matrix has itemsize bytes an element."
        small = [c for c in wrong if c[0] <= 8]
        if not small:
            return ("right where the batch M is small, wrong where it is large: what grows with M, A (M x K) "
                    "and C (M x N), is miscounted.")
        return f"wrong on {len(wrong)} of {len(cases)} cases."

    def solution(self):
        return learn.show_source(self.reference)


decode_roof = RoofPuzzle(
    title="Your decode roof",
    reference=decode_roof_us,
    cases=roof_cases,
    known_wrong=ROOF_WRONG,
)
