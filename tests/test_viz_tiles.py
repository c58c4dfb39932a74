"""Tiles and reuse: the schedule of a T x T tiled GEMM and its read counts (naive 2N^3, tiled 2N^3/T)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.model.tiles import global_read_map, reuse_counts, schedule, tile_step
from course_lib.viz.tiles import tiles_widget


def test_block_loads_its_row_band_of_a_and_column_band_of_b():
    s = tile_step(64, 16, block=(1, 2), step=3)
    assert s.a_tile == (1, 3) and s.b_tile == (3, 2)
    assert (s.a_rows, s.a_cols) == (range(16, 32), range(48, 64))
    assert (s.b_rows, s.b_cols) == (range(48, 64), range(32, 48))
    assert s.steps == 4


def test_schedule_walks_k_once():
    steps = schedule(64, 16, (0, 3))
    assert [s.a_tile for s in steps] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert [s.b_tile for s in steps] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    covered = sorted(c for s in steps for c in s.a_cols)
    assert covered == list(range(64))  # the whole K dimension, each column once


def test_tiles_are_clipped_at_the_edge():
    s = tile_step(40, 16, (2, 0), 2)
    assert s.a_rows == range(32, 40) and s.a_cols == range(32, 40) and s.steps == 3


@pytest.mark.parametrize("n, t", [(64, 16), (4096, 32), (1024, 8)])
def test_counts_naive_2n3_tiled_2n3_over_t(n, t):
    c = reuse_counts(n, t)
    assert c.naive_global == 2 * n**3
    assert c.tiled_global == 2 * n**3 // t
    assert c.tiled_shared == 2 * n**3
    assert c.saving == t
    assert c.per_element_naive == n and c.per_element_tiled == n // t


def test_read_map_of_the_schedule_matches_the_formula():
    a, b = global_read_map(48, 16)
    assert (a == 3).all() and (b == 3).all()  # each element loaded once per block of its band
    assert a.sum() + b.sum() == reuse_counts(48, 16).tiled_global
    a0, b0 = global_read_map(48)
    assert a0.sum() + b0.sum() == reuse_counts(48, 16).naive_global


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), t=st.sampled_from([2, 4, 8, 16]))
def test_read_map_matches_formula_for_any_size(n, t):
    a, b = global_read_map(n, t)
    c = reuse_counts(n, t)
    assert a.sum() + b.sum() == c.tiled_global
    assert (a == c.per_element_tiled).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="outside"):
        tile_step(64, 16, (4, 0), 0)
    with pytest.raises(ValueError, match="step"):
        tile_step(64, 16, (0, 0), 4)


def test_widget_changes_state_when_controls_change():
    box = tiles_widget(n=64, tile=16)
    assert box.step.a_tile == (0, 0) and box.controls["step"].max == 3
    picture = box.image.value
    assert picture[:4] == b"\x89PNG"
    box.controls["bi"].value = 2
    assert box.image.value != picture  # the picture follows the controls
    box.controls["step"].value = 3
    assert box.step.a_tile == (2, 3) and box.step.b_tile == (3, 0)
    assert box.counts.saving == 16
    box.controls["tile"].value = 32  # 2 x 2 blocks now: the index sliders shrink and clamp
    assert box.controls["step"].max == 1 and box.controls["bi"].value == 1 and box.step.step == 1
    assert box.step.a_tile == (1, 1) and box.counts.tiled_global == 2 * 64**3 // 32
    box.controls["n"].value = 128
    assert box.controls["step"].max == 3 and box.step.n == 128


def test_widget_opens_on_the_block_asked_for():
    box = tiles_widget(n=64, tile=16, block=(1, 2))  # notebook 02's figure draws block (1, 2)
    assert (box.controls["bi"].value, box.controls["bj"].value) == (1, 2)
    assert box.step.a_tile == (1, 0) and box.step.b_tile == (0, 2)
    with pytest.raises(ValueError, match="outside the 4 x 4 grid"):
        tiles_widget(n=64, tile=16, block=(4, 0))
