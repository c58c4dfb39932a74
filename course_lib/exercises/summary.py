"""Exercises of notebook ``10_summary``: plan a tile and split-K for real shapes with the wave model
(you write the plan), a tile's intensity, waves at 6144³, the largest square in one wave. (The decode
roof is notebook 11's: ``course_lib.exercises.decode_and_host_time``.)

Every expected answer comes from the course's models (``course_lib.model.waves``, the shape table of
``course_lib.model_shapes``, the recorded roofs); the recording's own choices are printed beside a
plan, labelled as recorded.

The plan model (``estimate``) is the wave model of notebook 00 with two costs added, each from a
number the course measured or built:

* a program runs one tile (or one range of K of a tile) on one SM; programs run in waves of 132;
* a 128 x 128 tile works at :data:`HALF_TILE_RATE` of the 128 x 256 tile's rate: the recording's
  ``triton_fast`` candidates at the prefill rows where both tiles fill their waves (a test holds the
  number to the recording);
* every program also fills its pipeline and stores its tile, worth :data:`FILL_SLICES` K-slices of
  64 (``triton_fast``'s bf16 pipeline depth); a range of a split tile also writes its fp32 partial
  tile and the last range reads it back: as long as loading that many bytes of operands takes
  (:func:`partial_slices`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

from course_lib import learn
from course_lib.exercises import (NumberQuestion, Puzzle, Question, as_number, call_on_every_case, nothing_yet,
                                  recorded_ridge)
from course_lib.kernels import tensor_cores as tc
from course_lib.learn import Verdict, say
from course_lib.model import hardware, waves
from course_lib.model.hardware import BF16_BYTES, H200
from course_lib.model.layout import cdiv
from course_lib.model_shapes import GPT2, GPT2_XL, LLAMA3_8B, MODEL_SHAPES, ModelShape

SMS = H200.sms

# ---- the plan puzzle: a tile and split-K per shape, scored by the wave model ----------------------

TILES = ((128, 256), (128, 128))
SPLITS = (1, 2, 4)
BLOCK_K = 64
FILL_SLICES = 3          # triton_fast's bf16 pipeline depth (num_stages of FAST_CONFIGS["bf16"][0])
HALF_TILE_RATE = 0.9     # a 128 x 128 tile's rate per SM, relative to 128 x 256 (see the docstring)
GOAL = 0.92              # a plan passes where it reaches this share of the best plan the model allows


def partial_slices(block_m: int, block_n: int) -> float:
    """K-slices of operand loads that writing a tile's fp32 partial sums and reading them back cost."""
    return 2 * block_m * block_n * hardware.itemsize("fp32") / ((block_m + block_n) * BLOCK_K * BF16_BYTES)


@dataclass(frozen=True)
class Estimate:
    """What the wave model says of one plan at one shape."""

    shape: tuple[int, int, int]
    plan: tuple[int, int, int]
    programs: int
    waves: int
    busy: float          # programs / (waves x SMS): the share of the SMs' time with a program
    useful: float        # the share of the tiles' area inside C
    rate: float          # the tile's rate per SM, relative to 128 x 256
    k_share: float       # the share of a program's time spent on its own K-slices

    @property
    def score(self) -> float:
        """The share of the GPU's time doing useful work at the big tile's rate."""
        return self.busy * self.useful * self.rate * self.k_share

    def describe(self) -> str:
        bm, bn, split = self.plan
        text = (f"{bm}x{bn}, split {split}: {self.programs} programs in {self.waves} "
                f"wave{'s' if self.waves != 1 else ''}, SMs {100 * self.busy:.0f} % busy")
        if split > 1:
            slices = cdiv(self.shape[2], BLOCK_K) / split
            text += f", ranges of {slices:.3g} K-slices"
        return text


def estimate(M: int, N: int, K: int, block_m: int, block_n: int, split_k: int) -> Estimate:
    """The plan (block_m, block_n, split_k) at M x N x K under the wave model (module docstring)."""
    tiles = waves.gemm_waves(M, N, block_m, block_n, occupancy=1)
    run = waves.waves(tiles.blocks * split_k, 1)
    per_range = cdiv(K, BLOCK_K) / split_k
    overhead = FILL_SLICES + (partial_slices(block_m, block_n) if split_k > 1 else 0.0)
    return Estimate(
        shape=(M, N, K), plan=(block_m, block_n, split_k), programs=run.blocks, waves=run.waves,
        busy=run.efficiency, useful=M * N / (tiles.blocks * block_m * block_n),
        rate=1.0 if (block_m, block_n) == TILES[0] else HALF_TILE_RATE,
        k_share=per_range / (per_range + overhead),
    )


def best_estimate(M: int, N: int, K: int) -> Estimate:
    """The best plan the model allows at M x N x K (the bigger tile, then fewer splits, on a tie)."""
    return max((estimate(M, N, K, bm, bn, s) for bm, bn in TILES for s in SPLITS), key=lambda e: e.score)


def plan(M: int, N: int, K: int) -> tuple[int, int, int]:
    """The course's plan: whole 128 x 256 tiles while they keep the SMs at least 80 % busy (stage
    6's rule); otherwise, where K is long (at least 32 K-slices of 64), split it into the number of
    ranges (1, 2 or 4) whose programs keep the SMs busiest, the fewest on a tie; where K is short,
    halve the tile."""
    def busy(programs):
        return programs / (math.ceil(programs / SMS) * SMS)   # waves are whole: round up

    tiles = math.ceil(M / 128) * math.ceil(N / 256)
    if busy(tiles) >= 0.8:
        return (128, 256, 1)
    if math.ceil(K / 64) >= 32:
        return (128, 256, max((1, 2, 4), key=lambda ranges: busy(tiles * ranges)))
    return (128, 128, 1)


# Weight gradients (K = the batch's tokens) the check adds to the table's rows, unseen by the learner:
# where the table's one training row, gpt2 dW qkv, lets a plan that never splits K pass (half-size
# tiles come within a few per cent of split-K there), these need split-K, in two ranges or in four;
# and one where K is too short for any split to pay.
HIDDEN_SHAPES: tuple[ModelShape, ...] = (
    ModelShape("gpt2 dW proj", GPT2, "gradient of c_proj's weight", "training", 768, 768, 16384,
               "6 x 3 = 18 tiles: even 128 x 128 tiles leave most SMs idle; four ranges fill 72"),
    ModelShape("gpt2-xl dW proj", GPT2_XL, "gradient of c_proj's weight", "training", 1600, 1600, 16384,
               "13 x 7 = 91 tiles: two ranges make two waves as empty as one; four fill three"),
    ModelShape("gpt2 dW qkv 6k", GPT2, "gradient of c_attn's weight", "training", 768, 2304, 6144,
               "54 tiles: two ranges of 48 K-slices fill a wave; four add a second"),
    ModelShape("gpt2 dW qkv 1.5k", GPT2, "gradient of c_attn's weight", "training", 768, 2304, 1536,
               "54 tiles, 24 K-slices each: too short for a split to pay"),
    ModelShape("gpt2 dW proj 6k", GPT2, "gradient of c_proj's weight", "training", 768, 768, 6144,
               "18 tiles, 96 K-slices: four ranges fill 72 SMs; 128 x 128 tiles only 36"),
    # Two prompts whose whole tiles sit where a slip in the rule shows (found by fresh adversarial
    # learners): exactly one full wave (a wave count of tiles // 132 + 1 calls it half empty), and 73 %
    # busy (a threshold of 0.7 for the rule's 0.8 keeps whole tiles where two ranges fill the SMs).
    ModelShape("gpt2 fc 1408", GPT2, "MLP up (c_fc)", "prefill", 1408, 3072, 768,
               "11 x 12 = 132 tiles: exactly one full wave"),
    ModelShape("llama3 o 1.5k", LLAMA3_8B, "attention output", "prefill", 1536, 4096, 4096,
               "12 x 16 = 192 tiles: a wave and 45 % of another; two ranges make 384 of 396"),
    # ... and two short prompts (a second learner's): how many ranges (those that fill the waves best, not
    # the first count to reach 80 %), and split-K of the big tile, not of the halved one. The rule's plan
    # reaches 92.3 % of the model's best at both (a test holds every shape's rule plan to the goal).
    ModelShape("llama3 qkv 256", LLAMA3_8B, "attention q,k,v (fused)", "prefill", 256, 6144, 4096,
               "2 x 24 = 48 tiles, 64 K-slices: two ranges keep 96 of 132 SMs busy, four no more (192 of 264)"),
    ModelShape("llama3 gate 384", LLAMA3_8B, "MLP gate (or up)", "prefill", 384, 14336, 4096,
               "3 x 56 = 168 tiles: two ranges make 336 programs for 396 slots; halved tiles split in four, 1344"),
)


def plan_shapes() -> list[ModelShape]:
    """The shapes a plan is checked on: every prefill and training row of the shape table but its two
    squares (768^3 and 1600^3: at so few K-slices per tile the puzzle's wave model and the two tiles
    it offers are not what decides), then :data:`HIDDEN_SHAPES`."""
    table = [s for s in MODEL_SHAPES if s.phase != "decode" and not s.M == s.N == s.K]
    return table + list(HIDDEN_SHAPES)


@lru_cache(maxsize=1)
def recorded_choices() -> dict[tuple[int, int, int], str]:
    """What ``triton_fast`` bf16 chose at each shape in the course's H200 recording (autotuning),
    as its configuration's label ("128x256x64 g8 w8 s3 persistent split2", "... splitK2")."""
    from course_lib import results  # noqa: PLC0415

    tuning = results.summary("shape_table")["triton_fast_tuning"]
    return {(t["M"], t["N"], t["K"]): t["chosen"] for t in tuning if t["dtype"] == "bf16"}


def recorded_plan(label: str) -> tuple[int, int, int]:
    """A recorded configuration as a plan: its tile and its split-K ranges ("split2" without the K
    is the epilogue stored in two halves, not split-K)."""
    block_m, block_n = (int(v) for v in label.split()[0].split("x")[:2])
    split = next((int(w[len("splitK"):]) for w in label.split() if w.startswith("splitK")), 1)
    return block_m, block_n, split


def _always_biggest(M, N, K):
    return (128, 256, 1)


def _split_when_few(M, N, K):  # few tiles: split, whatever K
    programs = math.ceil(M / 128) * math.ceil(N / 256)
    return (128, 256, 2) if programs / (math.ceil(programs / SMS) * SMS) < 0.8 else (128, 256, 1)


def _always_half(M, N, K):
    return (128, 128, 1)


def _split_when_k_long(M, N, K):  # split wherever K is long, whether the tiles fill the SMs or not
    return (128, 256, 2) if math.ceil(K / 64) >= 32 else (128, 256, 1)


_RANGE_COST = f"about {FILL_SLICES + partial_slices(*TILES[0]):.0f} K-slices"
_CHOOSE_RANGES = ("Choose the ranges from the tiles: as many as it takes for tiles x ranges to fill "
                  "the waves, no more.")

# What a plan misses, by idea: the check names the idea behind a plan's low shapes.
_FEW_TILES = "its tiles leave most of the last wave empty, or are fewer than the SMs"
_MORE_PROGRAMS = ("more programs keep more SMs busy: a smaller tile, or split-K. (Waves are whole: round "
                  f"tiles / {SMS} up.)")
IDEA_SPLIT_SHORT = ("split-K where K is short: every range pays for its fp32 partial tile and for "
                    f"refilling the pipeline, {_RANGE_COST}; with a dozen slices that costs more than "
                    f"the idle SMs. Split only where K is long (stage 6: {tc.STREAM_K_MIN_SLICES} slices "
                    "or more).")
IDEA_HALF_WHEN_FULL = ("where the big tiles already fill their waves, the smaller tile only costs (it "
                       f"works at {HALF_TILE_RATE:g} of the big tile's rate).")
IDEA_SPLIT_WHEN_FULL = ("split-K where the tiles already fill the SMs: the extra programs add waves and "
                        "every range pays for its partial tile. Split only when whole tiles leave SMs "
                        "idle.")
IDEA_NO_SPLIT = ("no split-K where whole tiles are too few and K is long: there even 128 x 128 tiles "
                 "leave most SMs idle. That is what split-K is for: cut each tile's K into ranges, one "
                 "program each, until the programs fill the SMs; with a long K each range's partial "
                 f"tile ({_RANGE_COST}) costs little. " + _CHOOSE_RANGES)
IDEA_TOO_MANY_RANGES = ("more ranges of K than the SMs need: where fewer ranges already keep as many SMs "
                        "busy, more of them add a wave, and each pays for its partial tile "
                        f"({_RANGE_COST}). " + _CHOOSE_RANGES)
IDEA_TOO_FEW_RANGES = ("too few ranges of K: with so few tiles, two ranges still leave SMs idle that "
                       "four would fill. " + _CHOOSE_RANGES)

PLAN_WRONG: tuple[tuple[Callable, str], ...] = (
    (_always_biggest, f"always the biggest tile. Where {_FEW_TILES}, {_MORE_PROGRAMS}"),
    (_split_when_few, IDEA_SPLIT_SHORT),
    (_always_half, "always the 128 x 128 tile: " + IDEA_HALF_WHEN_FULL),
    (_split_when_k_long, IDEA_SPLIT_WHEN_FULL),
)


def _busy(programs: int) -> float:
    return waves.waves(programs, 1).efficiency


def missed_idea(shape: tuple[int, int, int], p: tuple[int, int, int]) -> str | None:
    """The idea a plan ``p`` misses at ``shape`` (one of the ``IDEA_`` texts), judged by the rule the
    puzzle teaches: whole tiles when they fill the SMs; else split-K where K is long, in as many
    ranges as the SMs need; else a smaller tile."""
    M, N, K = shape
    bm, bn, split = p
    few = _busy(waves.gemm_waves(M, N, *TILES[0], occupancy=1).blocks) < tc.STREAM_K_BELOW
    long_k = cdiv(K, BLOCK_K) >= tc.STREAM_K_MIN_SLICES
    if split > 1 and not long_k:
        return IDEA_SPLIT_SHORT
    if split > 1 and not few:
        return IDEA_SPLIT_WHEN_FULL
    if few and long_k:
        own = waves.gemm_waves(M, N, bm, bn, occupancy=1).blocks
        if split == 1 and best_estimate(M, N, K).plan[2] > 1:
            return IDEA_NO_SPLIT
        if split > 1 and any(r > split and _busy(own * r) > _busy(own * split) for r in SPLITS):
            return IDEA_TOO_FEW_RANGES
        if split > 1 and any(r < split and _busy(own * r) >= _busy(own * split) for r in SPLITS):
            return IDEA_TOO_MANY_RANGES
    if few and split == 1 and (bm, bn) == TILES[0]:
        return f"the big tile where {_FEW_TILES}: there {_MORE_PROGRAMS}"
    if not few and (bm, bn) == TILES[1]:
        return "the 128 x 128 tile: " + IDEA_HALF_WHEN_FULL
    return None


def _whole(v: Any) -> int | None:
    """``v`` as an int when it is a whole number: an int, a numpy integer, or a float (numpy's too, or a
    one-element tensor) with nothing after the point such as 128.0; None for anything else (a bool, 128.5,
    text)."""
    value = as_number(v)
    if value is None or not math.isfinite(value) or not float(value).is_integer():
        return None
    return int(value)


def _as_plan(p: Any) -> tuple[int, int, int] | None:
    """A returned plan as three ints, when it is three whole numbers (a tuple, a list or a numpy array;
    128.0 reads as 128) of a tile in :data:`TILES` and a split in :data:`SPLITS`; None otherwise."""
    if not (isinstance(p, (tuple, list)) or getattr(p, "ndim", None) == 1) or len(p) != 3:
        return None
    plan = tuple(_whole(v) for v in p)
    if any(v is None for v in plan) or plan[:2] not in TILES or plan[2] not in SPLITS:
        return None
    return plan


def _plan_text(p: Sequence[int]) -> str:
    return f"{p[0]}x{p[1]}, split {p[2]}"


@dataclass(frozen=True)
class PlanPuzzle(Puzzle):
    """You write ``plan(M, N, K) -> (block_m, block_n, split_k)``; the check scores it with the wave
    model at every shape of :func:`plan_shapes` and asks for at least :data:`GOAL` of the best plan
    the model allows at each. A plan that matches one of ``known_wrong`` everywhere is told what that
    plan does wrong; any other is told the idea it misses at the shapes where it falls short
    (:func:`missed_idea`). Solved or not, what ``triton_fast`` chose in the recording is printed
    beside."""

    title: str
    reference: Callable
    known_wrong: Sequence[tuple[Callable, str]] = ()

    def check(self, fn: Callable) -> Verdict:
        if nothing_yet(self.title, fn):
            return Verdict(False)
        shapes = plan_shapes()
        labels = {s.shape: s.label for s in shapes}
        returned = call_on_every_case(self.title, fn, list(labels), lambda shape: f"at {labels[shape]} {shape}")
        if returned is None:
            return Verdict(False)
        plans = {}
        for s in shapes:
            p = returned[s.shape]
            plan = _as_plan(p)
            if plan is None:
                say(f"{self.title}: at {s.label} {s.shape} your function returns {learn.fmt(p)}; a plan is "
                    f"(block_m, block_n, split_k) with a tile of {TILES[0]} or {TILES[1]} and split_k "
                    f"1, 2 or 4.")
                return Verdict(False)
            plans[s.shape] = plan
        mine = {s.shape: estimate(*s.shape, *plans[s.shape]) for s in shapes}
        best = {s.shape: best_estimate(*s.shape) for s in shapes}
        low = [s for s in shapes if mine[s.shape].score < GOAL * best[s.shape].score]
        if not low:
            say(f"{self.title}: solved — at least {100 * GOAL:.0f} % of the model's best plan at all "
                f"{len(shapes)} shapes.")
            self._table(shapes, plans, mine, best)
            return Verdict(True)
        meaning = next((m for known, m in self.known_wrong
                        if all(tuple(known(*c)) == plans[c] for c in plans)), None)
        ideas = [meaning] if meaning else list(dict.fromkeys(
            idea for s in low if (idea := missed_idea(s.shape, plans[s.shape])) is not None))
        say(f"{self.title}: not yet — below {100 * GOAL:.0f} % of the model's best plan at {len(low)} of "
            f"{len(shapes)} shapes" + (f": {ideas[0]}" if ideas else "."))
        for idea in ideas[1:2]:
            say(f"Also: {idea}", indent=2)
        recorded = recorded_choices()
        for s in low[:3]:
            m, b = mine[s.shape], best[s.shape]
            say(f"{s.label} {s.shape}: yours reaches {100 * m.score / b.score:.0f} % of the best", indent=2)
            say(f"yours: {m.describe()}", indent=4)
            say(f"best:  {b.describe()}", indent=4)
            if s.shape in recorded:
                say(f"recorded on the H200: triton_fast bf16 ran {_plan_text(recorded_plan(recorded[s.shape]))}",
                    indent=4)
        return Verdict(False)

    def _table(self, shapes, plans, mine, best) -> None:
        recorded = recorded_choices()
        say(f"{'shape':<17}{'your plan':<18}{'of best':>8}   triton_fast bf16 (recorded on the H200)")
        for s in shapes:
            share = 100 * mine[s.shape].score / best[s.shape].score
            # "-": a shape the table does not hold; "choice not kept": a table row whose recording kept
            # triton_fast's time but not the configuration its autotuning chose.
            ran = (_plan_text(recorded_plan(recorded[s.shape])) if s.shape in recorded
                   else "choice not kept" if s in MODEL_SHAPES else "-")
            say(f"{s.label:<17}{_plan_text(plans[s.shape]):<18}{share:>6.0f} %   {ran}")

    def solution(self):
        return learn.show_source(self.reference)


tile_plan = PlanPuzzle(title="Your plan", reference=plan, known_wrong=PLAN_WRONG)


# ---- exercise 1: a tile's intensity, and which side of the ridge --------------------------------

TILE = (192, 192)  # cuBLAS's tile at gpt2 qkv 2k (notebook 10, Nsight Compute)


def tile_intensity(block_m: int, block_n: int, itemsize: int = BF16_BYTES) -> float:
    """FLOP per byte of a block_m x block_n tile: 2 BM BN K operations for K (BM + BN) elements."""
    return 2 * block_m * block_n / (itemsize * (block_m + block_n))


intensity_192 = NumberQuestion(
    what="intensity of a 192 x 192 bf16 tile (FLOP/byte)",
    unit="FLOP/byte",
    expected=lambda: tile_intensity(*TILE),
    rel_tol=0.01,
    hint="2 x 192 x 192 x K FLOP over (192 + 192) x K elements of 2 bytes",
    wrong=[
        (lambda want: tile_intensity(*TILE, itemsize=4), "that counts 4 bytes an element (or multiply-"
                                                         "adds, not FLOP): bf16 is 2 bytes, a multiply-add "
                                                         "2 FLOP."),
        (lambda want: tile_intensity(*TILE, itemsize=1), "that is FLOP per element; per byte, divide by "
                                                         "2 bytes."),
        (lambda want: 2 * TILE[0] * TILE[1] / (BF16_BYTES * TILE[0] * TILE[1]), "the tile reads K (BM + BN) "
                                                                          "elements, not K BM BN."),
    ],
)

class _ReadWhenChecked(Sequence):
    """A table of wrong answers built when it is read, so that a meaning can name a number of the
    recording (the bf16 ridge as notebook 10 prints it) without loading it at import."""

    def __init__(self, build: Callable[[], list[tuple[Any, str]]]) -> None:
        self._build = build

    def __getitem__(self, i):
        return self._build()[i]

    def __len__(self) -> int:
        return len(self._build())


def _side(answer: Any) -> Any:
    """"left" or "right" from an answer that starts with that word and names no other side ("Left of
    the ridge.", " right "); anything else as typed."""
    if not isinstance(answer, str):
        return answer
    words = re.findall(r"[a-z]+", answer.lower())
    if words and words[0] in ("left", "right") and ({"left", "right"} - {words[0]}).isdisjoint(words):
        return words[0]
    return answer.strip().lower()


ridge_side = Question(
    what="left or right of the bf16 ridge",
    normalize=_side,
    expected=lambda: "left" if tile_intensity(*TILE) < recorded_ridge("bf16") else "right",
    hint="compare with the bf16 ridge printed in the roofline section",
    wrong=_ReadWhenChecked(lambda: [
        ("right", f"even this big tile is left of the bf16 ridge, which lies further right, at "
                  f"{recorded_ridge('bf16'):.0f} FLOP/byte: memory-bound if every read went to DRAM."),
    ]),
)


# ---- exercise 2: waves at 6144^3 --------------------------------------------------------------

WAVE_SHAPE = (6144, 6144)
BIG_TILE = (128, 256)


def _waves_6144(tile: tuple[int, int] = BIG_TILE) -> waves.Waves:
    return waves.gemm_waves(*WAVE_SHAPE, *tile, occupancy=1)


tiles_6144 = NumberQuestion(
    what="tiles",
    expected=lambda: _waves_6144().blocks,
    hint="6144 / 128 tile rows times 6144 / 256 tile columns",
    wrong=[
        (_waves_6144((128, 128)).blocks, "that is for 128 x 128 tiles; these are 256 wide."),
        (_waves_6144((256, 256)).blocks, "that is for 256 x 256 tiles; these are 128 tall."),
    ],
)

waves_6144 = NumberQuestion(
    what="waves",
    expected=lambda: _waves_6144().waves,
    hint=f"one tile per SM at a time, {SMS} SMs",
    wrong_when=(
        # any fraction of waves between the full waves and the answer, however many decimals it has
        (lambda v, want: _waves_6144().full_waves < v < want and v != int(v),
         "a wave is whole: round the division up."),
    ),
    wrong=[
        (_waves_6144().full_waves, "rounded down: the tiles left over after the full waves need one "
                                   "more."),
    ],
)


def _decimals(value: float) -> int:
    """How many decimals a number as typed has: 73 -> 0, 72.7 -> 1, 72.73 -> 2, at most 12; a float32
    such as numpy's 72.7 (72.69999694...) reads as the 72.7 it was written as."""
    return next((d for d in range(12) if math.isclose(value, round(value, d), rel_tol=1e-6, abs_tol=1e-12)), 12)


def _rounded_right(value: float, exact: float) -> bool:
    """Whether ``value`` is ``exact`` rounded to the decimals it is written with, to the nearest whole
    at least: 73, 72.7, 72.73 for 72.727...; not 72 (cut down) nor 72.3, 73.7."""
    return abs(value - exact) <= 0.5 * 10.0 ** -_decimals(value) + 1e-6 * abs(exact)


def _cut_down(value: float, exact: float) -> bool:
    """Whether ``value`` is ``exact`` cut down (truncated) to the decimals it is written with."""
    d = _decimals(value)
    return not _rounded_right(value, exact) and math.isclose(value, math.floor(exact * 10 ** d) / 10 ** d,
                                                             rel_tol=1e-6)


def _last_wave_percent() -> float:
    """How full the last wave is, in per cent, unrounded: the tiles it holds over the SMs."""
    return 100 * _waves_6144().tail_utilisation


last_wave_6144 = NumberQuestion(
    what="last wave, % full",
    unit="per cent",
    expected=_last_wave_percent,
    accepts=lambda v: _rounded_right(v, _last_wave_percent()),
    hint=f"the tiles left for the last wave, over {SMS}, in per cent, rounded to the nearest whole per cent "
         "(or to the decimals you give)",
    wrong_when=(
        (lambda v, want: _cut_down(v, want), "cut down, not rounded to the nearest."),
        (lambda v, want: _rounded_right(v, 100 - want), "that is the idle share of the last wave; how full is it?"),
        (lambda v, want: v == _waves_6144().tail_blocks,
         f"that is the number of tiles in the last wave; as a per cent of {SMS}?"),
        (lambda v, want: _rounded_right(v, 100 * _waves_6144().efficiency),
         "that is how busy the SMs are over all the waves; the question asks about the last one."),
        (lambda v, want: _rounded_right(100 * v, want) and v < 1,
         "that is a fraction; the question asks for per cent."),
    ),
)


# ---- exercise 3: the largest square in one wave -------------------------------------------------

ONE_WAVE_TILE = (192, 192)  # cuBLAS's tile at some of the shape table's rows (notebook 10)


def largest_one_wave(tile: tuple[int, int] = ONE_WAVE_TILE, up_to: int = 8192) -> int:
    """The largest multiple of the tile's side whose square product fits its tiles in one wave of 132."""
    step = tile[0]
    return max(n for n in range(step, up_to + 1, step) if waves.gemm_waves(n, n, *tile, occupancy=1).waves == 1)


one_wave_n = NumberQuestion(
    what="largest N in one wave",
    expected=largest_one_wave,
    hint="N = 192 m gives m x m tiles; how large may m² be?",
    wrong=[
        (lambda want: want + ONE_WAVE_TILE[0], "one step too far: its tiles need a second wave."),
        (largest_one_wave((128, 256)), "that is for stage 6's 128 x 256 tiles; these are 192 x 192."),
        (SMS * ONE_WAVE_TILE[0], f"{SMS} tiles in a row; a square N x N has (N / 192) squared tiles."),
    ],
)

