"""Occupancy and waves on the H200 (132 SMs): known answers from the CUDA limits of compute capability 9.0."""

import pytest

from course_lib.model.hardware import H200
from course_lib.model.waves import gemm_waves, resident_blocks, waves
from course_lib.viz.waves import waves_widget


def test_h200_limits_are_the_documented_ones():
    assert (H200.sms, H200.max_threads_per_sm, H200.max_warps_per_sm, H200.max_blocks_per_sm) == (132, 2048, 64, 32)
    assert (H200.regs_per_sm, H200.reg_alloc_unit) == (65536, 256)
    assert (H200.smem_per_sm, H200.max_smem_per_block, H200.reserved_smem_per_block) == (228 * 1024, 227 * 1024, 1024)


@pytest.mark.parametrize(
    "threads, regs, smem, resident, limiter",
    [
        (256, 24, 0, 8, "threads/warps"),  # 64 warps / 8 warps per block (registers would allow 10)
        (256, 32, 0, 8, "threads/warps and registers"),  # 1024 regs/warp: exactly 64 warps fit
        (1024, 32, 0, 2, "threads/warps and registers"),
        (32, 32, 0, 32, "blocks per SM"),  # warps and registers would allow 64, the cap is 32
        (64, 16, 0, 32, "threads/warps and blocks per SM"),
        (256, 64, 0, 4, "registers"),  # 2048 regs/warp -> 8 warps per sub-partition -> 32 warps
        (256, 128, 0, 2, "registers"),
        (1024, 64, 0, 1, "registers"),
        (256, 40, 0, 6, "registers"),  # 40*32 = 1280 regs/warp -> 12 per sub-partition -> 48 warps
        (128, 32, 48 * 1024, 4, "shared memory"),  # 49 KB allocated per block: 228 // 49 = 4
        (128, 32, 100 * 1024, 2, "shared memory"),
        (128, 32, 227 * 1024, 1, "shared memory"),  # the largest a block may use
        (256, 64, 32 * 1024, 4, "registers"),  # the module docstring's example
    ],
)
def test_resident_blocks_known_answers(threads, regs, smem, resident, limiter):
    occ = resident_blocks(threads, regs, smem)
    assert occ.resident == resident
    assert occ.limiter == limiter


def test_reserved_and_rounded_shared_memory():
    occ = resident_blocks(128, 32, 1000)
    assert occ.smem_allocated == 2048  # 1000 + 1024 reserved = 2024, rounded up to 128 bytes
    assert occ.by_shared == 228 * 1024 // 2048 == 114


def test_occupancy_fraction():
    assert resident_blocks(256, 64).occupancy == 0.5
    assert resident_blocks(256, 32).occupancy == 1.0


def test_impossible_blocks_are_rejected_with_the_limit_named():
    with pytest.raises(ValueError, match="227 KB"):
        resident_blocks(128, 32, 228 * 1024)
    with pytest.raises(ValueError, match="1..1024 threads"):
        resident_blocks(2048)
    with pytest.raises(ValueError, match="1..255 registers"):
        resident_blocks(128, 256)
    with pytest.raises(ValueError, match="registers one block may use"):
        resident_blocks(1024, 255)


def test_waves_4096_with_128_tiles_one_block_per_sm():
    w = gemm_waves(4096, 4096, 128, 128, occupancy=1)
    assert w.blocks == 1024 and w.slots == 132
    assert w.waves == 8 and w.full_waves == 7
    assert w.tail_blocks == 1024 - 7 * 132 == 100
    assert w.tail_utilisation == pytest.approx(100 / 132)
    assert w.idle_sms_in_tail == 32
    assert w.efficiency == pytest.approx(1024 / (8 * 132))


def test_waves_with_an_occupancy_and_an_exact_fit():
    occ = resident_blocks(256, 64, 32 * 1024)  # 4 per SM
    w = gemm_waves(4096, 4096, 128, 128, occ)
    assert (w.slots, w.waves, w.tail_blocks) == (528, 2, 496)
    exact = waves(264, 2)
    assert exact.waves == 1 and exact.tail_utilisation == 1.0 and exact.efficiency == 1.0
    assert exact.idle_sms_in_tail == 0


def test_occupancy_map_counts_every_block():
    for blocks, resident in [(1024, 1), (1000, 3), (5, 2), (264, 2)]:
        w = waves(blocks, resident)
        m = w.occupancy_map()
        assert m.shape == (w.waves, 132)
        assert m.sum() == blocks and m.max() <= resident
        assert (m[-1] == 0).sum() == w.idle_sms_in_tail


def test_widget_changes_state_when_controls_change():
    box = waves_widget(size=4096, tile=128, threads=256, regs=64, smem_kb=32)
    assert box.occupancy.resident == 4 and box.waves.waves == 2
    picture = box.image.value
    assert picture[:4] == b"\x89PNG"
    box.controls["regs"].value = 128
    assert box.image.value != picture  # the picture follows the controls
    assert box.occupancy.resident == 2 and box.occupancy.limiter == "registers"
    box.controls["smem_kb"].value = 120  # 121 KB allocated -> 1 block per SM
    assert box.occupancy.resident == 1 and box.waves.waves == 8
    box.controls["size"].value = 128 * 11  # 121 blocks: one wave, 11 SMs idle
    assert box.waves.blocks == 121 and box.waves.idle_sms_in_tail == 11
    box.controls["threads"].value = 1024  # 1024 x 128 registers: cannot launch
    assert "registers one block may use" in box.children[2].value
    assert box.occupancy.threads_per_block == 256  # the last valid configuration stays on display
    box.controls["regs"].value = 64  # 1024 x 64 = 65536: fits, one block per SM
    assert box.occupancy.threads_per_block == 1024 and box.occupancy.resident == 1
    assert "may use" not in box.children[2].value


def test_a_waves_result_shown_in_a_cell_says_its_waves():
    # notebook 00's exercise suggests evaluating gemm_waves(N, N, 128, 128, occupancy=1) in a cell
    shown = repr(gemm_waves(1536, 1536, 128, 128, occupancy=1))
    assert shown == "Waves(blocks=144, sms=132, resident=1): 2 waves, last wave 12 blocks = 9% full"
    assert "1 wave, last wave 100 blocks = 76% full" in repr(waves(100, 1))
