"""The course's layout and schedule formulas (course_lib.model: layout, waves, schedules): known
answers, and the properties every caller (the kernels' models, the exercises, the pictures) relies on."""

import itertools

import pytest

from course_lib import model
from course_lib.model import layout


@pytest.mark.parametrize("n, d, want", [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2), (4096, 128, 32), (4097, 128, 33),
                                        (1, 1, 1), (7, 100, 1)])
def test_cdiv_rounds_up(n, d, want):
    assert layout.cdiv(n, d) == want


def test_cdiv_is_the_smallest_count_that_covers():
    for n, d in itertools.product(range(0, 70), range(1, 20)):
        q = layout.cdiv(n, d)
        assert q * d >= n and (q - 1) * d < n or (n == 0 and q == 0)


# ---- waves ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("tiles, slots, waves", [
    (1, 132, 1),       # one tile still takes a wave
    (132, 132, 1),     # exactly one full wave
    (133, 132, 2),     # one tile more: a second, nearly empty wave
    (512, 132, 4),     # 4096^2 in 128 x 256 tiles: 3.88 waves -> 4
    (2048, 132, 16),   # 8192^2 in 128 x 256 tiles: 15.5 waves -> 16
    (256, 66, 4),      # 256 cluster tiles on the H200's 66 clusters
    (0, 132, 0),       # no tiles, no waves
])
def test_wave_count_rounds_a_partial_last_wave_up(tiles, slots, waves):
    """A partly filled last wave takes as long as a full one: the count rounds up (floor division
    would drop the ragged wave: 133 tiles on 132 slots in 1 wave)."""
    assert model.waves.wave_count(tiles, slots) == waves


@pytest.mark.parametrize("tiles, slots, want", [(66, 66, 1.0), (67, 66, 67 / 132), (256, 66, 256 / 264),
                                                (16, 66, 16 / 66), (132, 132, 1.0), (0, 66, 1.0)])
def test_whole_tile_efficiency_is_tiles_over_the_slots_of_all_waves(tiles, slots, want):
    assert model.waves.whole_tile_efficiency(tiles, slots) == pytest.approx(want)


def test_whole_tile_efficiency_is_one_exactly_when_the_waves_are_full():
    for tiles, slots in itertools.product(range(1, 300), (66, 132)):
        eff = model.waves.whole_tile_efficiency(tiles, slots)
        assert 0 < eff <= 1 and (eff == 1.0) == (tiles % slots == 0)


def test_persistent_grid_gives_every_cluster_the_same_number_of_tiles():
    assert model.waves.persistent_ctas(1024, 66, 2) == 128  # 8192^2 with 128x256 tiles: 16 waves of 64 pairs
    assert model.waves.persistent_ctas(256, 66, 2) == 128  # 4096^2: 4 waves
    assert model.waves.persistent_ctas(3, 66, 2) == 6
    for tiles, max_clusters in itertools.product(range(1, 400), (1, 7, 66)):
        clusters = model.waves.persistent_ctas(tiles, max_clusters, 2) // 2
        assert clusters <= max_clusters  # never more than fit at once
        assert model.waves.wave_count(tiles, clusters) == model.waves.wave_count(tiles, max_clusters)  # no extra wave
        per_cluster = [len(range(c, tiles, clusters)) for c in range(clusters)]  # round robin
        assert max(per_cluster) - min(per_cluster) <= 1


# ---- the grouped order -------------------------------------------------------------------------------
@pytest.mark.parametrize("rows, cols, group", [(1, 1, 8), (5, 3, 2), (32, 32, 8), (7, 11, 8), (9, 4, 1), (6, 8, 3)])
def test_grouped_order_visits_every_tile_once_band_by_band(rows, cols, group):
    order = [model.schedules.grouped_order(t, rows, cols, group) for t in range(rows * cols)]
    assert sorted(order) == [(r, c) for r in range(rows) for c in range(cols)]
    for t, (r, c) in enumerate(order):  # tile t lies in band t // (group * cols), walked column by column
        band = t // (group * cols)
        assert band * group <= r < min(rows, (band + 1) * group)
    if rows >= group:  # the first `group` tiles are one column of `group` rows
        assert order[:group] == [(r, 0) for r in range(group)]


# ---- the 128-byte swizzle -------------------------------------------------------------------------
def test_swizzle_xors_the_chunk_with_the_row_in_the_atom():
    for row, chunk in itertools.product(range(16), range(8)):
        assert layout.tma_box_offset(row, 8 * chunk) == row * 128 + 16 * (chunk ^ (row % 8))
    for row in range(64):  # within a row the 64 elements are a permutation of its 128 bytes
        offsets = sorted(layout.tma_box_offset(row, c) for c in range(64))
        assert offsets == list(range(row * 128, row * 128 + 128, 2))


def test_eight_rows_of_one_column_fall_in_eight_chunks():
    """What the swizzle is for: the 8 rows a warp's ldmatrix/wgmma reads at one column hit 8 of the
    8 16-byte chunks of a 128-byte line, not one chunk 8 times."""
    for col in range(0, 64, 8):
        chunks = {(layout.tma_box_offset(r, col) % 128) // 16 for r in range(8)}
        assert chunks == set(range(8))
