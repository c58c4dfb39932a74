"""Shared-memory banks: 32 banks x 4 bytes; column of a 32x32 fp32 tile = 32-way; padding/XOR fix it."""

import numpy as np
import pytest

from course_lib.model.banks import bank_access, element_offset, tile_access
from course_lib.viz.banks import banks_widget


def test_bank_of_an_address():
    acc = bank_access([0, 4, 124, 128, 132])
    assert list(acc.banks) == [0, 1, 31, 0, 1]


@pytest.mark.parametrize("index", [0, 5, 31])
def test_column_of_32x32_fp32_tile_is_32_way(index):
    acc = tile_access(32, 32, "column", "plain", index)
    assert acc.conflict_degree == 32 and acc.wavefronts == 32
    assert set(acc.banks) == {index}


@pytest.mark.parametrize("layout", ["padded", "swizzled"])
def test_padding_and_swizzle_make_the_column_conflict_free(layout):
    for index in (0, 7, 31):
        acc = tile_access(32, 32, "column", layout, index)
        assert acc.conflict_degree == 1
        assert sorted(acc.banks) == list(range(32))


@pytest.mark.parametrize("layout", ["plain", "padded", "swizzled"])
def test_row_access_is_conflict_free_in_every_layout(layout):
    assert tile_access(32, 32, "row", layout, 3).conflict_degree == 1


def test_padded_bank_formula():
    # with pitch 33, element (r, c) sits in bank (r + c) % 32
    r, c = np.indices((32, 32))
    assert (element_offset(r, c, 32, "padded") % 32 == (r + c) % 32).all()


def test_swizzle_is_a_permutation_of_each_row():
    r, c = np.indices((32, 64))
    off = element_offset(r, c, 64, "swizzled")
    for row in range(32):
        assert sorted(off[row] - row * 64) == list(range(64))


def test_broadcast_is_not_a_conflict():
    assert bank_access(np.zeros(32, dtype=int)).conflict_degree == 1
    # two lanes on one word, two others on another word of the same bank: 2-way
    assert bank_access([0, 0, 128, 128]).conflict_degree == 2


def test_stride_two_words_is_2_way():
    assert bank_access(np.arange(32) * 8).conflict_degree == 2


def test_seed_transposed_store_into_16x16_tile_is_8_way():
    # B_shared[tx][ty] = ... with 16 x 16 threads: a warp is tx = 0..15 for ty = 0, 1
    lane = np.arange(32)
    tx, ty = lane % 16, lane // 16
    assert bank_access((tx * 16 + ty) * 4).conflict_degree == 8


def test_64_bit_elements_take_two_passes_when_consecutive():
    acc = bank_access(np.arange(32) * 8, itemsize=8)
    assert acc.conflict_degree == 2 and acc.wavefronts == 2


def test_widget_changes_state_when_controls_change():
    box = banks_widget()
    assert box.degrees == {"plain": 32, "padded": 1, "swizzled": 1}
    assert box.access.conflict_degree == 32
    picture = box.image.value
    assert picture[:4] == b"\x89PNG"
    box.controls["layout"].value = "padded"
    assert box.image.value != picture  # the picture follows the controls
    assert box.access.conflict_degree == 1
    box.controls["pattern"].value = "row"
    assert box.degrees == {"plain": 1, "padded": 1, "swizzled": 1}
    box.controls["cols"].value = 64
    box.controls["pattern"].value = "column"
    box.controls["layout"].value = "plain"
    assert box.access.conflict_degree == 32 and box.controls["index"].max == 63
    assert "32-way" in box.children[3].value


def test_a_wide_load_that_needs_its_minimum_passes_is_not_called_a_conflict():
    sixteen_lanes = [16 * lane % 256 for lane in range(32)]   # 16-byte loads, 256 distinct bytes
    access = bank_access(sixteen_lanes, 16)
    assert access.wavefronts == 2 and access.describe() == "32 lanes: conflict-free: 2 passes, the fewest for 256 bytes"
    conflicted = bank_access([256 * (lane % 16) for lane in range(32)], 16)
    assert conflicted.wavefronts == 16 and "16 passes where 2 would do" in conflicted.describe()
    assert bank_access([4 * 32 * lane for lane in range(32)]).describe().endswith("32 passes")
