"""Exercise of notebook ``00_gpu_execution_model``: where wave quantisation first strikes."""

from __future__ import annotations

from course_lib.exercises import Question
from course_lib.model import waves

TILE = 128  # square tiles of C, one block per SM


def _first_two_wave_n() -> int:
    return next(n for n in range(TILE, 8192, TILE) if waves.gemm_waves(n, n, TILE, TILE, occupancy=1).waves == 2)


first_two_wave_n = Question(
    what="the first two-wave size",
    expected=_first_two_wave_n,
    hint="count tiles, (N / 128) squared, and compare with 132",
    wrong=[
        (lambda want: want - TILE, "that is the largest size that still fits in one wave: count its tiles."),
        (lambda want: 132 * TILE, "that would be 132 tiles in a row; a square N x N has (N / 128) squared tiles."),
        (lambda want: want + TILE, "a smaller size already needs more than 132 tiles."),
    ],
)
