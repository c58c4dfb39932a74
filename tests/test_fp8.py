"""course_lib.fp8: the formats, scaling into them, and the model of the FP8 tensor core's sums (CPU)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from course_lib import backend, correctness, dtypes, fp8
from course_lib.model import fp8_accumulator
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
    got = fp8_accumulator.aligned_sum(torch.zeros(1, 1, dtype=torch.float64), torch.tensor([[[4.0], [0.75]]], dtype=torch.float64), 3)
    assert got.item() == 4.0
    # the accumulator counts: 0.75 + 0.75 beside an accumulator of 8 (last bit 2^1) adds nothing
    got = fp8_accumulator.aligned_sum(torch.full((1, 1), 8.0, dtype=torch.float64),
                          torch.tensor([[[0.75], [0.75]]], dtype=torch.float64), 3)
    assert got.item() == 8.0
    # with enough bits, exact
    p = torch.tensor([[[4.0], [0.75], [-0.125]]], dtype=torch.float64)
    assert fp8_accumulator.aligned_sum(torch.zeros(1, 1, dtype=torch.float64), p, 20).item() == 4.625


def _fp8_operands(K: int, make=torch.rand):
    torch.manual_seed(1)
    qa, qb = fp8.quantize(make(16, K)), fp8.quantize(make(K, 16))
    a, b = qa.values.double(), qb.values.double()
    return a, b, a @ b


def test_the_sum_model_loses_more_with_k_and_promotion_stops_it():
    errors = {}
    for K in (512, 4096):
        a, b, exact = _fp8_operands(K)
        errors[K] = relative_error(fp8_accumulator.limited_sum_matmul(a, b), exact)
        promoted = relative_error(fp8_accumulator.limited_sum_matmul(a, b, promote_every=4), exact)
        assert promoted < errors[K] / 10, (K, promoted, errors[K])
    assert errors[4096] > 3 * errors[512]
    a, b, exact = _fp8_operands(1024, torch.randn)
    assert relative_error(fp8_accumulator.limited_sum_matmul(a, b, accumulator_bits=40), exact) < 1e-9


def test_the_sum_model_refuses_bad_arguments():
    with pytest.raises(ValueError, match="M x K and K x N"):
        fp8_accumulator.limited_sum_matmul(torch.ones(2, 3), torch.ones(4, 2))
    with pytest.raises(ValueError, match="promote_every"):
        fp8_accumulator.limited_sum_matmul(torch.ones(2, 3), torch.ones(3, 2), promote_every=0)


# ---- check in e4m3: a right FP8 GEMM passes, wrong ones fail ---------------------------------------------

def _right(qa, qw):
    from course_lib.gemm import new_output

    c = new_output(qa.values.shape[0], qw.values.shape[0], torch.bfloat16, qa.values.device)
    c.copy_(qa.dequantize() @ qw.dequantize().t())
    return c


@pytest.mark.parametrize("scaling", sorted(fp8.OPERAND_SCALING))
def test_check_in_e4m3_passes_a_right_gemm_and_fails_wrong_ones(scaling):
    report = correctness.check(_right, "e4m3", scaling=scaling)
    shapes = correctness.FP8_GPU_SHAPES if backend.get().is_gpu else correctness.FP8_CPU_SHAPES
    assert len(report.results) == len(shapes) and report.max_rel_error < dtypes.E4M3.tolerance

    def no_scales(qa, qw):  # the products of the stored values, scales forgotten
        return (qa.values.double() @ qw.values.double().t()).bfloat16()

    def last_column_unwritten(qa, qw):
        c = _right(qa, qw)
        c[:, -1] = float("nan")
        return c

    def w_not_transposed_in_k(qa, qw):  # reads W's K in reverse
        return (qa.dequantize() @ qw.dequantize().flip(1).t()).bfloat16()

    for wrong, why in ((no_scales, "relative error"), (last_column_unwritten, "not finite"),
                       (w_not_transposed_in_k, "relative error")):
        with pytest.raises(AssertionError, match=why):
            correctness.check(wrong, "e4m3", scaling=scaling)


def test_check_in_e4m3_names_a_wrong_output_type_and_cublas_refuses_mixed_scalings():
    with pytest.raises(AssertionError, match="returned torch.float32, expected torch.bfloat16"):
        correctness.check(lambda qa, qw: _right(qa, qw).float(), "e4m3", scaling="tensor")
    qa, _ = fp8.fp8_inputs(4, 8, 16, "tensor", seed=0)
    _, qw = fp8.fp8_inputs(4, 8, 16, "row", seed=0)
    with pytest.raises(ValueError, match="scaled by blocks"):
        fp8.cublas_fp8(qa, qw)
    with pytest.raises(ValueError, match="unknown FP8 GEMM scaling"):
        fp8.fp8_inputs(4, 8, 16, "channel")


def test_the_cublas_yardstick_laid_out_once_refuses_other_operands():
    """course_lib.bench times cuBLAS's FP8 GEMM as ``cublas_fp8_for(qa, qw)``: the operands checked and
    the scales laid out once. Called with other operands it would multiply the first ones: it refuses,
    and its checks are cublas_fp8's."""
    qa, qw = fp8.fp8_inputs(4, 16, 512, "block", seed=0)
    other_a, other_w = fp8.fp8_inputs(4, 16, 512, "block", seed=1)
    call = fp8.cublas_fp8_for(qa, qw)
    for a, w in ((other_a, qw), (qa, other_w)):
        with pytest.raises(ValueError, match="made for other operands"):
            call(a, w)
    with pytest.raises(ValueError, match="M in multiples of 4 and K of 512"):
        fp8.cublas_fp8_for(*fp8.fp8_inputs(3, 16, 512, "block", seed=0))
    from course_lib.target import resolve
    t = resolve("tc_7_fp8", "e4m3", "block")
    assert t.reference() is fp8.cublas_fp8  # without operands: the per-call wrapper
    with pytest.raises(ValueError, match="made for other operands"):
        t.reference((qa, qw))(other_a, qw)


# ---- notebook 12's exercises ----------------------------------------------------------------------

def _blocks(x, *, divide_by=448.0, zero_scale=1.0, per_matrix_row=False, skip_divide=False, guard=None):
    """quantize_blocks with one deliberate mistake at a time (``guard``: the scale is guard(amax) / 448)."""
    M, K = x.shape
    nb = -(-K // 128)
    scales, values = torch.ones(M, nb), torch.empty(M, K, dtype=torch.float8_e4m3fn)
    for j in range(nb):
        part = x[:, 128 * j: 128 * (j + 1)]
        amax = (x if per_matrix_row else part).abs().amax(dim=1)
        scales[:, j] = guard(amax) / divide_by if guard else torch.where(amax > 0, amax / divide_by, zero_scale)
        values[:, 128 * j: 128 * (j + 1)] = (part if skip_divide else part / scales[:, j:j + 1]).clamp(-448, 448).to(
            torch.float8_e4m3fn)
    return values, scales


_SCALES_SEEN = {}


def _static_scales(x):
    """quantize_blocks with each shape's scales from the first input of that shape (static scaling)."""
    scales = _SCALES_SEEN.setdefault(tuple(x.shape), _blocks(x)[1])
    values = (x / scales.repeat_interleave(128, dim=1)[:, :x.shape[1]]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return values, scales


@pytest.mark.parametrize("wrong, said", [
    (None, "no function yet"),
    (lambda x: None, "returns None"),
    (lambda x: _blocks(x, divide_by=1.0), "divide it by 448"),
    (lambda x: _blocks(x, zero_scale=0.0), "give it scale 1"),
    (lambda x: _blocks(x, per_matrix_row=True), "has its own"),
    (lambda x: _blocks(x, skip_divide=True), "divide each value by its block's scale"),
    (lambda x: (_blocks(x)[0].float(), _blocks(x)[1]), "torch.float8_e4m3fn"),
    (lambda x: (_blocks(x)[0], _blocks(x)[1][:, :1]), "one per row and block"),
    # fresh adversarial learners': a guard of 1e-6 (blocks of about 3e-9 and 1e-11 show it), fp64 scales,
    # the input divided in place, amax + eps, and three things returned
    (lambda x: _blocks(x, guard=lambda a: a.clamp(min=1e-6)), "columns 128-255 for a 4 x 300 input"),
    (lambda x: (_blocks(x)[0], _blocks(x)[1].double()), "should be torch.float32"),
    (lambda x: _blocks(x.div_(1.0 + 2 ** -10)), "changed its input x"),
    (lambda x: _blocks(x, guard=lambda a: a + 1e-6), "a small number added"),
    (lambda x: (*_blocks(x), None), "a tuple of 3"),
    (lambda x: _blocks(x, guard=lambda a: torch.where(a > 1e-9, a, 448.0)), "columns 128-255 for a 4 x 300 input"),
    (_static_scales, "for a 5 x 300 input"),   # the second input of that shape gets the first one's scales
])
def test_the_block_puzzle_rejects_each_mistake_and_names_it(capsys, wrong, said):
    from course_lib.exercises import fp8 as ex

    assert not ex.block_quantize.check(wrong).ok
    assert said in " ".join(capsys.readouterr().out.split())


def test_the_block_puzzle_takes_a_zero_block_s_scale_of_0_when_its_values_are_0(capsys):
    """The starter allows any guard that keeps a zero row finite: scale 0 and values 0 dequantize to 0."""
    from course_lib.exercises import fp8 as ex

    def zero_scale(x):
        values, scales = _blocks(x)
        amax = torch.stack([p.abs().amax(dim=1) for p in torch.split(x, 128, dim=1)], dim=1)
        return values, torch.where(amax > 0, scales, 0.0)

    assert ex.block_quantize.check(zero_scale).ok
    assert ex.block_quantize.check(lambda x: _blocks(x, guard=lambda a: a.clamp(min=1e-12))).ok


def _pow2_up(amax):
    return torch.exp2(torch.ceil(torch.log2(amax / 448)))


def _below_row_0(fix):
    """quantize_blocks, then ``fix(values, scales)`` applied to every row but row 0."""
    def mine(x):
        values, scales = _blocks(x)
        if x.shape[0] > 1:
            values, scales = values.clone(), scales.clone()
            values[1:], scales[1:] = fix(values[1:], scales[1:])
        return values, scales
    return mine


def _rounded_toward_zero(x):
    values, scales = _blocks(x)
    exact = x.double() / scales.double().repeat_interleave(128, 1)[:, :x.shape[1]]
    bits = values.view(torch.uint8).clone()
    bits[(values.double().abs() > exact.abs()) & ((bits & 0x7F) > 0)] -= 1  # the e4m3 value one step nearer 0
    return bits.view(torch.float8_e4m3fn), scales


@pytest.mark.parametrize("wrong, said", [
    # the blocks right, the factor wrong: said so, with the factor, and not blamed on the blocks
    (lambda x: _blocks(x, divide_by=240.0), "1.867 times the course's in every block for a 5 x 300 input: you "
                                            "divide the largest magnitude by 240 (240 is the largest value of "
                                            "e4m3fnuz"),
    (lambda x: _blocks(x, divide_by=500.0), "you divide the largest magnitude by 500, the notebook by 448 "
                                            "(E4M3_MAX), so the largest value lands on 500, beyond e4m3's "
                                            "largest value: it saturates"),
    (lambda x: (lambda v, s: (v, 1 / s))(*_blocks(x)), "not its inverse. The blocks are right; the factor is not."),
    # the factor right, the blocks wrong
    (lambda x: _blocks(x, per_matrix_row=True), "one scale for each whole row"),
    (lambda x: _block_of_all_rows(x), "the same scale for every row of a block"),
    (lambda x: _block_of_row_0(x), "the same scale for every row of a block"),
    (lambda x: _one_scale(x), "one scale for the whole input"),
    (lambda x: _largest_value_not_magnitude(x), "from each block's largest value for a 5 x 300 input, not its "
                                                "largest magnitude"),
    # powers of two rounded the wrong way
    (lambda x: _blocks_with(x, lambda amax: torch.exp2(torch.floor(torch.log2(amax / 448)))),
     "powers of two for a 5 x 300 input, but in row 0, block 0 the largest magnitude lands on 810, beyond 448"),
    (lambda x: _blocks_with(x, lambda amax: 2 * _pow2_up(amax)), "no more than half of 448"),
    # wrong only below row 0: every row is compared
    (_below_row_0(lambda v, s: (v, s * 1.5)), "at row 1, columns 0-127 for a 5 x 300 input, yours is"),
    (_below_row_0(lambda v, s: ((v.float() * 1.5).clamp(-448, 448).to(torch.float8_e4m3fn), s)),
     "value [1, 0] for a 5 x 300 input is"),
    (_rounded_toward_zero, "the next e4m3 value instead of the nearest"),
    (lambda x: 3, "return two torch tensors"),
], ids=["amax/240", "amax/500", "reciprocal", "row-amax", "block-amax", "row-0-amax", "tensor-amax", "no-abs",
        "pow2-down", "pow2-too-far", "scales-wrong-below-row-0", "values-wrong-below-row-0", "truncated",
        "not-a-tuple"])
def test_the_block_puzzle_tells_the_factor_from_the_blocks(capsys, wrong, said):
    from course_lib.exercises import fp8 as ex

    assert not ex.block_quantize.check(wrong).ok
    out = " ".join(capsys.readouterr().out.split())
    assert said in out, out
    if "factor" in out:
        assert "has its own" not in out


def _blocks_with(x, scale_of):
    """quantize_blocks with ``scale_of(amax)`` as each nonzero block's scale."""
    M, K = x.shape
    nb = -(-K // 128)
    scales, values = torch.ones(M, nb), torch.empty(M, K, dtype=torch.float8_e4m3fn)
    for j in range(nb):
        part = x[:, 128 * j: 128 * (j + 1)]
        amax = part.abs().amax(dim=1)
        scales[:, j] = torch.where(amax > 0, scale_of(amax), 1.0)
        values[:, 128 * j: 128 * (j + 1)] = (part / scales[:, j:j + 1]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return values, scales


def _with_amax(x, amax_of):
    """quantize_blocks with ``amax_of(part)`` (one per row) in place of each row's largest magnitude."""
    M, K = x.shape
    nb = -(-K // 128)
    scales, values = torch.ones(M, nb), torch.empty(M, K, dtype=torch.float8_e4m3fn)
    for j in range(nb):
        part = x[:, 128 * j: 128 * (j + 1)]
        amax = amax_of(part).expand(M)
        scales[:, j] = torch.where(amax > 0, amax / 448, 1.0)
        values[:, 128 * j: 128 * (j + 1)] = (part / scales[:, j:j + 1]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return values, scales


def _block_of_all_rows(x):
    return _with_amax(x, lambda part: part.abs().amax())


def _block_of_row_0(x):
    return _with_amax(x, lambda part: part[0].abs().amax())


def _one_scale(x):
    return _with_amax(x, lambda part: x.abs().amax())


def _largest_value_not_magnitude(x):
    return _with_amax(x, lambda part: part.amax(dim=1))


def test_the_block_puzzle_accepts_power_of_two_scales_rounded_up(capsys):
    from course_lib.exercises import fp8 as ex

    assert ex.block_quantize.check(lambda x: _blocks_with(x, _pow2_up)).ok
    out = " ".join(capsys.readouterr().out.split())
    assert "solved" in out and "Your scales are powers of two, rounded up" in out


def test_the_block_puzzle_accepts_values_divided_in_float32_or_multiplied_by_the_inverse(capsys):
    from course_lib.exercises import fp8 as ex

    def times_inverse(x):
        values, scales = _blocks(x)
        inverse = (1 / scales).repeat_interleave(128, 1)[:, :x.shape[1]]
        return (x * inverse).clamp(-448, 448).to(torch.float8_e4m3fn), scales

    assert ex.block_quantize.check(times_inverse).ok
    assert "powers of two" not in capsys.readouterr().out


def test_the_block_puzzle_accepts_the_course_solution_and_a_float32_one(capsys):
    from course_lib.exercises import fp8 as ex

    assert ex.block_quantize.check(ex.quantize_blocks).ok
    assert ex.block_quantize.check(lambda x: _blocks(x)).ok
    assert "solved" in capsys.readouterr().out


def test_the_fp8_questions_know_their_answers(capsys):
    from course_lib.exercises import fp8 as ex

    assert ex.vanishing_ratio.check(16384).ok and ex.vanishing_ratio.check(8192).ok
    assert "Any answer from 2^13 = 8,192 to 2^14 = 16,384 counts" in " ".join(capsys.readouterr().out.split())
    assert not ex.vanishing_ratio.check(8).ok and not ex.vanishing_ratio.check(2**23).ok
    # Qwen2.5 7B's down projection, 3584 x 18944: 28 x 148 blocks of 4 bytes, a count no side equals
    assert ex.WEIGHT == (3584, 18944) and ex.weight_scale_bytes.check(28 * 148 * 4).ok
    for side in ex.WEIGHT:
        assert not ex.weight_scale_bytes.check(side).ok


def test_the_block_puzzle_says_when_its_two_outputs_are_swapped(capsys):
    from course_lib.exercises import fp8 as ex

    assert not ex.block_quantize.check(lambda x: _blocks(x)[::-1]).ok
    assert "returns (scales, values) for a 5 x 300 input: the two are swapped" in " ".join(capsys.readouterr().out.split())


def test_the_fp8_questions_take_numbers_only_and_no_unit_message_takes_a_stranger(capsys):
    """Text is told to be a number, as in every notebook's numeric questions ('16,576', as the solution
    writes it, is told to drop the quotes and the comma; typed bare, 16,576 is a tuple, told how Python
    reads it); a number in no unit the check knows gets the hint, which names no unit it was not given."""
    from course_lib.exercises import fp8 as ex

    assert ex.weight_scale_bytes.check(16576.0).ok and ex.weight_scale_bytes.check(torch.tensor(16576)).ok
    capsys.readouterr()
    for text, advice in (("16,576", "write the number without quotes, 16576"), ("16 kB", "the text '16 kB';")):
        assert not ex.weight_scale_bytes.check(text).ok
        out = " ".join(capsys.readouterr().out.split())
        assert f"give a number (bytes), not the text {text!r}" in out and advice in out and "Hint" not in out, out
    assert not ex.weight_scale_bytes.check((16, 576)).ok
    assert "Python reads 16,576 as 2 numbers; write 16576 or 16_576" in " ".join(capsys.readouterr().out.split())
    for stranger in (17000, 20.0, 16577):
        assert not ex.weight_scale_bytes.check(stranger).ok
        out = " ".join(capsys.readouterr().out.split())
        assert "is not it yet" in out and "KiB" not in out and "kB" not in out.split("is not it")[1], out
    # the ratio's right answers are not mistaken for its upside-down ones, nor the reverse; its text is not
    # a number either (it was taken for one before)
    assert ex.vanishing_ratio.check(16384).ok and ex.vanishing_ratio.check(np.float32(12000)).ok
    assert not ex.vanishing_ratio.check(-2**-14).ok and not ex.vanishing_ratio.check("16384").ok
    out = " ".join(capsys.readouterr().out.split())
    assert "product / sum" not in out and "give a number, not the text '16384'" in out, out


def test_the_block_puzzle_accepts_a_clamped_guard_for_zero_rows():
    """The TODO allows any guard that keeps a block of zeros finite, e.g. amax.clamp(min=1e-12)."""
    from course_lib.exercises import fp8 as ex

    def clamped(x):
        M, K = x.shape
        scales, values = torch.ones(M, -(-K // 128)), torch.empty(M, K, dtype=torch.float8_e4m3fn)
        for j in range(scales.shape[1]):
            part = x[:, 128 * j: 128 * (j + 1)]
            scales[:, j] = part.abs().amax(dim=1).clamp(min=1e-12) / 448
            values[:, 128 * j: 128 * (j + 1)] = (part / scales[:, j:j + 1]).to(torch.float8_e4m3fn)
        return values, scales

    assert ex.block_quantize.check(clamped).ok


def _amax_from(window):
    """quantize_blocks whose block maximum is taken over ``window(x, j, part)`` instead of the whole block."""
    def mine(x):
        M, K = x.shape
        scales, values = torch.ones(M, -(-K // 128)), torch.empty(M, K, dtype=torch.float8_e4m3fn)
        for j in range(scales.shape[1]):
            part = x[:, 128 * j: 128 * (j + 1)]
            amax = window(x, j, part).abs().amax(dim=1)
            scales[:, j] = torch.where(amax > 0, amax / 448, 1.0)
            values[:, 128 * j: 128 * (j + 1)] = (part / scales[:, j:j + 1]).clamp(-448, 448).to(torch.float8_e4m3fn)
        return values, scales
    return mine


@pytest.mark.parametrize("wrong", [
    _amax_from(lambda x, j, part: x[:, 128 * j: 128 * j + 127]),               # "inclusive" end: last column left out
    _amax_from(lambda x, j, part: part[:, 1:] if part.shape[1] > 1 else part),  # first column left out
    _amax_from(lambda x, j, part: x[:, 127 * j: 127 * (j + 1)]),               # windows 127 wide
    lambda x: _blocks_with(x, lambda amax: amax.clamp(min=2e-3) / 448),       # a zero guard that moves real scales
    lambda x: _blocks_with(x, lambda amax: amax.clamp(min=1e-5) / 448),
], ids=["misses-last-column", "misses-first-column", "127-wide", "guard-2e-3", "guard-1e-5"])
def test_the_block_puzzle_refuses_a_block_maximum_that_misses_an_edge_column_or_a_tiny_block(capsys, wrong):
    """Some block of the check's inputs has its largest magnitude in its first column, some in its last
    (of a full and of a partial block), and some block's is about 1e-6: each of these is refused at the
    row and block whose scale is wrong."""
    from course_lib.exercises import fp8 as ex

    assert not ex.block_quantize.check(wrong).ok
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"at row \d+, columns \d+-\d+ for a \d+ x \d+ input, yours is", out), out


def test_the_block_puzzle_inputs_put_a_block_maximum_on_every_edge():
    """The inputs themselves: a full block's maximum in column 0 and in column 127, a partial last block's
    in its last column, a nonzero block maximum below 1e-5, and a block of zeros."""
    from course_lib.exercises import fp8 as ex

    where, smallest, zeros = set(), float("inf"), False
    for x in ex._cases():
        for j, part in enumerate(torch.split(x.abs(), 128, dim=1)):
            amax, at = part.max(dim=1)
            for a, c in zip(amax.tolist(), at.tolist()):
                zeros |= a == 0
                if a > 0:
                    smallest = min(smallest, a)
                    where.add(("first" if c == 0 else "last" if c == part.shape[1] - 1 else "inside",
                               "full" if part.shape[1] == 128 else "partial"))
    assert {("first", "full"), ("last", "full"), ("last", "partial")} <= where, where
    assert smallest < 1e-5 and zeros


@pytest.mark.parametrize("question, answer, words", [
    ("vanishing_ratio", 2**15, "rounded to nearest"),          # either reading of the convention, or rounding
    ("vanishing_ratio", 14, "number of bits kept"),
    ("weight_scale_bytes", 28 * 148, "number of scales"),
    ("weight_scale_bytes", 28 * 148 * 2, "2 bytes a scale"),
    ("weight_scale_bytes", 28 * 148 * 8, "8 bytes a scale"),
    ("weight_scale_bytes", 28 * 148 * 4 / 1024, "in KiB"),
    ("weight_scale_bytes", 16.576, "in kB"),                  # 16,576 bytes in kB (1,000 bytes)
    ("weight_scale_bytes", 16.58, "in kB"),                   # ... rounded
    ("weight_scale_bytes", 0.016576, "in MB"),
    ("weight_scale_bytes", 3584 * 18944 + 28 * 148 * 4, "the e4m3 weight and its scales together"),
    ("vanishing_ratio", 2**-14, "that is product / sum"),     # the ratio upside down
    ("vanishing_ratio", 1 / 12000, "that is product / sum"),
    ("vanishing_ratio", 2**-13, "that is product / sum"),
    ("weight_scale_bytes", (28 + 148) * 4, "multiply the two counts"),  # blocks along N plus along K
    ("weight_scale_bytes", 3584 * 4, "one scale per row"),    # 3584 x 18944 read as per-row scaling
    ("weight_scale_bytes", 3584 * 18944, "the e4m3 weight itself"),
    ("weight_scale_bytes", 28 * 148 * 128 * 4, "1 x 128 block"),
])
def test_the_fp8_questions_name_each_likely_mistake(question, answer, words, capsys):
    from course_lib.exercises import fp8 as ex

    assert not getattr(ex, question).check(answer).ok
    out = " ".join(capsys.readouterr().out.split())
    assert words in out and "not it yet" not in out, out


@pytest.mark.parametrize("name", ["qa", "qw"])
def test_check_in_e4m3_guards_each_operand_s_scales(name):
    """A write one past an operand's scales is named too: the scales are guarded like A, W and C."""
    def writes_past_scales(qa, qw):
        scales = (qa if name == "qa" else qw).scales
        c = _right(qa, qw)
        torch.as_strided(scales, (scales.numel() + 1,), (1,))[-1] = 0.0  # one element past the scales
        return c

    with pytest.raises(AssertionError, match="outside (A|W)'s scales"):
        correctness.check(writes_past_scales, "e4m3", scaling="tensor")


def test_fp8_tolerance_grows_with_the_square_root_of_k_beyond_4096():
    """The tolerance at K = 16384 is twice the one at K <= 4096 (no CPU shape has K > 1024, so only
    this holds the growth)."""
    assert correctness.tolerance("e4m3", 1024) == correctness.tolerance("e4m3", 4096) == dtypes.E4M3.tolerance
    assert correctness.tolerance("e4m3", 16384) == pytest.approx(2 * dtypes.E4M3.tolerance)


def test_check_in_e4m3_guards_the_operands_and_the_output():
    """check places A, W, their scales and C in guard regions: a write past C is named."""
    def writes_past_c(qa, qw):
        c = _right(qa, qw)
        torch.as_strided(c, (c.numel() + 1,), (1,))[-1] = 0.0  # one element past the end of C
        return c

    with pytest.raises(AssertionError, match="outside C"):
        correctness.check(writes_past_c, "e4m3", scaling="tensor")
