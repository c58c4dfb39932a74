"""Exercises of notebook ``05_triton_fast_kernel``: the grouped launch order written by you, and how
far each program of a persistent launch walks."""

from __future__ import annotations

from course_lib import results
from course_lib.exercises import FunctionPuzzle, Question
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.layout import cdiv

# ---- the grouped order ------------------------------------------------------------------------
# Grids of tiles (num_pid_m x num_pid_n) and group sizes: one band and many, a group size that divides
# the tile rows and several that leave a shorter last band, a single tile row or column.
ORDER_GRIDS = [(m, n, g) for m in (1, 3, 8, 9, 13) for n in (1, 2, 7, 16) for g in (1, 2, 4, 8)]


def _cases() -> list[tuple[int, int, int, int]]:
    return [(pid, m, n, g) for m, n, g in ORDER_GRIDS for pid in range(m * n)]


def _column_major(pid, num_pid_m, num_pid_n, group_m):
    return pid % num_pid_m, pid // num_pid_m


def _band_not_shortened(pid, num_pid_m, num_pid_n, group_m):
    band, within = divmod(pid, group_m * num_pid_n)
    return band * group_m + within % group_m, within // group_m


def _column_bands(pid, num_pid_m, num_pid_n, group_m):
    """Grouped order turned around: bands of group_m tile columns, walked along their rows."""
    band, within = divmod(pid, group_m * num_pid_m)
    first_n = band * group_m
    cols = min(num_pid_n - first_n, group_m)
    return within // cols, first_n + within % cols


grouped_order = FunctionPuzzle(
    title="Your grouped order",
    reference=c04.grouped_order,
    cases=_cases,
    show=lambda c: f"program {c[0]} of a {c[1]} x {c[2]} grid of tiles, group_m = {c[3]}",
    known_wrong=[
        (c04.row_major_order, "this is row-major order: the programs sweep whole rows of tiles (walking "
         "along the rows inside a band gives the same). Grouped order walks down the columns of a band "
         "of group_m tile rows."),
        (_column_major, "this is column-major order over the whole grid: one band of all num_pid_m "
         "rows. The bands are group_m tile rows high."),
        (_band_not_shortened, "right while group_m divides num_pid_m; otherwise the last band has "
         "fewer than group_m rows, and yours sends its programs to tiles below the grid."),
        (_column_bands, "these are bands of group_m tile columns, walked along their rows: grouped "
         "order turned around. The bands are group_m tile rows, walked down their columns."),
        (lambda pid, num_pid_m, num_pid_n, group_m: c04.grouped_order(pid, num_pid_m, num_pid_n, group_m)[::-1],
         "the right tiles, returned the wrong way round: the function gives (pid_m, pid_n), the row first."),
    ],
    reveal=c04.grouped_order,
)

# ---- exercise: who walks how far -----------------------------------------------------------------
PERSISTENT_SIZE = 4096  # M = N = K of the question


def _bf16_tile() -> tuple[int, int]:
    cfg = c04.FAST_CONFIGS["bf16"][0]  # the first candidate: the one that won at 4096^3
    return cfg.block_m, cfg.block_n


def _sms() -> int:
    return int(results.load().provenance["sm_count"])  # the H200's, as recorded


def _tiles() -> int:
    bm, bn = _bf16_tile()
    return cdiv(PERSISTENT_SIZE, bm) * cdiv(PERSISTENT_SIZE, bn)


tiles = Question(
    what="(a) tiles of C",
    expected=_tiles,
    hint="C is 4096 x 4096; how many tiles of 128 x 256 cover it?",
    wrong=[
        (lambda want: (PERSISTENT_SIZE // 128) ** 2, "that is C in 128 x 128 tiles; a tile is 128 x 256."),
        (lambda want: (PERSISTENT_SIZE // 256) ** 2, "that is C in 256 x 256 tiles; a tile is 128 x 256."),
        (lambda want: _sms(), "that is the number of programs of the persistent launch, one per SM; "
         "the tiles are what they share out."),
    ],
)

programs_with_one_more = Question(
    what="(b) one tile more",
    expected=lambda: _tiles() % _sms(),
    hint="program p computes tiles p, p + 132, p + 264, ...: divide the tiles by the programs",
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
