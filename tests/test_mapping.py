"""Notebook 00's mapping of threads onto the output matrix: data and widget."""

import numpy as np
import pytest

from course_lib.model.mapping import blocks_needed, thread_mapping
from course_lib.viz.mapping import mapping_widget


def test_seed_configuration_64_with_16x16_blocks():
    m = thread_mapping(64, 64, (16, 16))
    assert m.grid == (4, 4) and m.idle_threads == 0 and m.warps_per_block == 8
    assert m.block_id[0, 16] == 1 and m.block_id[16, 0] == 4  # blockIdx.x runs along columns
    assert m.thread_id[1, 0] == 16 and m.warp_id[1, 0] == 0 and m.warp_id[2, 0] == 1
    assert sorted(np.unique(m.block_id)) == list(range(16))


def test_n_1000_needs_a_bounds_check():
    assert blocks_needed(1000, 16) == (1000 + 15) // 16 == 63
    m = thread_mapping(1000, 1000, (16, 16))
    assert m.threads_launched == 63 * 63 * 256
    assert m.idle_threads == 1008 * 1008 - 1000 * 1000


def test_each_thread_owns_one_element():
    m = thread_mapping(37, 53, (8, 4))
    owners = set(zip(m.block_id.ravel(), m.thread_id.ravel()))
    assert len(owners) == 37 * 53


def test_too_small_grid_and_too_large_block_are_rejected():
    with pytest.raises(ValueError, match="use grid"):
        thread_mapping(64, 64, (16, 16), grid=(3, 4))
    with pytest.raises(ValueError, match="1..1024 threads"):
        thread_mapping(64, 64, (64, 32))


def test_widget_changes_state_when_controls_change():
    w = mapping_widget()
    assert w.mapping.grid == (4, 4) and w.mapping.idle_threads == 0
    w.controls["n"].value = 1000
    assert w.mapping.grid == (63, 63) and w.mapping.idle_threads > 0
    w.controls["block_x"].value = 32
    assert w.mapping.block == (32, 16) and w.mapping.grid == (32, 63)
    w.controls["block_x"].value = 128  # 128 x 16 = 2048 threads: not a valid block
    assert "1..1024" in w.children[2].value
    assert w.mapping.block == (32, 16)  # the last valid mapping stays on display
    w.controls["block_y"].value = 8  # 128 x 8 = 1024: valid again
    assert w.mapping.block == (128, 8) and "1..1024" not in w.children[2].value
