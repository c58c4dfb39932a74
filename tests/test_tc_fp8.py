"""Stage 7 (tc_7_fp8, course_lib/csrc/tc_7_fp8.cu, and its decode path tc_7_decode.cuh): its
refusals on any machine, what nvcc makes of it for sm_90a where nvcc is installed, and - on a Hopper
GPU - correctness against the float64 product of the dequantized operands for every scaling it takes,
on each schedule (whole tiles; the operands swapped for decode, with K split into ranges and not)."""

import collections
import re
import subprocess

import pytest
import torch

from course_lib import backend, compiler, correctness, fp8
from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.tensor_cores import csrc

SHAPES = tc.FP8_SHAPES  # shapes the stage takes that cut its tiles and the K blocks
# tc_launch.h's schedules, by name (stage 7 takes AUTO, WHOLE_TILES and SWAPPED).
SCHEDULE = {name: tc.csrc.constant("tc_launch.h", f"SCHEDULE_{name}") for name in ("AUTO", "WHOLE_TILES", "STREAM_K",
                                                                                   "SWAPPED")}


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


# The kernels of the file by their mangled names: the whole-tile kernel<BN, PROMOTE, BLOCKS> and the
# decode path's decode_kernel<T, PROMOTE, BLOCKS> (compiler.demangle drops bool template arguments).
KERNEL = re.compile(r"_ZN2tc(?:6stage76kernel|13stage7_decode13decode_kernel)ILi(\d+)ELb([01])ELb([01])EE")
WHOLE_TILES = {(256, False, False), (128, True, False), (128, True, True)}  # fast; promoted; block scales
DECODE = {(t, promote, blocks) for t in (16, 32, 64, 96, 128)
          for promote, blocks in ((False, False), (True, False), (True, True))}


def _sass_by_kernel(cubin) -> dict[tuple[str, tuple], str]:
    """("whole" or "decode", (tile, promote, blocks)) -> that kernel's SASS."""
    out = {}
    for part in re.split(r"\n\s*Function : ", compiler.sass(cubin))[1:]:
        m = KERNEL.match(part.split()[0])
        assert m, part.split()[0]
        kind = "decode" if "decode_kernel" in part.split()[0] else "whole"
        out[kind, (int(m.group(1)), m.group(2) == "1", m.group(3) == "1")] = part
    return out


def test_compiles_for_sm90a_without_spills_or_warnings(compiled):
    r, _ = compiled
    # Whole tiles: fast accumulation (128 x 256), promoted per tensor or row, block scales (128 x 128).
    # Decode: the same three for each token tile T = 16, 32, 64, 96, 128.
    names = collections.Counter(k.name for k in r.kernels)
    assert names == {"tc::stage7::kernel": 3, "tc::stage7_decode::decode_kernel": 15}, r.ptxas_log
    for k in r.kernels:
        assert k.arch == "sm_90a" and not k.spills, k
    assert r.warnings == (), r.warnings
    assert set(_sass_by_kernel(r.cubin)) == {("whole", k) for k in WHOLE_TILES} | {("decode", k) for k in DECODE}


def test_each_whole_tile_kernel_multiplies_e4m3_on_the_tensor_cores_and_stores_through_tma(compiled):
    """4 FP8 wgmmas (QGMMA, k = 32) per 128-wide slice in each kernel, 64 x its tile width; no bf16
    ones; C through stmatrix + TMA store."""
    for (kind, (bn, promote, blocks)), sass in _sass_by_kernel(compiled[0].cubin).items():
        if kind != "whole":
            continue
        mix = collections.Counter(compiler.SASS_LINE.findall(sass))
        # promoted: a group of PROMOTE_GROUP slices, and two one-at-a-time loops (before and after the groups)
        batches = csrc.constant(tc.CSRC / "tc_7_fp8.cu", "PROMOTE_GROUP") + 2 if promote else 1
        assert collections.Counter(re.findall(r"QGMMA\.(64x\d+x32)\.F32\.E4M3\.E4M3", sass)) == {f"64x{bn}x32": 4 * batches}
        key = (bn, promote, blocks)
        assert mix["HGMMA"] == 0 and mix["UTMALDG"] > 0 and mix["STSM"] > 0 and mix["UTMASTG"] > 0, key
        assert mix["USETMAXREG"] > 0 and mix["LDL"] + mix["STL"] == 0, key


@pytest.mark.parametrize("kernel, most", [((128, True, False), 64 + 50), ((128, True, True), 64 + 70),
                                          ((256, False, False), 68)])
def test_a_slice_of_the_mainloop_runs_few_instructions_besides_the_promotion(compiled, kernel, most):
    """Every instruction of the promoting loop runs 32 times a tile (tc_7_fp8.cu's header): per slice
    4 QGMMAs, the promotion's 64 FADD (per tensor or row) or FFMA (block scales) and the ring's
    bookkeeping, which nvcc 13.0 compiles to 61 and 70 instructions (fast accumulation: 63 in all).
    Rebuilding the shared-memory window's base (S2UR SR_CgaCtaId) or moving descriptors into uniform
    registers (R2UR) inside the slice cost 39-52 more; neither may come back."""
    path = tc.mainloop_slice_path(_sass_by_kernel(compiled[0].cubin)["whole", kernel])
    assert sum("QGMMA" in text for text in path) == 4
    assert not [text for text in path if "SR_CgaCtaId" in text or text.startswith("R2UR")], path
    assert len(path) <= most, f"{len(path)} instructions per slice:\n" + "\n".join(path)


@pytest.mark.parametrize("kernel, most", [((128, True, False), 64 + 46), ((128, True, True), 64 + 55)])
def test_a_group_of_promoted_slices_keeps_one_batch_running_while_it_promotes(compiled, kernel, most):
    """The promoting kernels' groups (tc_fp8.cuh, promoted_sum_overlapped): per slice of a group 4
    QGMMAs that wait only as a batch (one gsb0 each: ptxas did not serialise them, C7514), a wait
    that leaves the next batch running (DEPBAR.LE gsb0, 0x1) before every promotion but the group's
    last, and few instructions besides the promotion's 64 (nvcc 13.0: 44 per tensor, 53 with block
    scales)."""
    group = csrc.constant(tc.CSRC / "tc_7_fp8.cu", "PROMOTE_GROUP")
    path = tc.mainloop_slice_path(_sass_by_kernel(compiled[0].cubin)["whole", kernel], wgmmas=4 * group)
    mmas = [text for text in path if "QGMMA" in text]
    assert len(mmas) == 4 * group and sum("gsb0" in text for text in mmas) == group, mmas
    waits = [text.split()[-1] for text in path if "WARPGROUP.DEPBAR" in text]
    assert waits == ["0x1"] * (group - 1) + ["0x0"], waits
    assert not [text for text in path if "SR_CgaCtaId" in text or text.startswith("R2UR")], path
    assert len(path) <= group * most, f"{len(path)} instructions per group of {group} slices"


def test_each_decode_kernel_swaps_the_operands_and_stores_element_by_element(compiled):
    """The decode path: per 128-wide slice 4 FP8 wgmmas of 64 rows of W x T tokens (QGMMA.64xTx32),
    fed by TMA loads; no register reallocation (one consumer warpgroup); K split by one atomic add on
    the tile's counter; C written with ordinary global stores (no stmatrix, no TMA store)."""
    for (kind, key), sass in _sass_by_kernel(compiled[0].cubin).items():
        if kind != "decode":
            continue
        mix = collections.Counter(compiler.SASS_LINE.findall(sass))
        assert collections.Counter(re.findall(r"QGMMA\.(64x\d+x32)\.F32\.E4M3\.E4M3", sass)) == {f"64x{key[0]}x32": 4}
        assert mix["HGMMA"] == 0 and mix["UTMALDG"] > 0 and mix["USETMAXREG"] == 0, key
        assert mix["UTMASTG"] == 0 and mix["STSM"] == 0 and mix["STG"] > 0 and mix["LDL"] + mix["STL"] == 0, key
        assert "ATOMG.E.ADD" in sass, key
    source = (tc.CSRC / "tc_7_decode.cuh").read_text()
    assert "wgmma_fp8_swapped<T>(acc, kmajor_descriptor(s.w[slot], k32), kmajor_descriptor(s.a[slot], k32)" in source


# ---- the decode schedule's rule, for the shapes the GPU tests below name (where nvcc is installed) ----
# M x N x K: the schedule each takes by the shape, and whether K is split into ranges on a GPU of 132
# SMs holding one, two or three of its CTAs each (tc_decode.cuh: use_swapped, decode_ranges).
TOKEN_TILES = (16, 32, 64, 96, 128)
RESIDENT = (132, 2 * 132, 3 * 132)
DECODE_SPLIT = [(1, 4096, 4096), (7, 1000, 1040), (16, 2048, 7168), (90, 1000, 1040), (100, 264, 1536),
                (128, 4096, 4096)]
DECODE_WHOLE_K = [(7, 8, 16), (33, 136, 208), (64, 14336, 512)]
# Forced: token tiles of 128, the last partial; K split, and not.
SWAPPED_BEYOND_DECODE = [(300, 1000, 1040), (130, 264, 208)]
LONG_SUMS = {"split": (16, 2048, 4096), "whole K": (16, 25600, 4096)}  # 400 column tiles fill the GPU


def _decode_tiles(M, N):
    tokens = next((t for t in TOKEN_TILES if M <= t), TOKEN_TILES[-1])
    return -(-N // 64) * -(-M // tokens)


def test_the_gpu_tests_shapes_take_the_schedule_they_are_named_for(tmp_path):
    nvcc = compiler.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)")
    lines = ['#include "tc_decode.cuh"']
    splits = DECODE_SPLIT + [LONG_SUMS["split"]]
    for M, N, K in splits + DECODE_WHOLE_K + [LONG_SUMS["whole K"]]:
        lines.append(f'static_assert(tc::use_swapped({M}), "{M} x {N} x {K} is a decode shape");')
        for resident in RESIDENT:
            split = f"tc::decode_ranges({_decode_tiles(M, N)}, {-(-K // 128)}, {resident})"
            want = "> 1" if (M, N, K) in splits else "== 1"
            lines.append(f'static_assert({split} {want}, "{M} x {N} x {K}, {resident} CTAs at once: ranges {want}");')
    for (M, N, K), want in zip(SWAPPED_BEYOND_DECODE, ("> 1", "== 1")):
        lines.append(f'static_assert(!tc::use_swapped({M}), "{M} x {N} x {K} takes whole tiles by the shape");')
        for resident in RESIDENT:
            split = f"tc::decode_ranges({_decode_tiles(M, N)}, {-(-K // 128)}, {resident})"
            lines.append(f'static_assert({split} {want}, "{M} x {N} x {K} swapped, {resident} CTAs: ranges {want}");')
    lines.append('static_assert(!tc::use_swapped(129) && tc::use_swapped(128), "swapped for M <= 128");')
    source = tmp_path / "decode_rule.cu"
    source.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([str(nvcc), *compiler.NVCC_FLAGS, compiler.SM90A, "-I", str(tc.CSRC), "-cuda", "-o",
                           str(tmp_path / "decode_rule.ii"), str(source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]


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
@pytest.mark.parametrize("scaling", ["tensor", "block"])
def test_the_promoted_groups_are_correct_behind_the_last_tiles_stores_on_the_gpu(scaling):
    """One cluster (max_ctas=2), so each CTA computes several tiles and stores each during the next
    one's first slices; 11 K slices (the last partial), so a first tile runs two groups of the
    overlapped promotion and three slices left over, a later tile four slices one at a time, one
    group and three left over (tc_fp8.cuh, promoted_sum_overlapped)."""
    _hopper()
    correctness.check(lambda qa, qw: tc.tc_7_fp8(qa, qw, max_ctas=2), "e4m3", [(300, 1000, 1296), (129, 264, 1040)],
                      scaling=scaling, label="tc_7_fp8 one cluster")


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


@pytest.mark.parametrize("scales", [("tensor", "tensor"), ("row", "row"), ("tensor", "row"), ("row", "tensor"),
                                    ("block", "block"), ("row float64", "row")])
def test_the_kernel_gets_each_scale_where_it_reads_it(monkeypatch, scales):
    """The launcher's scales as the kernel reads them (flat fp32: one, one per row, or A's 1 x 128 and W's
    128 x 128 blocks row by row), whatever the operands' scales look like; scales already laid out so
    are passed as they are (no view, no copy: host time per call). Run on the CPU with the GPU
    feature check skipped (on the GPU backend with the operands on the GPU); the kernel's own GPU
    tests hold what it does with them."""
    from course_lib import backend
    from course_lib.kernels.tensor_cores import stages

    monkeypatch.setattr(stages.features, "why_not_here", lambda *args, **kwargs: None)
    M, N, K = 37, 264, 528
    device = backend.get().torch_device
    a, w = torch.randn(M, K, device=device), torch.randn(N, K, device=device)
    blocks = scales[1] == "block"
    qa = fp8.quantize(a, "e4m3", scales[0].split()[0], block=fp8.BLOCK_SCALES[0] if blocks else None)
    qw = fp8.quantize(w, "e4m3", scales[1], block=fp8.BLOCK_SCALES[1] if blocks else None)
    if scales[0].endswith("float64"):
        qa = fp8.Quantized(qa.values, qa.scales.double(), qa.block, qa.fmt)
    plan = stages._tc_7_fp8_plan(qa, qw, False)
    _, _, sa, sw, c, code, _ = stages._tc_7_fp8_launch_arguments(plan, qa, qw, False)
    scaling = "block" if "block" in scales else "row" if any(s.startswith("row") for s in scales) else "tensor"
    assert code == stages.FP8_SCALING_CODE[scaling] and c.shape == (M, N) and c.dtype == torch.bfloat16
    for q, got, rows in ((qa, sa, M), (qw, sw, N)):
        want = q.scales.reshape(-1).double()
        if scaling == "row" and want.numel() == 1:
            want = want.expand(rows)
        assert got.dtype == torch.float32 and got.is_contiguous()
        assert torch.equal(got.reshape(-1).double(), want.float().double()), (scales, q.scales.shape)
        as_given = q.scales.dtype == torch.float32 and (scaling != "row" or q.scales.numel() == rows)
        assert (got is q.scales) == as_given, (scales, q.scales.shape)


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
def test_a_second_call_takes_the_plan_and_still_refuses_what_the_first_refused():
    """The checks run once per kind of operands; the plan's launch computes each call's own product,
    and operands of another kind (a format, a layout, a scaling) are checked afresh."""
    _hopper()
    tc.tc_7_fp8.plans.clear()
    for seed in (1, 2, 3):
        qa, qw = fp8.fp8_inputs(300, 1000, 528, "row", seed=seed)
        ref = qa.dequantize() @ qw.dequantize().t()
        c = tc.tc_7_fp8(qa, qw)
        assert correctness.relative_error(c.double(), ref) < correctness.tolerance("e4m3", 528)
        assert len(tc.tc_7_fp8.plans) == 1
    w = torch.randn(1000, 528, device="cuda")
    for bad in (fp8.quantize(w, "e5m2", "row"), fp8.quantize(w[:, :520], "e4m3", "row")):
        with pytest.raises(ValueError):
            tc.tc_7_fp8(qa, bad)
    qa_t, qw_t = fp8.fp8_inputs(300, 1000, 528, "tensor", seed=4)
    tc.tc_7_fp8(qa_t, qw_t)
    assert len(tc.tc_7_fp8.plans) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("max_ctas", [2, 6])
def test_a_small_grid_walks_every_tile_on_the_gpu(max_ctas):
    """One or three clusters walk all the tiles, each stored during the next tile's first slices."""
    _hopper()
    for scaling in ("tensor", "block"):
        correctness.check(lambda qa, qw: tc.tc_7_fp8(qa, qw, max_ctas=max_ctas), "e4m3",
                          [(300, 1000, 528), (1000, 1032, 1024)], scaling=scaling, label="tc_7_fp8")


# ---- the decode path on a Hopper GPU (schedules forced through the extension's `schedule`) ----------
def _tc7(schedule: str, fast_accumulation: bool = False):
    """tc_7_fp8 with its schedule forced (tc_launch.h); the wrapper's checks and arguments as called."""
    def call(qa, qw):
        args = tc.tc_7_fp8_arguments(qa, qw, fast_accumulation)
        tc.extension().tc_7_fp8(*args, 8, backend.sm_count(), SCHEDULE[schedule])
        return args[4]
    return call


DECODE_SHAPES = DECODE_SPLIT + DECODE_WHOLE_K


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_decode_is_correct_on_the_gpu(scaling):
    """M = 1 - 128 as called (the operands swapped by the shape): tokens past M in every token tile
    (7 of 16, 33 of 64, 90 of 96, 100 of 128), N not a multiple of 64 (1000, 136, 264, 8), K ending in a partial
    slice (1040, 208, 16), K split into ranges and not."""
    _hopper()
    report = correctness.check(tc.tc_7_fp8, "e4m3", DECODE_SHAPES, scaling=scaling, label="tc_7_fp8 decode")
    assert len(report.results) == len(DECODE_SHAPES)


@pytest.mark.gpu
@pytest.mark.parametrize("scaling", ["tensor", "row"])
def test_decode_fast_accumulation_is_correct_on_the_gpu(scaling):
    _hopper()
    correctness.check(lambda qa, qw: tc.tc_7_fp8(qa, qw, fast_accumulation=True), "e4m3", DECODE_SHAPES,
                      scaling=scaling, label="tc_7_fp8 decode fast")


@pytest.mark.gpu
@pytest.mark.parametrize("fast", [False, True], ids=["promoted", "fast"])
@pytest.mark.parametrize("scaling", ["tensor", "row", "block"])
def test_each_schedule_forced_is_correct_on_the_gpu(scaling, fast):
    """The swapped schedule forced where the shape would take whole tiles (M = 130, 300: token tiles of
    128, the last partial; split and not), and whole tiles forced at decode shapes."""
    if fast and scaling == "block":
        pytest.skip("block scales are always promoted")
    _hopper()
    label = f"tc_7_fp8 {scaling}{' fast' if fast else ''}"
    correctness.check(_tc7("SWAPPED", fast), "e4m3", SWAPPED_BEYOND_DECODE + [(1, 4096, 4096), (33, 136, 208)],
                      scaling=scaling, label=f"{label} swapped forced")
    correctness.check(_tc7("WHOLE_TILES", fast), "e4m3", [(1, 4096, 4096), (33, 136, 208), (100, 264, 1536)],
                      scaling=scaling, label=f"{label} whole tiles forced")


@pytest.mark.gpu
def test_decode_promotion_keeps_long_positive_sums_accurate_on_hopper():
    """As the whole-tile test above, at decode (M = 16, K = 4096): promoted, with K split into ranges
    and not, only bf16's rounding is left; fast accumulation over all of K (no split: 400 column tiles
    fill the GPU) errs as Hopper's FP8 accumulator does."""
    _hopper()
    gen = torch.Generator(device="cuda").manual_seed(0)
    for how, (M, N, K) in LONG_SUMS.items():
        a, w = torch.rand(M, K, generator=gen, device="cuda"), torch.rand(N, K, generator=gen, device="cuda")
        qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
        ref = qa.dequantize() @ qw.dequantize().t()
        promoted = correctness.relative_error(tc.tc_7_fp8(qa, qw).double(), ref)
        assert promoted < correctness.tolerance("e4m3", K) < 1e-2, (how, promoted)
        if how == "whole K":
            fast = correctness.relative_error(tc.tc_7_fp8(qa, qw, fast_accumulation=True).double(), ref)
            assert fast > 1e-2, (how, fast)


@pytest.mark.gpu
def test_a_schedule_stage_7_does_not_have_is_refused_on_the_gpu():
    _hopper()
    qa, qw = fp8.fp8_inputs(16, 64, 128, "tensor", seed=0, device="cuda")
    args = tc.tc_7_fp8_arguments(qa, qw)
    with pytest.raises(RuntimeError, match="stage 7 has no stream-K"):
        tc.extension().tc_7_fp8(*args, 8, backend.sm_count(), SCHEDULE["STREAM_K"])
