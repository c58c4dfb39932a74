"""Stage 7 (tc_7_fp8, course_lib/csrc/tc_7_fp8.cu): its refusals on any machine, what nvcc makes of
it for sm_90a where nvcc is installed, and - on a Hopper GPU - correctness against the float64
product of the dequantized operands for every scaling it takes."""

import pytest
import torch

from course_lib import backend, compiler, correctness, fp8
from course_lib.kernels import tensor_cores as tc

SHAPES = tc.FP8_SHAPES  # shapes the stage takes that cut its tiles and the K blocks


# ---- refusals (any machine) ---------------------------------------------------------------------
@pytest.mark.parametrize("M, N, K", [(37, 72, 200), (8, 12, 32)])
def test_refuses_shapes_tma_cannot_copy_naming_the_rule(M, N, K):
    qa, qw = fp8.fp8_inputs(M, N, K, "tensor", seed=0)
    with pytest.raises(ValueError, match=r"tc_7_fp8: N = .* K must be a multiple of 16 .* N of 8"):
        tc.tc_7_fp8(qa, qw)


def test_refuses_column_scales_and_mixed_blocks():
    a, w = torch.randn(16, 256), torch.randn(32, 256)
    qa, qw = fp8.quantize(a, "e4m3", "block", (1, 128)), fp8.quantize(w, "e4m3", "row")
    with pytest.raises(ValueError,
                       match=r"tc_7_fp8: qa has one scale per 1 x 128 block.*tc_7_fp8 \(both operands in blocks\)"):
        tc.tc_7_fp8(qa, qw)
    with pytest.raises(ValueError, match="qw has one scale per 32 x 1 block"):
        tc.tc_7_fp8(fp8.quantize(a, "e4m3", "row"), fp8.quantize(w, "e4m3", "column"))


def test_refuses_fast_accumulation_with_block_scales():
    qa, qw = fp8.fp8_inputs(16, 16, 256, "block", seed=0)
    with pytest.raises(ValueError, match="block scales change every 128 of K.*per tensor or per row"):
        tc.tc_7_fp8(qa, qw, fast_accumulation=True)


@pytest.mark.skipif(backend.get().is_gpu, reason="checks the CPU backend's refusal")
def test_cpu_backend_refuses_with_a_clear_error():
    qa, qw = fp8.fp8_inputs(16, 16, 32, "block", seed=0)
    with pytest.raises(RuntimeError, match="runs only on an NVIDIA GPU"):
        tc.tc_7_fp8(qa, qw)


# ---- what nvcc makes of it (where nvcc is installed) ------------------------------------------------
@pytest.fixture(scope="module")
def compiled():
    if why := compiler.sass_tools_missing():
        pytest.skip(why)
    r = compiler.compile_cubin(tc.CSRC / tc.FP8_STAGE.source, "sm_90a", compiler.NVCC_FLAGS, include_dirs=[tc.CSRC],
                               name=tc.FP8_STAGE.stage)
    return r, tc.sass_mix_by_kernel(r.cubin)


def test_compiles_for_sm90a_without_spills_or_warnings(compiled):
    r, _ = compiled
    # fast accumulation (128 x 256 tiles), promoted per tensor or row, and block scales (128 x 128)
    assert len(r.kernels) == 3, r.ptxas_log
    for k in r.kernels:
        assert k.arch == "sm_90a" and not k.spills, k
    assert r.warnings == (), r.warnings


def test_each_kernel_multiplies_e4m3_on_the_tensor_cores_and_stores_through_tma(compiled):
    """4 FP8 wgmmas (QGMMA, k = 32) per 128-wide slice in each kernel; no bf16 ones; C through
    stmatrix + TMA store."""
    _, mixes = compiled
    sass = compiler.sass(compiled[0].cubin)
    assert sass.count("QGMMA.64x256x32.F32.E4M3.E4M3") == 4 and sass.count("QGMMA.64x128x32.F32.E4M3.E4M3") == 8
    for name, mix in mixes.items():
        assert mix["HGMMA"] == 0 and mix["UTMALDG"] > 0 and mix["STSM"] > 0 and mix["UTMASTG"] > 0, name
        assert mix["USETMAXREG"] > 0 and mix["LDL"] + mix["STL"] == 0, name


# ---- on a Hopper GPU --------------------------------------------------------------------------------
def _hopper():
    if not tc.FP8_STAGE.needs[0].available(backend.get().capability):
        pytest.skip("stage 7 needs Hopper's wgmma (sm_90a)")


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_is_correct_on_the_gpu(scaling):
    _hopper()
    report = correctness.check(tc.tc_7_fp8, "e4m3", SHAPES, scaling=scaling, label="tc_7_fp8")
    assert len(report.results) == len(SHAPES)


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_fast_accumulation_is_correct_on_the_gpu(scaling):
    """Normal data: sums that cancel, within the tolerance even in the tensor core's accumulator."""
    _hopper()
    correctness.check(lambda qa, qw: tc.tc_7_fp8(qa, qw, fast_accumulation=True), "e4m3",
                      SHAPES, scaling=scaling, label="tc_7_fp8 fast")


@pytest.mark.gpu
def test_promotion_keeps_long_positive_sums_accurate_on_hopper():
    """Uniform data on [0, 1] (sums that grow with K) at K = 4096: left in Hopper's FP8 accumulator
    the sum errs by about 7e-2 (cuBLAS's and the Triton kernel's fast accumulation, JOURNAL); promoted
    every 128 of K only the bf16 rounding is left."""
    _hopper()
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, w = torch.rand(256, 4096, generator=gen, device="cuda"), torch.rand(256, 4096, generator=gen, device="cuda")
    qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
    ref = qa.dequantize() @ qw.dequantize().t()
    promoted = correctness.relative_error(tc.tc_7_fp8(qa, qw).double(), ref)
    fast = correctness.relative_error(tc.tc_7_fp8(qa, qw, fast_accumulation=True).double(), ref)
    assert promoted < correctness.tolerance("e4m3", 4096) < 1e-2 < fast, (promoted, fast)


@pytest.mark.gpu
def test_one_operand_per_tensor_and_the_other_per_row_on_the_gpu():
    """The launcher repeats a per-tensor scale per row when the other operand has per-row scales."""
    _hopper()
    for M, N, K in ((37, 72, 208), (300, 1000, 528)):
        a, w = torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")
        for sa, sw in (("tensor", "row"), ("row", "tensor")):
            qa, qw = fp8.quantize(a, "e4m3", sa), fp8.quantize(w, "e4m3", sw)
            ref = qa.dequantize() @ qw.dequantize().t()
            c = tc.tc_7_fp8(qa, qw)
            assert correctness.relative_error(c.double(), ref) < correctness.tolerance("e4m3", K), (M, N, K, sa, sw)


@pytest.mark.gpu
@pytest.mark.parametrize("max_ctas", [2, 6])
def test_a_small_grid_walks_every_tile_on_the_gpu(max_ctas):
    """One or three clusters walk all the tiles, each stored during the next tile's first slices."""
    _hopper()
    for scaling in ("tensor", "block"):
        correctness.check(lambda qa, qw: tc.tc_7_fp8(qa, qw, max_ctas=max_ctas), "e4m3",
                          [(300, 1000, 528), (1000, 1032, 1024)], scaling=scaling, label="tc_7_fp8")
