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
from course_lib.kernels.coalescing_and_triton import fast_fp8
from course_lib.kernels.coalescing_and_triton.fast_fp8 import Fp8Config, fp8_config, fp8_matmul
from course_lib.kernels.coalescing_and_triton.fast_fp8_configs import (
    BLOCKSCALED_CONFIGS,
    SCALES_CONFIGS,
    SHAPE_CLASSES,
    fp8_blockscaled_config,
    shape_class,
)
from fake_compiled import FakeCompiled, launched_as_on_a_gpu

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


@pytest.fixture(autouse=True)
def fresh_plans():
    """Every test starts without the wrappers' launch plans (some replace a kernel, which a plan from
    an earlier test would bypass) and leaves none behind."""
    wrappers = (fast_fp8.fp8_matmul, fast_fp8.fp8_matmul_blockscaled, fast_fp8.triton_fp8)
    for w in wrappers:
        w.plans.clear()
    yield
    for w in wrappers:
        w.plans.clear()


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
    """A stand-in for a Triton kernel that notes its name (or its arguments) at every launch and
    launches it."""

    def __init__(self, kernel, name, log, arguments=False):
        self.kernel, self.name, self.log, self.arguments = kernel, name, log, arguments

    def __getattr__(self, attribute):  # arg_names and the rest, which a plan's launch reads on a GPU
        return getattr(self.kernel, attribute)

    def __getitem__(self, grid):
        if not self.arguments:
            self.log.append(self.name)
            return self.kernel[grid]

        def launch(*args, **meta):
            self.log.append(args)
            return self.kernel[grid](*args, **meta)

        return launch


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


def test_the_shape_classes():
    assert shape_class(64, 14336, 4096, sms=132) == "decode" and shape_class(65, 14336, 4096, sms=132) == "few_tiles"
    assert shape_class(8192, 2304, 768, sms=132) == "short_k" and shape_class(8192, 2304, 1040, sms=132) == "large"
    # 4 x 32 = 128 tiles of 256 x 128: fewer than 132 SMs, a wave on 114 (an H100 PCIe)
    assert shape_class(1024, 4096, 4096, sms=132) == "few_tiles" and shape_class(1024, 4096, 4096, sms=114) == "large"
    assert set(SCALES_CONFIGS) == set(BLOCKSCALED_CONFIGS) == set(SHAPE_CLASSES)


def test_the_block_scaled_default_keeps_its_two_accumulators_in_registers():
    """The block-scaled kernels hold two fp32 tiles per thread (each slice's sum and the total): at
    more than 64 elements of each per thread ptxas spills (256 x 128 on 8 warps: 128, once the per-tensor
    kernel's large tile, which ran at 17-29 % of cuBLAS block-scaled). No class's configuration may
    be that; at the large shapes it is 128 x 128 x 128 on 8 warps (64 of each per thread), walking
    the tiles one program per SM, the configuration the sweep with persistent candidates found best."""
    for cls, cfg in BLOCKSCALED_CONFIGS.items():
        assert cfg.block_k == 128 and cfg.block_m * cfg.block_n // (32 * cfg.num_warps) <= 64, (cls, cfg)
    for shape in [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (2048, 3584, 18944)]:
        cfg = fp8_blockscaled_config(*shape, sms=132)
        assert (cfg.block_m, cfg.block_n, cfg.block_k, cfg.num_warps) == (128, 128, 128, 8), shape
        assert cfg.descriptors and cfg.persistent, shape
    assert fp8_blockscaled_config(16, 4096, 4096, sms=132).block_k == 128  # never cut to K: the blocks' length


def test_the_config_rule_and_its_checks():
    small, short, large = fp8_config(16, 4096, 4096), fp8_config(2048, 2304, 768), fp8_config(4096, 4096, 4096)
    assert (small.block_m, small.block_n, small.block_k) == (64, 32, 128)
    assert (short.block_m, short.block_n, short.block_k) == (64, 64, 128)
    # one warpgroup and 3 stages: two programs share an SM (the second's wgmmas run while one promotes)
    assert (large.block_m, large.block_n, large.block_k, large.num_warps, large.num_stages, large.descriptors) \
        == (128, 128, 128, 4, 3, True)
    assert fp8_config(1024, 4096, 4096).num_warps == 8  # 4 x 32 = 128 big tiles: less than a wave of 132
    assert fp8_config(1024, 4096, 4096, sms=114) == large  # a wave on a GPU of 114 SMs (an H100 PCIe)
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


@pytest.mark.parametrize("blocks", [False, True], ids=["per row", "blocks"])
def test_a_gpu_with_less_shared_memory_gets_the_rule_s_tile_with_fewer_stages(monkeypatch, blocks):
    """The rule's configurations were measured on Hopper (227 KB of shared memory a block); on a GPU
    with 99 KB Triton refuses their pipelines (OutOfResources, before anything runs). Played here by a
    plan that refuses more than 2 stages: the default call then takes 2 stages of the same tile and
    computes C; a configuration the caller gave is not changed behind their back."""
    import triton

    real, tried = fast_fp8.Fp8Plan, []

    def small_gpu_plan(kernel, qa, qw, c, rest, cfg, *args, **kw):
        tried.append(cfg.num_stages)
        if cfg.num_stages > 2:
            raise triton.runtime.errors.OutOfResources(cfg.num_stages * 32768, 101376, "shared memory")
        return real(kernel, qa, qw, c, rest, cfg, *args, **kw)

    monkeypatch.setattr(fast_fp8, "Fp8Plan", small_gpu_plan)
    M, N, K = 72, 136, 384
    if blocks:
        a, w = operands(M, N, K, seed=5)
        qa, qw = fp8.quantize(a, "e4m3", "block", (1, 128)), fp8.quantize(w, "e4m3", "block", (128, 128))
        call, rule = fast_fp8.fp8_matmul_blockscaled, fp8_blockscaled_config(M, N, K)
    else:
        qa, qw = quantized(M, N, K, seed=5)
        call, rule = fp8_matmul, fp8_config(M, N, K)
    with guarded():
        c = call(qa, qw)
    assert tried == list(range(rule.num_stages, 1, -1)) and rule.num_stages > 2
    assert not torch.isnan(c).any() and relative_error(c, exact(qa, qw)) < TOLERANCE
    tried.clear()
    call(qa, qw)
    assert tried == []  # the fitted plan is kept: the next call launches it without trying again
    with pytest.raises(triton.runtime.errors.OutOfResources):
        call(qa, qw, config=dataclasses.replace(rule, num_stages=3))
    assert tried == [3]


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


@pytest.mark.parametrize("config", [None, Fp8Config(32, 64, 128, group_m=2), Fp8Config(16, 256, 128),
                                    Fp8Config(32, 64, 128, group_m=2, descriptors=True),
                                    Fp8Config(16, 256, 128, descriptors=True)], ids=lambda c: c and c.label)
def test_the_block_scaled_kernel_passes_check(config):
    """DeepSeek-V3's scales: A per 1 x 128, W per 128 x 128, applied to each K-slice's sum; shapes
    that cut the blocks (K = 257, N = 129) and the tiles. Tiles at most 128 wide read one scale of W
    per slice, 256-wide ones a scale per column; with descriptors, the TMA kernel where every row is a
    multiple of 16 bytes (N = 8, 300) and the pointer kernel where C's is not (N = 129)."""
    from course_lib.kernels.coalescing_and_triton.fast_fp8 import fp8_matmul_blockscaled

    correctness.check(lambda qa, qw: fp8_matmul_blockscaled(qa, qw, config), "e4m3",
                      [(1, 8, 16), (37, 129, 257), (130, 300, 520)], scaling="block")


@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_a_persistent_config_walks_every_tile_and_gives_the_same_bits(scaling):
    """Fp8Config(persistent=True): fewer programs than tiles (on the CPU, CPU_PERSISTENT_PROGRAMS), each
    walking tiles pid, pid + P, ...; every tile once, so C is bit for bit the one-program-per-tile C
    (the same sums per tile), C poisoned first. Shapes that cut the tiles and the K blocks, and one
    with fewer tiles than programs. Without descriptors there is no persistent kernel: refused."""
    from course_lib.kernels.coalescing_and_triton import fast_fp8
    from course_lib.kernels.coalescing_and_triton.fast_configs import persistent_programs

    fn = fast_fp8.fp8_matmul_blockscaled if scaling == "block" else fp8_matmul
    one_each = Fp8Config(32, 64, 128, descriptors=True)
    walking = dataclasses.replace(one_each, persistent=True)
    programs = persistent_programs()
    # On the GPU (one program per SM) the first shape has more tiles than programs as the CPU's do.
    for M, N, K in ((96, 64 * programs + 8, 384), (150, 200, 384), (40, 64, 256)):
        qa, qw = fp8.fp8_inputs(M, N, K, scaling, seed=M)
        with guarded():
            expected = fn(qa, qw, one_each)
            got = fn(qa, qw, walking)
        plan = fn.plans.get(fp8.fp8_plan_key(qa, qw, walking))
        tiles = -(-M // 32) * -(-N // 64)
        assert plan.kernel.grid == (min(tiles, programs),) and plan.kernel.meta["PERSISTENT"]
        assert torch.equal(got, expected), f"{M} x {N} x {K}"
        assert relative_error(got, exact(qa, qw)) < TOLERANCE
    correctness.check(lambda a, w: fn(a, w, walking), "e4m3", [(37, 136, 264)], scaling=scaling)
    with pytest.raises(ValueError, match="persistent=True needs descriptors=True"):
        Fp8Config(32, 64, 128, persistent=True)


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


# ---- launch plans: checked and decided once per key, then only launched -----------------------------
def _counting(monkeypatch, name: str) -> list:
    """Calls of fast_fp8's ``name`` (the one check every checked path runs first), noted."""
    calls, real = [], getattr(fast_fp8, name)

    def counted(*args, **kwargs):
        calls.append(args[2] if len(args) > 2 else kwargs.get("stage"))
        return real(*args, **kwargs)

    monkeypatch.setattr(fast_fp8, name, counted)
    return calls


def _fresh(q: fp8.Quantized, seed: int) -> fp8.Quantized:
    """Other values and scales, of the same dtype, shape, strides and alignment: a later call's operand."""
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(q.values.shape, generator=gen).clamp(-400, 400).to(q.values.dtype).to(DEVICE)
    scales = (torch.rand(q.scales.shape, generator=gen) + 0.5).to(q.scales.dtype).to(DEVICE)
    return dataclasses.replace(q, values=values, scales=scales)


WRAPPERS = {  # name: (wrapper, scaling)
    "fp8_matmul tensor": (fast_fp8.fp8_matmul, "tensor"),
    "fp8_matmul row": (fast_fp8.fp8_matmul, "row"),
    "fp8_matmul_blockscaled": (fast_fp8.fp8_matmul_blockscaled, "block"),
    "triton_fp8 tensor": (fast_fp8.triton_fp8, "tensor"),
    "triton_fp8 row": (fast_fp8.triton_fp8, "row"),
    "triton_fp8 block": (fast_fp8.triton_fp8, "block"),
}


@pytest.mark.parametrize("name", WRAPPERS)
def test_each_wrapper_checks_and_decides_once_per_key(monkeypatch, name):
    """The second call with operands of the first's key (other values and scales) takes the plan: no
    check, no choice, no new plan - and its C is the product of its own operands."""
    fn, scaling = WRAPPERS[name]
    checks = _counting(monkeypatch, "check_gemm_operands")
    plans = []
    real_plan = fast_fp8.Fp8Plan
    monkeypatch.setattr(fast_fp8, "Fp8Plan", lambda *a, **k: plans.append(a[0].fn.__name__) or real_plan(*a, **k))
    qa, qw = fp8.fp8_inputs(37, 136, 272, scaling, seed=1)
    first = fn(qa, qw)
    qa2, qw2 = _fresh(qa, 2), _fresh(qw, 3)
    assert fast_fp8.fp8_plan_key(qa2, qw2) == fast_fp8.fp8_plan_key(qa, qw)
    second = fn(qa2, qw2)
    assert len(checks) == 1 and len(plans) == 1 and len(fn.plans) == 1
    assert plans == ["fp8_blockscaled_kernel" if scaling == "block" else "fp8_matmul_kernel"]
    assert relative_error(first, exact(qa, qw)) < TOLERANCE and relative_error(second, exact(qa2, qw2)) < TOLERANCE
    assert not torch.equal(first, second)


def test_another_key_makes_another_plan(monkeypatch):
    """Shape, scaling, the scales' dtype and layout, the values' alignment and the configuration are
    each part of the key: each makes a plan of its own, and each computes its own operands' product."""
    checks = _counting(monkeypatch, "check_gemm_operands")
    qa, qw = quantized(37, 72, 200, seed=5)
    fp8_matmul(qa, qw)
    moved = torch.empty(qa.values.numel() + 1, dtype=torch.uint8, device=DEVICE)[1:].view(torch.float8_e4m3fn)
    moved.copy_(qa.values.reshape(-1))
    variants = [
        quantized(38, 72, 200, seed=5),  # shape
        quantized(37, 72, 200, seed=5, scalings=("tensor", "row")),  # scaling
        (dataclasses.replace(qa, scales=qa.scales.double()), qw),  # the scales' dtype: converted on every call
        (dataclasses.replace(qa, scales=qa.scales.repeat(1, 2)[:, :1]), qw),  # the scales' strides (2, 1)
        (dataclasses.replace(qa, values=moved.view(qa.values.shape)), qw),  # A starts 1 byte into its allocation
    ]
    for x, y in variants:
        assert relative_error(fp8_matmul(x, y), exact(x, y)) < TOLERANCE
        assert relative_error(fp8_matmul(_fresh(x, 7), _fresh(y, 8)), exact(_fresh(x, 7), _fresh(y, 8))) < TOLERANCE
    fp8_matmul(qa, qw, Fp8Config(32, 32, 64))  # the configuration
    assert len(checks) == len(fp8_matmul.plans) == 2 + len(variants)


def test_the_plan_passes_fp32_contiguous_scales_as_they_are(monkeypatch):
    """No copy of scales that are already what the kernel reads; other scales converted on every call."""
    seen = []
    for name in ("fp8_matmul_kernel", "fp8_blockscaled_kernel"):
        monkeypatch.setattr(fast_fp8, name, _Recording(getattr(fast_fp8, name), name, seen, arguments=True))
    for fn, scaling in ((fp8_matmul, "row"), (fast_fp8.fp8_matmul_blockscaled, "block")):
        qa, qw = fp8.fp8_inputs(37, 136, 272, scaling, seed=1)
        for _ in range(2):  # the checked path, then the plan
            fn(qa, qw)
            assert seen[-1][3] is qa.scales and seen[-1][4] is qw.scales
        double = dataclasses.replace(qa, scales=qa.scales.double())
        for _ in range(2):
            c = fn(double, qw)
            assert seen[-1][3].dtype == torch.float32 and seen[-1][3].is_contiguous() and seen[-1][4] is qw.scales
        assert relative_error(c, exact(double, qw)) < TOLERANCE


def test_bad_input_after_a_plan_is_still_refused():
    """Whatever the checked path refuses, a call after a plan was made refuses too, with its message."""
    qa, qw = quantized(8, 16, 32, seed=1)
    fp8_matmul(qa, qw)
    a, w = operands(8, 16, 32, seed=1)
    with pytest.raises(ValueError, match=r"qa is in e5m2 .* e4m3 only"):
        fp8_matmul(fp8.quantize(a, "e5m2", "row"), qw)
    with pytest.raises(ValueError, match=r"qa.values is not contiguous along K"):
        fp8_matmul(dataclasses.replace(qa, values=qa.values.T.contiguous().T), qw)
    with pytest.raises(ValueError, match=r"different devices .*qw.scales on meta"):
        fp8_matmul(qa, dataclasses.replace(qw, scales=qw.scales.to("meta")))
    with pytest.raises(ValueError, match=r"qa.scales has shape \(4, 1\).*need \(8, 1\)"):
        fp8_matmul(dataclasses.replace(qa, scales=qa.scales[:4]), qw)
    with pytest.raises(ValueError, match=r"qa is 8 x 32 and qw is 16 x 16"):
        fp8_matmul(qa, dataclasses.replace(qw, values=qw.values[:, :16].contiguous()))
    with pytest.raises(TypeError, match="must be a course_lib.fp8.Quantized"):
        fp8_matmul(qa.values, qw)
    with pytest.raises(TypeError, match="config must be an Fp8Config"):
        fp8_matmul(qa, qw, {"block_m": 64})
    ba, bw = fp8.fp8_inputs(8, 16, 256, "block", seed=1)
    fast_fp8.triton_fp8(ba, bw)  # triton_fp8's plan for block scales is not fp8_matmul's
    with pytest.raises(ValueError, match=r"one scale per .* block.*fp8_matmul_blockscaled takes those"):
        fp8_matmul(ba, bw)
    assert len(fp8_matmul.plans) == 1 and len(fast_fp8.triton_fp8.plans) == 1


@pytest.mark.skipif(backend.get().is_gpu, reason="plays the GPU's part on the CPU backend")
@pytest.mark.parametrize("scaling, config", [
    ("tensor", Fp8Config(32, 64, 64)), ("row", Fp8Config(32, 64, 64, descriptors=True, fast_accumulation=True)),
    ("block", Fp8Config(32, 64, 128)), ("block", Fp8Config(16, 256, 128, descriptors=True)),
    ("tensor", Fp8Config(32, 64, 64, descriptors=True, persistent=True)),
    ("block", Fp8Config(16, 64, 128, descriptors=True, persistent=True)),
], ids=lambda x: getattr(x, "label", x))
def test_later_launches_go_through_the_compiled_kernel_with_every_parameter_in_order(monkeypatch, scaling, config):
    """Where Triton's JIT returns a compiled kernel (a GPU), the plan launches it directly from the
    second call on (fast_launch.KernelLaunch), with every parameter in the kernel's signature order."""
    launches = launched_as_on_a_gpu(monkeypatch, fast_fp8, ("fp8_matmul_kernel", "fp8_matmul_tma_kernel",
                                                            "fp8_blockscaled_kernel", "fp8_blockscaled_tma_kernel"))
    fn = fast_fp8.fp8_matmul_blockscaled if scaling == "block" else fp8_matmul
    qa, qw = fp8.fp8_inputs(37, 80, 272, scaling, seed=1)
    fn(qa, qw, config)
    for seed in (2, 3):
        x, y = _fresh(qa, seed), _fresh(qw, seed + 10)
        before = FakeCompiled.launches()
        c = fn(x, y, config)
        assert FakeCompiled.launches() == before + 1 and len(launches) == 1  # the compiled kernel, not the JIT
        assert relative_error(c, exact(x, y)) < TOLERANCE


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


def test_the_graph_tests_replay_every_class_the_recorded_gpus_use():
    """tests/test_gpu_graphs_and_streams.py replays the Triton FP8 kernels from CUDA graphs, on two
    streams and under torch.compile; its shapes must reach each class whose configuration differs in
    kind (a persistent walk, two programs an SM), on GPUs of 114 SMs (an H100 PCIe) to 144, the H100
    SXM's and the H200's 132 among them."""
    from test_gpu_graphs_and_streams import FP8_PATH_SHAPES, FP8_SHAPES, TRITON_FP8_LARGE  # noqa: PLC0415

    for sms in (114, 132, 144):
        assert shape_class(*TRITON_FP8_LARGE, sms=sms) == "large", sms
        assert fp8_blockscaled_config(*TRITON_FP8_LARGE, sms=sms).persistent
        assert fp8_config(*TRITON_FP8_LARGE, sms=sms) == SCALES_CONFIGS["large"]
    assert {shape_class(*s, sms=132) for s in FP8_SHAPES} == {"decode", "few_tiles"}
    for name in ("triton fp8 tensor", "triton fp8 row", "triton fp8 block"):
        assert TRITON_FP8_LARGE in FP8_PATH_SHAPES[name], name
