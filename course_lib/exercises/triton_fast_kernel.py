"""Exercises of notebook ``05_triton_fast_kernel``: the grouped launch order written by you, and how
far each program of a persistent launch walks."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from course_lib import learn
from course_lib.exercises import FunctionPuzzle, NumberQuestion, _same
from course_lib.exercises._triton import fails_only_where
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.model import schedules
from course_lib.model.hardware import H200
from course_lib.model.layout import cdiv
from course_lib.learn import Verdict, say

# ---- the grouped order ------------------------------------------------------------------------
# Grids of tiles (num_pid_m x num_pid_n) and group sizes: one band and many, a group size that divides
# the tile rows and several that leave a shorter last band, a single tile row or column. Groups go
# past 8 (the course's TF32 configuration groups 16 tile rows): 16 divides 32 tile rows and leaves a
# shorter last band of 13, 20 and 37 tile rows; so does 12.
ORDER_GRIDS = [(m, n, g) for m in (1, 3, 8, 9, 13) for n in (1, 2, 7, 16) for g in (1, 2, 4, 8)] + [
    (m, n, g) for m in (13, 20, 32, 37) for n in (1, 5, 9) for g in (12, 16)]


def _cases() -> list[tuple[int, int, int, int]]:
    return [(pid, m, n, g) for m, n, g in ORDER_GRIDS for pid in range(m * n)]


def _column_major(pid, num_pid_m, num_pid_n, group_m):
    return pid % num_pid_m, pid // num_pid_m


def _band_not_shortened(pid, num_pid_m, num_pid_n, group_m):
    band, within = divmod(pid, group_m * num_pid_n)
    return band * group_m + within % group_m, within // group_m


def _group_capped_at_8(pid, num_pid_m, num_pid_n, group_m):
    """Grouped order with bands of at most 8 tile rows (the group size of the prediction above)."""
    return schedules.grouped_order(pid, num_pid_m, num_pid_n, min(group_m, 8))


def _pid_not_taken_within_group(pid, num_pid_m, num_pid_n, group_m):
    """The bug of an older Triton matmul tutorial: pid_m from pid % rows, where the tutorial's current
    version takes (pid % num_pid_in_group) % rows."""
    in_group = group_m * num_pid_n
    first_m = (pid // in_group) * group_m
    rows = min(num_pid_m - first_m, group_m)
    return first_m + pid % rows, (pid % in_group) // rows


def _as_pair(value):
    """A returned pair read as (pid_m, pid_n): a numpy array, a tensor or any sequence of two whole
    numbers (numpy integers included) becomes a tuple of two ints; anything else comes back as it was."""
    if isinstance(value, (str, bytes, dict)) or value is None:
        return value
    try:
        arr = np.asarray(value.tolist() if hasattr(value, "tolist") and not isinstance(value, np.ndarray) else value)
    except Exception:  # noqa: BLE001 - not array-like: compared as it is
        return value
    if arr.shape == (2,) and arr.dtype.kind in "iu":
        return int(arr[0]), int(arr[1])
    return value


def _is_pair_shaped(value) -> bool:
    try:
        arr = np.asarray(value.tolist() if hasattr(value, "tolist") and not isinstance(value, np.ndarray) else value)
    except Exception:  # noqa: BLE001
        return False
    if arr.shape != (2,) or arr.dtype.kind not in "iuf":
        return False
    return bool(np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))


def _not_integers(value) -> bool:
    """Whether a pair holds a float or a bool (Python's, NumPy's or a tensor's), whole or not."""
    if hasattr(value, "dtype"):
        kind = getattr(value.dtype, "kind", None)
        if kind is None:  # a tensor: torch dtypes have no kind
            return bool(value.dtype.is_floating_point or value.dtype == torch.bool)
        return kind in "fb"
    try:
        return any(isinstance(x, (bool, float, np.bool_, np.floating)) for x in value)
    except TypeError:
        return False


def _column_bands(pid, num_pid_m, num_pid_n, group_m):
    """Grouped order turned around: bands of group_m tile columns, walked along their rows."""
    band, within = divmod(pid, group_m * num_pid_m)
    first_n = band * group_m
    cols = min(num_pid_n - first_n, group_m)
    return within // cols, first_n + within % cols


@dataclass(frozen=True)
class _OrderPuzzle(FunctionPuzzle):
    """The grouped order's puzzle: a function puzzle that, for a wrong answer none of ``known_wrong``
    explains, also names the pattern of the cases it gets wrong (``diagnoses``, on {case: "wrong" or
    ""}: :mod:`course_lib.exercises._triton`'s)."""

    diagnoses: tuple = ()

    def check(self, fn) -> Verdict:
        if callable(fn):
            learner = fn

            def fn(*case):  # noqa: F811 - the learner's function, its pair read as two ints
                return _as_pair(learner(*case))

            values = []
            try:
                values = [learner(*c) for c in self.cases()]
                odds = [v for v in values if not _is_pair_shaped(v)]
                odd = odds[0] if odds else None
                shaped = not odds or all(v is None for v in values)  # None throughout: nothing written yet
            except Exception:  # noqa: BLE001 - the check below says what it raised
                shaped = True
            if not shaped:
                say(f"{self.title}: not yet — it returned {learn.fmt(odd)}, which is not two whole numbers: "
                    f"return a tuple (pid_m, pid_n).")
                return Verdict(False)
            inexact = next((v for v in values if v is not None and _not_integers(v)), None)
            if inexact is not None:
                say(f"{self.title}: not yet — it returned {inexact!r}: tile indices are integers, "
                    "and in a Triton kernel a float or a bool cannot index a tile. Keep the arithmetic in "
                    "integers: // for division (/ gives a float), and no comparisons standing for 0 and 1.")
                return Verdict(False)
        verdict = super().check(fn)
        if not verdict and fn is not None:
            note = self._pattern(fn)
            if note:
                say(note, indent=2)
        return verdict

    def _pattern(self, fn) -> str | None:
        cases = list(self.cases())
        try:
            got = {case: fn(*case) for case in cases}
        except Exception:  # noqa: BLE001 - the check above said what it raised
            return None
        if all(v is None for v in got.values()):
            return None
        if any(all(_same(got[c], known(*c)) for c in cases) for known, _ in self.known_wrong):
            return None  # the check above named it
        results = {case: "" if _same(got[case], self.reference(*case)) else "wrong" for case in cases}
        for diagnose in self.diagnoses:
            note = diagnose(results)
            if note:
                return note
        return None


def _in_short_band(case) -> bool:
    pid, num_pid_m, num_pid_n, group_m = case
    return num_pid_m % group_m != 0 and pid >= (num_pid_m // group_m) * group_m * num_pid_n


grouped_order = _OrderPuzzle(
    title="Your grouped order",
    reference=schedules.grouped_order,
    cases=_cases,
    show=lambda c: f"program {c[0]} of a {c[1]} x {c[2]} grid of tiles, group_m = {c[3]}",
    known_wrong=[
        (_group_capped_at_8, "right while group_m <= 8; with larger groups (the course's TF32 "
         "configuration uses 16) your bands stop at 8 tile rows. A band is group_m tile rows, whatever "
         "group_m is."),
        (schedules.row_major_order, "this is row-major order: the programs sweep whole rows of tiles (walking "
         "along the rows inside a band gives the same). Grouped order walks down the columns of a band "
         "of group_m tile rows."),
        (_column_major, "this is column-major order over the whole grid: one band of all num_pid_m "
         "rows. The bands are group_m tile rows high."),
        (_band_not_shortened, "right while group_m divides num_pid_m; otherwise the last band has "
         "fewer than group_m rows, and yours sends its programs to tiles below the grid."),
        (_pid_not_taken_within_group, "right except on a shorter last band: your pid_m takes pid % "
         "(the band's tile rows), but pid counts the programs of every band before this one too; "
         "take (pid % num_pid_in_group) % (the band's tile rows), the program's place within its own "
         "group (only where the band has group_m rows do the two agree)."),
        (_column_bands, "these are bands of group_m tile columns, walked along their rows: grouped "
         "order turned around. The bands are group_m tile rows, walked down their columns."),
        (lambda pid, num_pid_m, num_pid_n, group_m: schedules.grouped_order(pid, num_pid_m, num_pid_n, group_m)[::-1],
         "the right tiles, returned the wrong way round: the function gives (pid_m, pid_n), the row first."),
    ],
    diagnoses=(
        fails_only_where(
            lambda case: case[3] > 8,
            "Right wherever group_m <= 8, wrong only for larger groups (the course's TF32 configuration "
            "uses 16): nothing in the grouped order depends on 8. A band is group_m tile rows, whatever "
            "group_m is."),
        fails_only_where(
            _in_short_band,
            "Wrong only on programs of a shorter last band (where group_m does not divide num_pid_m): "
            "there the band has num_pid_m - first_m tile rows, not group_m, and the walk down its "
            "columns must use that number."),
    ),
    reveal=schedules.grouped_order,
)

# ---- predict first: blocks read by the first wave ---------------------------------------------------
# C in 128 x 128 tiles at 4096^3: a 32 x 32 grid of tiles; the first 132 programs (one per SM) in
# grouped order with bands of 8 tile rows. A count of blocks: only the exact integer is right.
WAVE_GRID, WAVE_GROUP_M, WAVE_PROGRAMS = 32, 8, 132


def _wave_blocks(order) -> int:
    return schedules.blocks_loaded(order, WAVE_GRID, WAVE_GRID, WAVE_GROUP_M, WAVE_PROGRAMS)["A + B"]


grouped_blocks = NumberQuestion(
    what="Blocks read by the first 132 programs, grouped",
    unit="blocks",
    expected=lambda: _wave_blocks(schedules.grouped_order),
    hint="a band is 8 tile rows, walked column by column: how many columns do 132 programs reach, "
         "and how many block-rows of A do they read?",
    wrong=[
        (lambda want: WAVE_GROUP_M + WAVE_PROGRAMS // WAVE_GROUP_M, "one column short: 132 is no multiple of "
         "8, so the last column the programs reach is only partly computed. Does a partly read column "
         "of B count?"),
        (lambda want: _wave_blocks(schedules.row_major_order), "that is the row-major count given above; "
         "in grouped order the programs walk down the columns of a band of 8 tile rows."),
        (lambda want: cdiv(WAVE_PROGRAMS, WAVE_GROUP_M), "those are the block-columns of B only; add the "
         "8 block-rows of A that the band covers."),
        (lambda want: WAVE_GROUP_M + WAVE_GRID, "that is the whole band, all 32 columns; 132 programs "
         "reach only part of it."),
    ],
)

# ---- exercise: who walks how far -----------------------------------------------------------------
PERSISTENT_SIZE = 4096  # M = N = K of the question


def _bf16_tile() -> tuple[int, int]:
    cfg = c04.FAST_CONFIGS["bf16"][0]  # the first candidate: the one that won at 4096^3
    return cfg.block_m, cfg.block_n


def _sms() -> int:
    return H200.sms  # the recorded H200's: one program per SM


def _tiles() -> int:
    bm, bn = _bf16_tile()
    return cdiv(PERSISTENT_SIZE, bm) * cdiv(PERSISTENT_SIZE, bn)


tiles = NumberQuestion(
    what="(a) tiles of C",
    unit="tiles",
    expected=_tiles,
    hint="C is 4096 x 4096; how many tiles of 128 x 256 cover it?",
    wrong=[
        (lambda want: (PERSISTENT_SIZE // 128) ** 2, "that is C in 128 x 128 tiles; a tile is 128 x 256."),
        (lambda want: (PERSISTENT_SIZE // 256) ** 2, "that is C in 256 x 256 tiles; a tile is 128 x 256."),
        (lambda want: _sms(), "that is the number of programs of the persistent launch, one per SM; "
         "the tiles are what they share out."),
    ],
)

programs_with_one_more = NumberQuestion(
    what="(b) one tile more",
    unit="programs",
    expected=lambda: _tiles() % _sms(),
    hint=f"program p computes tiles p, p + {H200.sms}, p + {2 * H200.sms}, ...: divide the tiles by the programs",
    wrong=[
        (lambda want: _sms() - _tiles() % _sms(), "those are the programs with one tile fewer: the "
         "others compute one more."),
        (lambda want: _tiles() // _sms(), "that is how many tiles every program computes at least; "
         "the question is how many programs compute one more than that."),
        (lambda want: _tiles() // _sms() + 1, "that is how many tiles the busiest programs compute; "
         "the question is how many programs they are."),
        (lambda want: (PERSISTENT_SIZE // 128) ** 2 % _sms(), "that remainder is for 128 x 128 tiles; "
         "a tile is 128 x 256."),
        (0, "the tiles are not a multiple of the programs: some programs compute one more."),
    ],
)
