"""The FP8 Triton GEMM (course_lib.kernels.coalescing_and_triton.fast_fp8): against the float64
product of the dequantized operands, its rounding, its edges, and every refusal of its wrapper."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from course_lib import backend, correctness, fp8
from course_lib.instruments import guard
from course_lib.gemm import new_output, relative_error
from course_lib.instruments import guarded
from course_lib.kernels.coalescing_and_triton.fast_fp8 import Fp8Config, fp8_config, fp8_matmul

DEVICE = backend.get().torch_device
# C is rounded once to bf16 (8 significant bits): to nearest, each element moves by at most 2^-8 of
# itself (3.9e-3), so ||C - exact|| <= 2^-8 ||exact|| in the Frobenius norm; about 1.7e-3 for values
# spread over a binade. Everything before the rounding is far smaller: a product of two e4m3 values
# is exact in fp32, fp32 sums of K <= 256 of them err by about sqrt(K) 2^-24 ~ 1e-6 (on Hopper the
# tensor core's narrow adder, promoted every 128 of K, about 1.3e-4: cuBLAS's measured figure in
# experiments/JOURNAL.md), the two scale multiplications by 2^-24 each. A correct kernel stays below
# 4e-3; a wrong one lands far above.
TOLERANCE = 4e-3
# Partial tiles in M, N and K (the default configs take 64 x 64 or 128 x 128 tiles, K slices of up
# to 128); one row; several K slices.
SHAPES = [(1, 40, 64), (37, 72, 200), (130, 136, 256)]
SCALINGS = [("tensor", "tensor"), ("row", "row"), ("tensor", "row"), ("row", "tensor")]


def operands(M: int, N: int, K: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A (M x K) and W (N x K), normal, each row scaled by its own power of two (2^-4 .. 2^4), so
    that a per-row scale read from the wrong row shows."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen) * 2.0 ** torch.randint(-4, 5, (M, 1), generator=gen)
    w = torch.randn(N, K, generator=gen) * 2.0 ** torch.randint(-4, 5, (N, 1), generator=gen)
    return a.to(DEVICE), w.to(DEVICE)


def quantized(M, N, K, seed, scalings=("row", "row")):
    a, w = operands(M, N, K, seed)
    return fp8.quantize(a, "e4m3", scalings[0]), fp8.quantize(w, "e4m3", scalings[1])


def exact(qa: fp8.Quantized, qw: fp8.Quantized) -> torch.Tensor:
    return qa.dequantize() @ qw.dequantize().T  # float64


@pytest.mark.parametrize("scalings", SCALINGS, ids=lambda s: "-".join(s))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_the_float64_product_of_the_dequantized_operands(shape, scalings):
    qa, qw = quantized(*shape, seed=sum(shape) + len(scalings[0]), scalings=scalings)
    with guarded():
        assert torch.isnan(new_output(1, 1, torch.bfloat16, DEVICE)).all()  # the poison is on
        c = fp8_matmul(qa, qw)
    assert c.dtype == torch.bfloat16 and tuple(c.shape) == shape[:2]
    assert not torch.isnan(c).any(), "an element of C was never written"
    assert relative_error(c, exact(qa, qw)) < TOLERANCE


@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_passes_the_course_check_in_e4m3(scaling):
    report = correctness.check(fp8_matmul, "e4m3", scaling=scaling, seed=0)
    assert len(report.results) == len(correctness.FP8_CPU_SHAPES if not backend.get().is_gpu
                                      else correctness.FP8_GPU_SHAPES)


@pytest.mark.parametrize("config", [
    Fp8Config(16, 16, 32, group_m=2),  # 3 x 5 tiles: bands of 2 tile rows, the last one shorter
    Fp8Config(32, 64, 64, group_m=1, fast_accumulation=True),
])
def test_other_configs_give_the_same_product(config):
    qa, qw = quantized(37, 72, 200, seed=7)
    with guarded():
        c = fp8_matmul(qa, qw, config)
    assert not torch.isnan(c).any()
    assert relative_error(c, exact(qa, qw)) < TOLERANCE


@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_the_descriptor_kernel_passes_check_and_falls_back_where_tma_cannot_go(scaling, monkeypatch):
    """fp8_matmul_tma_kernel (tensor descriptors) where every operand's rows are 16-byte multiples;
    where C's are not (N = 37: 74 bytes), the pointer kernel, with the same result."""
    from course_lib.kernels.coalescing_and_triton import fast_fp8

    config = Fp8Config(32, 64, 64, descriptors=True)
    correctness.check(lambda qa, qw: fp8_matmul(qa, qw, config), "e4m3",
                      [(1, 16, 16), (37, 80, 208), (130, 144, 256)], scaling=scaling)
    launched = []
    for name in ("fp8_matmul_tma_kernel", "fp8_matmul_kernel"):
        kernel = getattr(fast_fp8, name)
        monkeypatch.setattr(fast_fp8, name, _Recording(kernel, name, launched))
    qa, qw = quantized(20, 37, 64, seed=3)
    c = fp8_matmul(qa, qw, config)
    assert launched == ["fp8_matmul_kernel"] and relative_error(c, exact(qa, qw)) < TOLERANCE
    qa, qw = quantized(20, 40, 64, seed=3)
    fp8_matmul(qa, qw, config)
    assert launched[-1] == "fp8_matmul_tma_kernel"


class _Recording:
    """A stand-in for a Triton kernel that notes its name at every launch and launches it."""

    def __init__(self, kernel, name, log):
        self.kernel, self.name, self.log = kernel, name, log

    def __getitem__(self, grid):
        self.log.append(self.name)
        return self.kernel[grid]


def test_forgotten_or_misplaced_scales_fail_by_far():
    """What a kernel that mishandles the scales computes, made by handing the right kernel wrong
    scales: each lands orders of magnitude above the tolerance, so the test above can fail."""
    qa, qw = quantized(37, 72, 200, seed=3)
    ref = exact(qa, qw)
    ones = fp8_matmul(dataclasses.replace(qa, scales=torch.ones_like(qa.scales)),
                      dataclasses.replace(qw, scales=torch.ones_like(qw.scales)))
    assert relative_error(ones, ref) > 1.0  # no scales at all
    first_row = fp8_matmul(dataclasses.replace(qa, scales=qa.scales[:1].expand_as(qa.scales)), qw)
    assert relative_error(first_row, ref) > 100 * TOLERANCE  # stride 0 where it should be 1
    flipped = fp8_matmul(qa, dataclasses.replace(qw, scales=qw.scales.flip(0)))
    assert relative_error(flipped, ref) > 100 * TOLERANCE  # W's scales on the wrong columns of C


def test_rounds_to_nearest_even_as_torch_does():
    """A = the identity, so each sum is one exact product and C = bf16((W^T * sa) * sw), in the order
    the kernel multiplies in fp32: equal bit for bit to torch's rounding. Then W of powers of two
    and scales of A exactly halfway between two bf16 values: two round down to even, two up."""
    K, N = 64, 48
    e4m3 = fp8.FORMATS["e4m3"]
    gen = torch.Generator().manual_seed(11)
    w = fp8.quantize(torch.randn(N, K, generator=gen), "e4m3", "row")
    sa = torch.rand(K, 1, generator=gen) * 10
    sa[:4, 0] = torch.tensor([1 + 2.0**-8, 1 + 3 * 2.0**-8, -(1 + 2.0**-8), -(1 + 3 * 2.0**-8)])
    eye = fp8.Quantized(torch.eye(K).to(torch.float8_e4m3fn), sa, (1, K), e4m3)
    signs = torch.randint(0, 2, (N, K), generator=gen) * 2.0 - 1
    pow2 = signs * 2.0 ** torch.randint(-3, 4, (N, K), generator=gen)
    w2 = fp8.Quantized(pow2.to(torch.float8_e4m3fn), torch.ones(N, 1), (1, K), e4m3)

    def on_device(q):
        return dataclasses.replace(q, values=q.values.to(DEVICE), scales=q.scales.to(DEVICE))

    for wq in (w, w2):
        want = ((wq.values.float().T * sa) * wq.scales.T).to(torch.bfloat16)
        assert torch.equal(fp8_matmul(on_device(eye), on_device(wq)).cpu(), want)
    ties = fp8_matmul(on_device(eye), on_device(w2)).cpu().float()[:4] / pow2.T[:4]
    halfway_rounded = torch.tensor([1.0, 1 + 2.0**-6, -1.0, -(1 + 2.0**-6)])  # bf16 steps 2^-7 at 1
    assert torch.equal(ties, halfway_rounded[:, None].expand(4, N))


def test_every_finite_e4m3_value_is_read_exactly():
    """A's first column holds each of the 254 finite bit patterns of e4m3 (0x7f and 0xff are NaN);
    W picks that column out, so C holds the values, which bf16 represents exactly."""
    bits = torch.tensor([b for b in range(256) if b & 0x7F != 0x7F], dtype=torch.uint8)
    a = torch.zeros(len(bits), 32, dtype=torch.uint8)
    a[:, 0] = bits
    w = torch.zeros(16, 32)
    w[:, 0] = 1.0
    e4m3 = fp8.FORMATS["e4m3"]
    qa = fp8.Quantized(a.view(torch.float8_e4m3fn).to(DEVICE), torch.ones(1, 1, device=DEVICE), (len(bits), 32), e4m3)
    qw = fp8.Quantized(w.to(torch.float8_e4m3fn).to(DEVICE), torch.ones(1, 1, device=DEVICE), (16, 32), e4m3)
    c = fp8_matmul(qa, qw).cpu().float()
    assert torch.equal(c, a.view(torch.float8_e4m3fn).float()[:, :1].expand(-1, 16))


def test_reads_and_writes_stay_inside_the_arrays():
    """A and W as views with padded rows full of 448 (the kernel must follow the row strides and mask
    K's tail, or the 448s enter C); C and the scales in guard regions (course_lib.instruments.guard: on
    the interpreter every stray address is named, on a GPU a stray write changes a guard region)."""
    M, N, K = 37, 72, 200
    qa, qw = quantized(M, N, K, seed=5)

    def padded(q: fp8.Quantized) -> torch.Tensor:
        rows, cols = q.values.shape
        big = torch.full((rows + 3, cols + 56), 448.0, device=DEVICE).to(torch.float8_e4m3fn)
        big[:rows, :cols] = q.values
        return big[:rows, :cols]

    with guard.guarded() as g:
        pa = dataclasses.replace(qa, values=padded(qa), scales=g.place(qa.scales, "scale_a"))
        pw = dataclasses.replace(qw, values=padded(qw), scales=g.place(qw.scales, "scale_w"))
        assert pa.values.stride() == (K + 56, 1)
        c = fp8_matmul(pa, pw)
        assert g.violations() == []
    assert not torch.isnan(c).any()
    assert relative_error(c, exact(qa, qw)) < TOLERANCE


def test_block_shapes_that_cover_a_row_or_the_tensor_are_accepted():
    a, w = operands(37, 72, 200, seed=9)
    qa = fp8.quantize(a, "e4m3", "block", (1, 256))  # one block per row: per row
    qw = fp8.quantize(w, "e4m3", "block", (128, 256))  # one block for the whole 72 x 200: per tensor
    assert relative_error(fp8_matmul(qa, qw), exact(qa, qw)) < TOLERANCE


def test_the_config_rule_and_its_checks():
    small, short, large = fp8_config(16, 4096, 4096), fp8_config(2048, 2304, 768), fp8_config(4096, 4096, 4096)
    assert (small.block_m, small.block_n, small.block_k) == (64, 64, 128)
    assert (short.block_m, short.block_n, short.block_k) == (64, 64, 128)
    assert (large.block_m, large.block_n, large.block_k, large.num_warps, large.descriptors) == (256, 128, 128, 8, True)
    assert fp8_config(1024, 4096, 4096).block_m == 64  # 4 x 32 = 128 big tiles: less than a wave of 132
    assert fp8_config(1024, 4096, 4096, sms=114).block_m == 256  # a wave on a GPU of 114 SMs (an H100 PCIe)
    assert fp8_config(16, 40, 40).block_k == 64 and fp8_config(16, 40, 8).block_k == 32
    assert small.max_num_imprecise_acc == 128 and not small.fast_accumulation
    assert dataclasses.replace(small, fast_accumulation=True).max_num_imprecise_acc is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.block_m = 32
    with pytest.raises(ValueError, match="block_k must be a power of two >= 32"):
        Fp8Config(64, 64, 16)
    with pytest.raises(ValueError, match="block_n must be a power of two"):
        Fp8Config(64, 48, 64)
    with pytest.raises(ValueError, match="group_m"):
        Fp8Config(64, 64, 64, group_m=0)


# ---- what the wrapper refuses ----------------------------------------------------------------------
def test_refuses_e5m2():
    a, w = operands(8, 16, 32, seed=1)
    with pytest.raises(ValueError, match=r"qa is in e5m2 .* e4m3 only.*fp8\.quantize\(x, 'e4m3'"):
        fp8_matmul(fp8.quantize(a, "e5m2"), fp8.quantize(w, "e4m3"))


def test_refuses_operands_that_are_not_matrices():
    qa, qw = quantized(8, 16, 32, seed=1)
    flat = dataclasses.replace(qw, values=qw.values.reshape(1, 16, 32))
    with pytest.raises(ValueError, match=r"qw must be a 2-D matrix, but its shape is \(1, 16, 32\)"):
        fp8_matmul(qa, flat)


def test_refuses_mismatched_k_and_says_w_is_n_by_k():
    a, w = operands(8, 16, 32, seed=1)
    qa, qw_t = fp8.quantize(a, "e4m3", "row"), fp8.quantize(w.T.contiguous(), "e4m3", "row")  # W^T: K x N
    with pytest.raises(ValueError, match=r"qa is 8 x 32 and qw is 32 x 16.*qw is N x K.*w\.T\.contiguous\(\)"):
        fp8_matmul(qa, qw_t)


def test_refuses_empty_matrices():
    qa, _ = quantized(8, 16, 32, seed=1)
    empty = fp8.Quantized(torch.empty(0, 32, device=DEVICE).to(torch.float8_e4m3fn),
                          torch.ones(0, 1, device=DEVICE), (1, 32), fp8.FORMATS["e4m3"])
    with pytest.raises(ValueError, match="empty matrix"):
        fp8_matmul(qa, empty)


@pytest.mark.parametrize("operand, scaling, block", [
    ("qa", "block", (1, 128)), ("qw", "block", (128, 128)), ("qw", "column", None), ("qa", "block", (8, 256)),
])
def test_refuses_scales_other_than_per_tensor_or_per_row(operand, scaling, block):
    a, w = operands(37, 72, 200, seed=2)
    qa = fp8.quantize(a, "e4m3", scaling, block) if operand == "qa" else fp8.quantize(a, "e4m3", "row")
    qw = fp8.quantize(w, "e4m3", scaling, block) if operand == "qw" else fp8.quantize(w, "e4m3", "row")
    with pytest.raises(ValueError, match=rf"{operand} has one scale per .* block.*'tensor'.*'row'"
                                         r".*128 x 128\) change along K: fp8_matmul_blockscaled takes those"):
        fp8_matmul(qa, qw)


@pytest.mark.parametrize("config", [None, Fp8Config(32, 64, 128, group_m=2), Fp8Config(16, 256, 128)])
def test_the_block_scaled_kernel_passes_check(config):
    """DeepSeek-V3's scales: A per 1 x 128, W per 128 x 128, applied to each K-slice's sum; shapes
    that cut the blocks (K = 257, N = 129) and the tiles."""
    from course_lib.kernels.coalescing_and_triton.fast_fp8 import fp8_matmul_blockscaled

    correctness.check(lambda qa, qw: fp8_matmul_blockscaled(qa, qw, config), "e4m3",
                      [(1, 8, 16), (37, 129, 257), (130, 300, 520)], scaling="block")


def test_the_block_scaled_kernel_applies_every_blocks_scale():
    """One K-block's scale of A replaced by another's: the product is off by far."""
    from course_lib.kernels.coalescing_and_triton.fast_fp8 import fp8_matmul_blockscaled

    qa, qw = fp8.fp8_inputs(37, 129, 257, "block", seed=4)
    right = fp8_matmul_blockscaled(qa, qw)
    wrong_scales = qa.scales.clone()
    wrong_scales[:, 1] = wrong_scales[:, 0] * 3
    wrong = fp8_matmul_blockscaled(dataclasses.replace(qa, scales=wrong_scales), qw)
    assert relative_error(right, exact(qa, qw)) < TOLERANCE < relative_error(wrong, exact(qa, qw))


def test_the_block_scaled_kernel_refuses_other_blocks_and_block_k():
    from course_lib.kernels.coalescing_and_triton.fast_fp8 import fp8_matmul_blockscaled

    qa, qw = fp8.fp8_inputs(8, 16, 256, "row", seed=1)
    with pytest.raises(ValueError, match=r"takes A in 1 x 128 blocks .* qa has 1 x 256.*'block', \(1, 128\)"):
        fp8_matmul_blockscaled(qa, qw)
    qa, qw = fp8.fp8_inputs(8, 16, 256, "block", seed=1)
    with pytest.raises(ValueError, match="BLOCK_K must be 128, not 64"):
        fp8_matmul_blockscaled(qa, qw, Fp8Config(16, 16, 64))


def test_refuses_scales_that_do_not_match_their_block():
    qa, qw = quantized(8, 16, 32, seed=1)
    with pytest.raises(ValueError, match=r"qa.scales has shape \(4, 1\).*need \(8, 1\)"):
        fp8_matmul(dataclasses.replace(qa, scales=qa.scales[:4]), qw)


def test_refuses_operands_on_different_devices():
    qa, qw = quantized(8, 16, 32, seed=1)
    elsewhere = dataclasses.replace(qw, scales=qw.scales.to("meta"))
    with pytest.raises(ValueError, match=r"different devices .*qw.scales on meta.*move all four to one device"):
        fp8_matmul(qa, elsewhere)
    all_meta = [dataclasses.replace(q, values=q.values.to("meta"), scales=q.scales.to("meta")) for q in (qa, qw)]
    with pytest.raises(ValueError, match=r"on meta, but the .* backend runs the kernel on"):
        fp8_matmul(*all_meta)


def test_refuses_operands_that_are_not_k_major():
    qa, qw = quantized(8, 16, 32, seed=1)
    column_major = dataclasses.replace(qa, values=qa.values.T.contiguous().T)
    with pytest.raises(ValueError, match=r"qa.values is not contiguous along K.*K-major.*\.contiguous\(\)"):
        fp8_matmul(column_major, qw)


def test_refuses_what_is_not_quantized():
    _, qw = quantized(8, 16, 32, seed=1)
    with pytest.raises(TypeError, match="must be a course_lib.fp8.Quantized"):
        fp8_matmul(torch.zeros(8, 32), qw)


# ---- on a GPU ---------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_promoting_once_per_k_slice_keeps_long_sums_accurate_on_hopper():
    """Positive data (sums that grow with K) at K = 4096: with Hopper's narrow FP8 accumulator over
    the whole of K (fast accumulation) cuBLAS errs by 7.5e-2 (experiments/JOURNAL.md); promoting
    into fp32 once per BLOCK_K slice leaves only the bf16 rounding."""
    if backend.get().capability != (9, 0):
        pytest.skip("the narrow FP8 accumulator is Hopper's (wgmma); other GPUs accumulate FP8 in fp32")
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(256, 4096, generator=gen, device="cuda")
    w = torch.rand(256, 4096, generator=gen, device="cuda")
    qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
    ref = exact(qa, qw)
    promoted = relative_error(fp8_matmul(qa, qw), ref)
    fast = relative_error(fp8_matmul(qa, qw, dataclasses.replace(fp8_config(256, 256, 4096), fast_accumulation=True)), ref)
    assert promoted < TOLERANCE < 1e-2 < fast, (promoted, fast)


@pytest.mark.gpu
def test_large_shapes_on_the_gpu():
    for shape in [(64, 14336, 4096), (1000, 1008, 520), (4096, 4096, 4096)]:
        qa, qw = quantized(*shape, seed=1)
        with guarded():
            c = fp8_matmul(qa, qw)
        assert not torch.isnan(c).any()
        # K up to 4096: the fp32 sums' error stays ~sqrt(K) 2^-24, far below the rounding
        assert relative_error(c, exact(qa, qw)) < TOLERANCE, shape
