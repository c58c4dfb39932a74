"""Tensor-core fragments against the PTX ISA tables.

Expected values below are written out by hand from the PTX ISA, section "Matrix Fragments for
mma.m16n8k16 with floating point type" (groupID = laneid >> 2, threadID_in_group = laneid % 4) and
the wgmma "Register Fragments" figures for m64nNk16 (warp w of the warpgroup owns rows 16w..16w+15).
"""

import pytest

from course_lib.model.fragments import fragment_map, mma_m16n8k16, warp_rows, wgmma_m64nNk16_a, wgmma_m64nNk16_d
from course_lib.viz.fragments import fragments_widget

# lane 5: groupID 1, threadID_in_group 1 ; lane 30: groupID 7, threadID_in_group 2
A_LANE5 = [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]
A_LANE30 = [(7, 4), (7, 5), (15, 4), (15, 5), (7, 12), (7, 13), (15, 12), (15, 13)]
B_LANE5 = [(2, 1), (3, 1), (10, 1), (11, 1)]
B_LANE30 = [(4, 7), (5, 7), (12, 7), (13, 7)]
C_LANE5 = [(1, 2), (1, 3), (9, 2), (9, 3)]
C_LANE30 = [(7, 4), (7, 5), (15, 4), (15, 5)]


@pytest.mark.parametrize(
    "operand, lane, expected",
    [("A", 5, A_LANE5), ("A", 30, A_LANE30), ("B", 5, B_LANE5), ("B", 30, B_LANE30), ("C", 5, C_LANE5), ("C", 30, C_LANE30), ("D", 30, C_LANE30)],
)
def test_mma_m16n8k16_matches_ptx(operand, lane, expected):
    assert [mma_m16n8k16(operand, lane, i) for i in range(len(expected))] == expected


def test_ptx_formula_for_a_for_every_lane():
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(8):
            row = g if (0 <= i < 2 or 4 <= i < 6) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            assert mma_m16n8k16("A", lane, i) == (row, col)


@pytest.mark.parametrize("operand, shape", [("A", (16, 16)), ("B", (16, 8)), ("C", (16, 8))])
def test_each_element_has_exactly_one_owner(operand, shape):
    fm = fragment_map("mma.m16n8k16", operand)  # raises if any element is claimed twice or never
    assert fm.owner.shape == shape
    per_lane = fm.owner.size // 32
    assert all((fm.owner == lane).sum() == per_lane for lane in range(32))


def test_packed_pairs_are_neighbours():
    # a0/a1 (and b0/b1, c0/c1) share one 32-bit register as .f16x2: same row (A, C) or column (B), next element
    for lane in range(32):
        for i in (0, 2, 4, 6):
            (r0, c0), (r1, c1) = mma_m16n8k16("A", lane, i), mma_m16n8k16("A", lane, i + 1)
            assert r0 == r1 and c1 == c0 + 1
        for i in (0, 2):
            (r0, c0), (r1, c1) = mma_m16n8k16("B", lane, i), mma_m16n8k16("B", lane, i + 1)
            assert c0 == c1 and r1 == r0 + 1


def test_elements_of_a_lane_in_register_order():
    fm = fragment_map("mma.m16n8k16", "B")
    assert [(r, c) for i, r, c in fm.elements_of(5)] == B_LANE5


def test_wgmma_accumulator_rows_per_warp():
    assert warp_rows(16) == {0: range(0, 16), 1: range(16, 32), 2: range(32, 48), 3: range(48, 64)}
    assert wgmma_m64nNk16_d(64, 0) == (32, 0)  # warp 2, lane 0
    assert [wgmma_m64nNk16_d(64 + 5, i, 16) for i in range(8)] == [
        (33, 2), (33, 3), (41, 2), (41, 3), (33, 10), (33, 11), (41, 10), (41, 11)
    ]


@pytest.mark.parametrize("n", [8, 16, 64, 256])
def test_wgmma_accumulator_is_a_bijection(n):
    fm = fragment_map("wgmma.m64nNk16", "D", n)
    assert fm.owner.shape == (64, n)
    assert all((fm.owner == t).sum() == n // 2 for t in range(128))


def test_wgmma_accumulator_slice_is_the_mma_c_layout_repeated():
    for t in range(128):
        warp, lane = divmod(t, 32)
        for i in range(32 // 2):
            r, c = wgmma_m64nNk16_d(t, i, 32)
            r0, c0 = mma_m16n8k16("C", lane, i % 4)
            assert (r, c) == (16 * warp + r0, 8 * (i // 4) + c0)


def test_wgmma_a_in_registers():
    assert wgmma_m64nNk16_a(32 + 5, 2) == (16 + 9, 2)
    fm = fragment_map("wgmma.m64nNk16", "A")
    assert fm.owner.shape == (64, 16)


def test_bad_arguments():
    with pytest.raises(ValueError):
        mma_m16n8k16("A", 32, 0)
    with pytest.raises(ValueError):
        mma_m16n8k16("B", 0, 4)
    with pytest.raises(ValueError, match="multiple of 8"):
        wgmma_m64nNk16_d(0, 0, 12)


def test_widget_changes_state_when_controls_change():
    box = fragments_widget()
    assert box.fragments.operand == "A" and [(r, c) for _, r, c in box.selected] == mma_a_lane(0)
    picture = box.image.value
    assert picture[:4] == b"\x89PNG"
    box.controls["thread"].value = 5
    assert box.image.value != picture  # the picture follows the controls
    assert [(r, c) for _, r, c in box.selected] == A_LANE5
    box.controls["operand"].value = "B"
    assert [(r, c) for _, r, c in box.selected] == B_LANE5
    box.controls["instruction"].value = "wgmma.m64nNk16"
    assert box.controls["operand"].options == ("A", "D") and box.controls["operand"].value == "D"
    assert box.controls["thread"].max == 127
    box.controls["thread"].value = 69
    assert box.selected[0] == (0, 33, 2) and len(box.selected) == 8
    box.controls["n"].value = 64
    assert len(box.selected) == 32


def mma_a_lane(lane):
    return [mma_m16n8k16("A", lane, i) for i in range(8)]
