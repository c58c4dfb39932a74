"""course_lib.model.hardware: each hardware fact once, and the rules built from it."""

import torch

from course_lib import backend, results
from course_lib.model import hardware


def test_tma_elements_are_16_bytes_of_each_dtype():
    assert hardware.TMA_ALIGN_BYTES == 16
    assert {d: hardware.tma_elements(d) for d in ("fp32", "tf32", "fp16", "bf16", "e4m3")} == {
        "fp32": 4, "tf32": 4, "fp16": 8, "bf16": 8, "e4m3": 16}
    assert hardware.tma_rule_text("bf16") == "rows of a multiple of 16 bytes (8 bf16 elements)"


def test_element_sizes_are_torchs():
    assert hardware.itemsize("bf16") == hardware.BF16_BYTES == torch.bfloat16.itemsize == 2
    assert hardware.itemsize("e4m3") == 1 and hardware.itemsize("tf32") == 4


def test_the_h200_record_is_the_recorded_gpu():
    """The H200's SM count the models teach is the one the recording's provenance names."""
    assert hardware.H200.sms == int(results.load().provenance["sm_count"]) == 132


def test_device_sms_is_the_h200s_without_a_gpu():
    if not backend.get().is_gpu:
        assert hardware.device_sms() == hardware.H200.sms
    else:
        assert hardware.device_sms() == torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def test_warps_sectors_and_banks():
    assert (hardware.WARP_SIZE, hardware.WARPGROUP_SIZE) == (32, 128)
    assert hardware.LINE_BYTES // hardware.SECTOR_BYTES == 4
    assert hardware.N_BANKS * hardware.BANK_BYTES == hardware.LINE_BYTES  # one pass over all banks: one line
