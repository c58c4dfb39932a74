"""Exercise of notebook ``00_gpu_execution_model``: where wave quantisation first strikes."""

from __future__ import annotations

from course_lib.exercises import Question
from course_lib.model import waves
from course_lib.model.hardware import H200

TILE = 128  # square tiles of C, one block per SM


def _first_two_wave_n() -> int:
    return next(n for n in range(TILE, 8192, TILE) if waves.gemm_waves(n, n, TILE, TILE, occupancy=1).waves == 2)


first_two_wave_n = Question(
    what="the first two-wave size",
    expected=_first_two_wave_n,
    hint=f"count tiles, (N / {TILE}) squared, and compare with {H200.sms}",
    wrong=[
        (lambda want: want - TILE, "that is the largest size that still fits in one wave: count its tiles."),
        (lambda want: H200.sms * TILE, f"that would be {H200.sms} tiles in a row; a square N x N has (N / {TILE}) "
                                       "squared tiles."),
        (lambda want: want + TILE, f"a smaller size already needs more than {H200.sms} tiles."),
    ],
)
