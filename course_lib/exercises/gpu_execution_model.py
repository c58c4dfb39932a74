"""Exercises of notebook ``00_gpu_execution_model``: the fp32 bound of the H200, and where wave
quantisation first strikes."""

from __future__ import annotations

from dataclasses import dataclass

from course_lib.exercises import NumberQuestion, as_number, shown_apart
from course_lib.learn import Verdict, close_to, say
from course_lib.model import waves
from course_lib.model.hardware import H200, WARP_SIZE

TILE = 128  # square tiles of C, one block per SM
BOOST_CLOCK_GHZ = 1.98  # the H200's highest SM clock (NVIDIA's H200 datasheet), as 00 states it


def _fp32_bound() -> float:
    # every scheduler (one per register sub-partition) of every SM issues one fp32 multiply-add
    # instruction per cycle: 32 lanes, two operations each
    return H200.sms * H200.reg_subpartitions * WARP_SIZE * 2 * BOOST_CLOCK_GHZ * 1e9 / 1e12


def fp32_bound_working() -> str:
    """The fp32 bound worked out, for the cell that shows it once the learner has predicted."""
    return (f"{H200.sms} SMs x {H200.reg_subpartitions} schedulers x {WARP_SIZE} lanes x 2 operations x "
            f"{BOOST_CLOCK_GHZ}e9 cycles/s = {_fp32_bound():.1f} TFLOP/s")


fp32_bound = NumberQuestion(
    what="the fp32 bound in TFLOP/s",
    unit="TFLOP/s",
    expected=_fp32_bound,
    rel_tol=0.02,
    hint="SMs x schedulers per SM x lanes per instruction x operations per multiply-add x cycles per second,"
         " divided by 1e12",
    wrong=[
        (lambda want: want / 2, "that counts a multiply-add as one operation; a GEMM's 2MNK counts the "
                                "multiply and the add."),
        (lambda want: want / WARP_SIZE, f"one multiply-add instruction does the work of all {WARP_SIZE} "
                                        "lanes of its warp."),
        (lambda want: want / H200.reg_subpartitions, f"each SM has {H200.reg_subpartitions} schedulers, "
                                                     "each issuing in every cycle."),
    ],
)


def _first_two_wave_n() -> int:
    return next(n for n in range(TILE, 8192, TILE) if waves.gemm_waves(n, n, TILE, TILE, occupancy=1).waves == 2)


def _first_two_wave() -> waves.Waves:
    n = _first_two_wave_n()
    return waves.gemm_waves(n, n, TILE, TILE, occupancy=1)


@dataclass(frozen=True)
class _TileMultipleQuestion(NumberQuestion):
    """A question about sizes made of whole tiles: an answer that is no multiple of the tile is told
    so, before any other message."""

    multiple: int = TILE

    def check(self, answer) -> Verdict:
        value = as_number(answer)  # None for anything but one number: NumberQuestion then says so
        if value is not None and value > 0 and value % self.multiple:
            if self.said_wrong_when(value):
                return Verdict(False)
            m = self.multiple
            say(f"{self.what}: {shown_apart(value, round(value))} is not a multiple of {m}. The question asks only "
                f"about sizes N = {m}, {2 * m}, {3 * m}, ..., made of whole {m} x {m} tiles: which of them is the first to need a second wave?")
            return Verdict(False)
        return super().check(answer)


first_two_wave_n = _TileMultipleQuestion(
    what="the first two-wave size",
    unit="the size N",
    expected=_first_two_wave_n,
    hint=f"count tiles, (N / {TILE}) squared, and compare with {H200.sms}",
    wrong=[
        (lambda want: want - TILE, "that is the largest size that still fits in one wave: count its tiles."),
        (lambda want: H200.sms * TILE, f"that would be {H200.sms} tiles in a row; a square N x N has (N / {TILE}) "
                                       "squared tiles."),
        (lambda want: want + TILE, f"a smaller size already needs more than {H200.sms} tiles."),
    ],
    wrong_when=[
        (lambda v, want: v == want // TILE, f"that is the number of tiles along a side, N / {TILE}; the question "
                                            "asks for the size N itself."),
        (lambda v, want: v == (want // TILE) ** 2, f"that is the number of tiles, (N / {TILE}) squared; the "
                                                   "question asks for the size N itself."),
    ],
)


last_wave_pct = NumberQuestion(
    what="how full the last wave is, in %",
    unit="per cent",
    expected=lambda: 100 * _first_two_wave().tail_utilisation,
    # 2 %: the share rounded to a whole per cent counts; 12 / 128 (3 % above) does not
    rel_tol=0.02,
    hint=f"the blocks left over after the first wave of {H200.sms}, as a share of {H200.sms} slots (an "
         "answer counts within 2% of the right value, not within 2 percentage points)",
    wrong=[
        (lambda want: 100 - want, "that is the share of the last wave's slots that stay empty; the question "
                                  "asks how full it is."),
        (lambda want: want / 100, "that is a fraction: give it in per cent."),
        (lambda want: _first_two_wave().tail_blocks, "that is the number of blocks in the last wave: what share "
                                                     f"of the {H200.sms} slots do they fill?"),
        (lambda want: 100 * _first_two_wave().blocks / H200.sms, f"that is all the tiles over {H200.sms}; the "
                                                                 f"first wave takes {H200.sms} of them."),
    ],
    # ranges: an answer rounded to a whole per cent lies further from these than the tolerance above
    wrong_when=[
        (lambda v, want: close_to(v, 100 * _first_two_wave().tail_blocks / _first_two_wave().blocks, 0.05),
         f"that is the last wave's blocks as a share of all the tiles; the question asks what share of "
         f"its {H200.sms} slots they fill."),
        (lambda v, want: close_to(v, 100 * _first_two_wave().tail_blocks / TILE, 0.01),
         f"that divides by {TILE}, the tile's side; a wave has {H200.sms} slots, one block per SM."),
    ],
)
