"""The ldmatrix model (course_lib.model.ldmatrix) against the PTX rules it states and against the mma
fragments stage 1 feeds with it (notebook 07)."""

import pytest

from course_lib.model.fragments import mma_m16n8k16
from course_lib.model.hardware import WARP_SIZE
from course_lib.model.ldmatrix import address_role, ldmatrix_positions, received


def stage1_a(lane):  # tc_1_mma_sync.cu: row = ... + lane % 16, column kk + (lane / 16) * 8
    return lane % 16, 8 * (lane // 16)


def stage1_b(lane):  # tc_1_mma_sync.cu: krow = kk + lane % 8 + ((lane / 8) % 2) * 8, col = ... + (lane / 16) * 8
    return lane % 8 + ((lane // 8) % 2) * 8, (lane // 16) * 8


def _a_fragment(lane):
    """Register j of lane's A fragment: elements 2j and 2j + 1 (the PTX layout)."""
    return [(mma_m16n8k16("A", lane, 2 * j), mma_m16n8k16("A", lane, 2 * j + 1)) for j in range(4)]


def test_each_lane_gives_one_row_address_of_an_x4():
    roles = [address_role(lane) for lane in range(WARP_SIZE)]
    assert sorted(roles) == [(m, r) for m in range(4) for r in range(8)]
    assert address_role(13) == (1, 5)
    assert [address_role(lane, num=2) for lane in (15, 16, 31)] == [(1, 7), None, None]
    assert all(address_role(lane, num=1) is None for lane in range(8, WARP_SIZE))


@pytest.mark.parametrize("trans", [False, True])
def test_every_element_of_a_matrix_reaches_exactly_one_lane(trans):
    got = sorted(p for lane in range(WARP_SIZE) for p in received(lane, 0, trans))
    assert got == [(r, c) for r in range(8) for c in range(8)]


def test_a_lane_receives_row_g_or_with_trans_column_g():
    assert received(5, 0) == ((1, 2), (1, 3))       # g = 1, t = 1
    assert received(5, 3, trans=True) == ((2, 1), (3, 1))
    assert received(31, 2) == ((7, 6), (7, 7))


def test_stage1_a_addresses_give_exactly_the_mma_fragment():
    got = ldmatrix_positions(stage1_a)
    for lane in range(WARP_SIZE):
        assert got[lane] == _a_fragment(lane), f"lane {lane}"


def test_swapped_matrices_are_not_the_fragment():
    # lanes 8-15 pointing at columns 8-15 and lanes 16-23 at rows 8-15: matrices 1 and 2 swap places,
    # so registers 1 and 2 hold a4, a5 and a2, a3: mma.sync would multiply the wrong elements.
    def swapped(lane):
        return lane % 8 + 8 * (lane // 16), 8 * ((lane // 8) % 2)

    got = ldmatrix_positions(swapped)
    want = _a_fragment(5)
    assert got[5][0] == want[0] and got[5][1] == want[2] and got[5][2] == want[1]


def test_stage1_b_through_trans_gives_b_of_two_mma_tiles():
    got = ldmatrix_positions(stage1_b, trans=True)
    for lane in range(WARP_SIZE):
        b = [mma_m16n8k16("B", lane, i) for i in range(4)]  # (k, n) in one 16 x 8 tile
        for tile in (0, 1):  # registers 2 * tile and 2 * tile + 1: (b0, b1) and (b2, b3) of that tile
            shifted = [(k, n + 8 * tile) for k, n in b]
            assert got[lane][2 * tile] == (shifted[0], shifted[1]), f"lane {lane}, tile {tile}"
            assert got[lane][2 * tile + 1] == (shifted[2], shifted[3]), f"lane {lane}, tile {tile}"
    assert ldmatrix_positions(stage1_b)[0][0] != ((0, 0), (1, 0)), "without .trans a lane receives a row of B"


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="1, 2 or 4"):
        address_role(0, num=3)
    with pytest.raises(ValueError, match="lane is 0..31"):
        received(32, 0)
    with pytest.raises(ValueError, match="matrix is 0..3"):
        received(0, 4)
    with pytest.raises(TypeError, match="two ints"):
        ldmatrix_positions(lambda lane: lane)
    with pytest.raises(ValueError, match="negative"):
        ldmatrix_positions(lambda lane: (lane - 1, 0))
