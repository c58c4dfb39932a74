"""Coalescing: sectors and lines of one warp's load (fp32 row = 4 sectors, stride N = 32 sectors)."""

import numpy as np
import pytest

from course_lib.model.coalescing import matrix_load, warp_access
from course_lib.viz.coalescing import coalescing_widget


def test_fp32_row_is_4_sectors_in_one_line():
    acc = matrix_load("row", n=4096, itemsize=4)
    assert acc.n_sectors == 4 and acc.n_lines == 1
    assert acc.bytes_requested == acc.bytes_moved == 128 and acc.efficiency == 1.0


@pytest.mark.parametrize("n", [32, 1000, 4096])
def test_fp32_column_is_32_sectors(n):
    acc = matrix_load("column", n=n, itemsize=4)
    assert acc.n_sectors == 32 and acc.n_lines == 32
    assert acc.efficiency == pytest.approx(4 / 32)


def test_small_stride_shares_sectors():
    # stride of 4 fp32 = 16 bytes: two lanes per 32-byte sector
    with pytest.raises(ValueError, match="leave"):  # too few rows for 32 lanes
        matrix_load("column", n=4)
    acc = warp_access(np.arange(32) * 16, itemsize=4)
    assert acc.n_sectors == 16 and acc.n_lines == 4


@pytest.mark.parametrize("dtype_size, sectors, lines", [(2, 2, 1), (4, 4, 1), (8, 8, 2)])
def test_row_loads_of_other_element_sizes(dtype_size, sectors, lines):
    acc = matrix_load("row", n=4096, itemsize=dtype_size)
    assert (acc.n_sectors, acc.n_lines) == (sectors, lines)


def test_misaligned_row_costs_one_more_sector_and_line():
    acc = matrix_load("row", n=4096, itemsize=4, col=1)
    assert acc.n_sectors == 5 and acc.n_lines == 2 and acc.ideal_sectors == 4


def test_broadcast_and_inactive_lanes():
    same = warp_access(np.zeros(32, dtype=int), itemsize=4)
    assert same.n_sectors == 1 and same.bytes_requested == 4
    half = warp_access(np.arange(16) * 4, itemsize=4, lanes=np.arange(16))
    assert half.n_sectors == 2 and list(half.lanes) == list(range(16))


def test_element_straddling_a_sector_boundary_counts_both():
    acc = warp_access([30], itemsize=4)
    assert list(acc.sectors) == [0, 1]


def test_widget_changes_state_when_controls_change():
    box = coalescing_widget()
    assert box.accesses["row"].n_sectors == 4 and box.accesses["column"].n_sectors == 32
    picture = box.image.value
    assert picture[:4] == b"\x89PNG"
    box.controls["dtype"].value = "fp64"
    assert box.image.value != picture  # the picture follows the controls
    assert box.accesses["row"].n_sectors == 8 and box.accesses["column"].n_sectors == 32
    box.controls["offset"].value = 1  # 8-byte elements starting 8 bytes into a sector
    assert box.accesses["row"].n_sectors == 9
    box.controls["dtype"].value = "fp16"
    box.controls["offset"].value = 0
    box.controls["n"].value = 64  # column stride 128 bytes: still one sector per lane
    assert box.accesses["row"].n_sectors == 2 and box.accesses["column"].n_sectors == 32
    assert "sectors" in box.children[1].value


def test_ideal_sectors_round_a_part_sector_up():
    # 25 lanes x 4 bytes = 100 bytes: no fewer than 4 sectors of 32 bytes can hold them.
    from course_lib.model.coalescing import warp_access

    assert warp_access([4 * i for i in range(25)], 4).ideal_sectors == 4
    assert warp_access([0], 4).ideal_sectors == 1
