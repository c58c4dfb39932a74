"""course_lib.fp8: the formats, scaling into them, and the model of the FP8 tensor core's sums (CPU)."""

from __future__ import annotations

import pytest
import torch

from course_lib import fp8
from course_lib.gemm import relative_error


def test_the_formats_are_the_ocp_ones():
    e4m3, e5m2 = fp8.FORMATS["e4m3"], fp8.FORMATS["e5m2"]
    assert (e4m3.exponent_bits, e4m3.mantissa_bits, e4m3.max) == (4, 3, 448.0)
    assert (e5m2.exponent_bits, e5m2.mantissa_bits, e5m2.max) == (5, 2, 57344.0)
    assert e4m3.min_normal == 2.0**-6 and e4m3.min_subnormal == 2.0**-9
    assert e5m2.min_normal == 2.0**-14 and e5m2.min_subnormal == 2.0**-16
    assert e4m3.step == 0.125 and e5m2.step == 0.25


def test_round_to_rounds_to_nearest_and_saturates():
    x = torch.tensor([500.0, -1e6, 1.0625, 1.07, 1e-4], dtype=torch.float64)
    got = fp8.round_to(x, "e4m3").tolist()
    assert got == [448.0, -448.0, 1.0, 1.125, 0.0]  # 1.0625 is halfway: to the even neighbour
    assert fp8.round_to(torch.tensor([1e-4]), "e5m2").item() == pytest.approx(1.0681e-4, rel=1e-3)
    with pytest.raises(ValueError, match="unknown FP8 format"):
        fp8.round_to(x, "e3m4")


@pytest.mark.parametrize("scaling, block, scales_shape", [
    ("tensor", None, (1, 1)), ("row", None, (130, 1)), ("column", None, (1, 200)),
    ("block", (1, 128), (130, 2)), ("block", (128, 128), (2, 2)),
])
def test_quantize_maps_each_blocks_largest_value_to_the_max(scaling, block, scales_shape):
    torch.manual_seed(0)
    x = torch.randn(130, 200, dtype=torch.float64)  # not a multiple of 128: blocks cut by the edge
    q = fp8.quantize(x, "e4m3", scaling, block)
    assert tuple(q.scales.shape) == scales_shape and q.values.dtype == torch.float8_e4m3fn
    assert q.values.float().abs().max().item() == 448.0
    back = q.dequantize()
    # a value that lands in e4m3's normal range is off by at most half a step (2^-4) of itself; the
    # tiny ones (subnormal after scaling) keep fewer bits
    normal = x.abs() / q.scale_grid().double() >= fp8.FORMATS["e4m3"].min_normal
    assert normal.float().mean() > 0.99
    assert float(((back - x).abs() / x.abs())[normal].max()) <= 2.0**-4 + 1e-12
    assert q.nbytes == 130 * 200 + 4 * q.scales.numel()


def test_block_scales_keep_the_small_values_one_scale_flushes():
    """Small activations beside one large outlier: one scale per tensor pushes them below e4m3's
    smallest subnormal (they become zeros); a scale per 1 x 128 block keeps their digits."""
    x = torch.full((4, 256), 1e-3, dtype=torch.float64)
    x[0, 200] = 1e3  # the outlier, in the second block of row 0
    small = torch.ones_like(x, dtype=torch.bool)
    small[:, 128:] = False
    per_tensor = fp8.quantize(x, "e4m3", "tensor").dequantize()
    per_block = fp8.quantize(x, "e4m3", "block", (1, 128)).dequantize()
    assert relative_error(per_tensor[small], x[small]) == 1.0  # all flushed to zero
    assert relative_error(per_block[small], x[small]) < 2.0**-4


def test_quantize_refuses_what_it_cannot_represent():
    with pytest.raises(ValueError, match="2-D float"):
        fp8.quantize(torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="inf or NaN"):
        fp8.quantize(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="block scaling needs block"):
        fp8.quantize(torch.ones(4, 4), scaling="block")
    with pytest.raises(ValueError, match="unknown scaling"):
        fp8.quantize(torch.ones(4, 4), scaling="diagonal")
    zeros = fp8.quantize(torch.zeros(3, 3))
    assert zeros.scales.item() == 1.0 and zeros.dequantize().abs().sum() == 0


def test_aligned_sum_cuts_every_addend_below_the_largest_exponent():
    # 4 + 0.75 with 3 bits: 4 < 2^3, so the last bit kept is worth 2^0 and 0.75 is dropped
    got = fp8.aligned_sum(torch.zeros(1, 1, dtype=torch.float64), torch.tensor([[[4.0], [0.75]]], dtype=torch.float64), 3)
    assert got.item() == 4.0
    # the accumulator counts: 0.75 + 0.75 beside an accumulator of 8 (last bit 2^1) adds nothing
    got = fp8.aligned_sum(torch.full((1, 1), 8.0, dtype=torch.float64),
                          torch.tensor([[[0.75], [0.75]]], dtype=torch.float64), 3)
    assert got.item() == 8.0
    # with enough bits, exact
    p = torch.tensor([[[4.0], [0.75], [-0.125]]], dtype=torch.float64)
    assert fp8.aligned_sum(torch.zeros(1, 1, dtype=torch.float64), p, 20).item() == 4.625


def _fp8_operands(K: int, make=torch.rand):
    torch.manual_seed(1)
    qa, qb = fp8.quantize(make(16, K)), fp8.quantize(make(K, 16))
    a, b = qa.values.double(), qb.values.double()
    return a, b, a @ b


def test_the_sum_model_loses_more_with_k_and_promotion_stops_it():
    errors = {}
    for K in (512, 4096):
        a, b, exact = _fp8_operands(K)
        errors[K] = relative_error(fp8.limited_sum_matmul(a, b), exact)
        promoted = relative_error(fp8.limited_sum_matmul(a, b, promote_every=4), exact)
        assert promoted < errors[K] / 10, (K, promoted, errors[K])
    assert errors[4096] > 3 * errors[512]
    a, b, exact = _fp8_operands(1024, torch.randn)
    assert relative_error(fp8.limited_sum_matmul(a, b, accumulator_bits=40), exact) < 1e-9


def test_the_sum_model_refuses_bad_arguments():
    with pytest.raises(ValueError, match="M x K and K x N"):
        fp8.limited_sum_matmul(torch.ones(2, 3), torch.ones(4, 2))
    with pytest.raises(ValueError, match="promote_every"):
        fp8.limited_sum_matmul(torch.ones(2, 3), torch.ones(3, 2), promote_every=0)
