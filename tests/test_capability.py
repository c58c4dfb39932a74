"""Capability gating: what each GPU generation runs, and that a stage a GPU lacks a feature for is
never called - check says so, bench/compare show the recording - on a faked GPU, without one."""

import sys
from pathlib import Path

import pytest
import torch

import course_lib
from course_lib import backend, bench, correctness, dtypes, features, registry, results
from course_lib.bench import recording
from course_lib.kernels import tensor_cores as tc

HOPPER_ONLY = {"tc_2_wgmma_tma", "tc_3_pipeline", "tc_4_warp_specialized", "tc_5_persistent", "tc_6_tma_store"}
TENSOR_CORE_DTYPES = {d for d in dtypes.NAMES if dtypes.get(d).needs}  # what needs Ampere's tensor cores


def runnable(capability, device=None):
    return {(s.name, d) for s in course_lib.stages() for d in s.dtypes
            if s.missing_feature(d, capability, device) is None}


def everything():
    return {(s.name, d) for s in course_lib.stages() for d in s.dtypes}


@pytest.mark.parametrize("capability", [(7, 5), (8, 0), (8, 9), (9, 0), (10, 0), (12, 0)])
def test_each_generation_runs_what_it_has(capability):
    got = runnable(capability)
    expected = set(everything())
    if capability < (8, 0):  # Turing: no bf16 or TF32 tensor cores, so no tensor-core stage at all
        expected -= {(n, d) for n, d in everything() if d in TENSOR_CORE_DTYPES}
    if capability < (8, 9):  # FP8 tensor cores: Ada (8.9) and newer
        expected -= {(n, d) for n, d in everything() if d == "e4m3"}
    if capability[0] != 9:  # wgmma/TMA/setmaxnreg code is for sm_90a: Hopper only
        expected -= {(n, "bf16") for n in HOPPER_ONLY} | {("tc_7_fp8", "e4m3")}
    assert got == expected
    # the numba stages (fp32 on CUDA cores) run on every GPU the course supports
    assert {("naive", "fp32"), ("register_tiling", "fp32"), ("triton_fast", "fp16")} <= got
    assert (("tc_1_mma_sync", "bf16") in got) == (capability >= (8, 0))


def test_older_gpus_than_cuda_13_supports_run_nothing():
    assert runnable((7, 0)) == set()


def test_sm90a_code_needs_a_real_hopper():
    # Treated as 9.0, a Blackwell GPU still cannot run code built for sm_90a.
    assert ("tc_6_tma_store", "bf16") not in runnable((9, 0), device=(10, 0))
    assert ("tc_6_tma_store", "bf16") in runnable((9, 0), device=(9, 0))
    # A Hopper treated as Ampere runs what Ampere runs.
    assert runnable((8, 0), device=(9, 0)) == runnable((8, 0))


def test_assumed_capability_is_parsed_and_only_lowers():
    assert backend.assumed_capability((9, 0), None) == (9, 0)
    assert backend.assumed_capability((9, 0), "8.0") == (8, 0)
    assert backend.assumed_capability((9, 0), "sm_75") == (7, 5)
    assert backend.assumed_capability((9, 0), "86") == (8, 6)
    with pytest.raises(ValueError, match="newer than this GPU"):
        backend.assumed_capability((8, 0), "9.0")
    with pytest.raises(ValueError, match="7.5 or newer"):
        backend.assumed_capability((9, 0), "7.0")
    with pytest.raises(ValueError, match="like 7.5"):
        backend.assumed_capability((9, 0), "hopper")


def test_a_gpu_older_than_7_5_falls_back_to_the_cpu(monkeypatch):
    monkeypatch.setattr(backend, "_BACKEND", None)
    monkeypatch.setattr(backend, "_torch_cuda_device", lambda: ("Tesla V100-SXM2-16GB", (7, 0)))
    monkeypatch.setenv(backend.ENV_VAR, "auto")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM")  # set by the CPU backend of this process
    b = backend.select()
    assert b.name == "cpu" and "sm_70" in b.reason and "7.5" in b.reason
    monkeypatch.setattr(backend, "_BACKEND", None)
    monkeypatch.setenv(backend.ENV_VAR, "gpu")
    with pytest.raises(RuntimeError, match="7.5 or newer"):
        backend.select()


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make the course believe it runs on a GPU of a given capability; nothing may touch CUDA, so
    measuring and checking are replaced by recorders that list what they were asked to run."""
    calls = []

    def make(capability, device=None, name="Fake GPU"):
        fake = backend.Backend("gpu", "faked by a test", name, capability, device or capability)
        monkeypatch.setattr(backend, "_BACKEND", fake)
        h200 = results.load(results.DEFAULT_GPU_FILE)

        def fake_measure(gemm, dtype, shape, **kw):  # gemm: a stage's name, or what bench resolved
            name, dtype = getattr(gemm, "label", gemm), dtypes.get(dtype).name
            calls.append((name, dtype))
            row = dict(h200.select(name, dtype, [shape])[0])
            return {k: v for k, v in row.items() if k != "recorded_on"}

        def fake_check_one(t, shape, *, seed, tol=None):
            calls.append((t.label, t.dtype.name))
            return correctness.ShapeResult(shape, seed, 0.0, 1.0)

        monkeypatch.setattr(bench, "measure", fake_measure)
        monkeypatch.setattr(bench, "copy_bandwidth_gbs", lambda: 1000.0)
        monkeypatch.setattr(bench, "provenance", lambda command="": {
            "gpu": name, "sm_count": 1, "driver": "-", "cuda": "-", "torch": "-", "triton": "-", "numba": "-",
            "date": "2026-12-01T00:00:00+00:00"})
        monkeypatch.setattr(correctness, "check_one", fake_check_one)
        monkeypatch.setattr(results, "RESULTS_DIR", results.DEFAULT_GPU_FILE.parent)
        return fake

    make.calls = calls
    return make


def test_check_does_not_call_a_stage_this_gpu_cannot_run(fake_gpu):
    fake_gpu((8, 0), name="NVIDIA A100-SXM4-80GB")
    report = course_lib.check("tc_2_wgmma_tma", "bf16")
    assert isinstance(report, correctness.NotChecked) and not report
    assert "wgmma" in repr(report) and "sm_80" in repr(report) and "A100" in repr(report)
    assert fake_gpu.calls == []
    # the stage itself refuses, too, before anything reaches CUDA
    a, b = torch.zeros(8, 8, dtype=torch.bfloat16), torch.zeros(8, 8, dtype=torch.bfloat16)
    with pytest.raises(registry.NotOnThisGPU, match="compute capability 9.0 up to 10.0"):
        course_lib.get_stage("tc_6_tma_store")(a, b)
    # what it can run, it checks
    assert course_lib.check("tc_1_mma_sync", "bf16", shapes=[(8, 8, 8)])
    assert fake_gpu.calls == [("tc_1_mma_sync", "bf16")]


def test_the_tensor_core_wrapper_refuses_before_building_the_extension(fake_gpu, monkeypatch):
    fake_gpu((8, 6))
    monkeypatch.setattr(tc.stages, "prepare", lambda *a, **k: None)
    monkeypatch.setattr(tc.stages, "extension", lambda: pytest.fail("the extension must not be built for a stage this GPU lacks"))
    with pytest.raises(registry.NotOnThisGPU, match="Hopper"):
        registry.get_stage("tc_4_warp_specialized").gemms["bf16"](None, None)


def test_turing_checks_fp16_but_not_bf16(fake_gpu):
    fake_gpu((7, 5), name="Tesla T4")
    assert isinstance(course_lib.check("triton_fast", "bf16"), correctness.NotChecked)
    assert isinstance(course_lib.check("cublas", "tf32"), correctness.NotChecked)
    assert course_lib.check("triton_fast", "fp16", shapes=[(8, 8, 8)])
    assert fake_gpu.calls == [("triton_fast", "fp16")]


def test_compare_measures_what_runs_and_shows_the_recording_for_the_rest(fake_gpu, capsys):
    fake_gpu((8, 0), name="NVIDIA A100-SXM4-80GB")
    staircase = [d.stage for d in tc.DESIGNS]
    got = bench.compare(["triton_fast"] + staircase, "bf16", (4096, 4096, 4096), progress=False)
    assert fake_gpu.calls == [("triton_fast", "bf16"), ("tc_1_mma_sync", "bf16")]
    out = capsys.readouterr().out
    for name in HOPPER_ONLY:
        assert f"not run here: stage {name!r} (bf16) needs Hopper's wgmma" in out
    recorded = [r for r in got.records if r.get("recorded_on")]
    assert {r["stage"] for r in recorded} == HOPPER_ONLY
    assert all(r["recorded_on"].startswith("NVIDIA H200 on ") for r in recorded)
    assert got.label.startswith("measured live on NVIDIA A100-SXM4-80GB in this run; rows marked * recorded on NVIDIA H200")
    assert "*  recorded on NVIDIA H200" in got.table()


def test_bench_of_a_stage_this_gpu_lacks_is_the_recording(fake_gpu, capsys):
    fake_gpu((8, 9), name="NVIDIA L4")
    got = bench.bench("tc_6_tma_store", "bf16", [(4096, 4096, 4096)], progress=False)
    assert fake_gpu.calls == []
    assert got.label.startswith("recorded on NVIDIA H200")
    out = capsys.readouterr().out
    assert "not run here: stage 'tc_6_tma_store' (bf16) needs Hopper's wgmma" in out and "NVIDIA L4 (sm_89)" in out


def test_a_recording_plans_only_what_the_gpu_runs():
    for capability in [(7, 5), (8, 0), (9, 0)]:
        plan = recording.record_plan(capability=capability)
        assert {(p.stage, p.dtype) for p in plan} <= runnable(capability)
        skipped = recording.not_recordable(capability)
        assert len(skipped) == len(everything() - runnable(capability))
    assert recording.not_recordable((9, 0)) == []
    assert any(line.startswith("tc_2_wgmma_tma bf16: needs Hopper's wgmma") for line in recording.not_recordable((8, 0)))


def test_a_recording_measures_the_plan_and_lists_the_rest(fake_gpu, tmp_path):
    fake_gpu((8, 0), name="NVIDIA A100-SXM4-80GB")
    path = recording.record(tmp_path / "a100.json", ["naive", "tc_2_wgmma_tma"], sweep=False, command="test")
    got = results.load(path)
    squares = {(n, n, n) for n in bench.SQUARE_SIZES}
    cublas = {(n, d) for n, d in runnable((8, 0)) if n == "cublas"}
    assert {(r["stage"], r["dtype"]) for r in got.records} == {("naive", "fp32")} | cublas
    assert {(r["M"], r["N"], r["K"]) for r in got.records} == squares
    assert ("tc_2_wgmma_tma", "bf16") not in fake_gpu.calls  # never asked of a GPU without wgmma
    assert any(line.startswith("tc_2_wgmma_tma bf16: needs Hopper's wgmma") for line in got.provenance["not_recorded"])
    assert got.provenance["failures"] == [] and not (tmp_path / "a100.partial.json").exists()
    assert got.ceilings["cublas_peak_tflops"]["fp32"] == max(r["tflops"] for r in got.select("cublas", "fp32"))


def test_without_a_gpu_the_notebooks_show_the_h200_recording(capsys):
    if backend.get().is_gpu:
        pytest.skip("this machine has a GPU")
    got = bench.compare(["triton_fast", "tc_6_tma_store"], "bf16", (4096, 4096, 4096), progress=False)
    assert got.label.startswith("recorded on NVIDIA H200 on ")
    assert "No GPU here: these numbers were recorded on NVIDIA H200" in capsys.readouterr().out
    assert {r["stage"] for r in got.records} == {"triton_fast", "tc_6_tma_store"}


def test_a_learners_own_recording_is_shown_filled_in_from_the_h200(fake_gpu, tmp_path, monkeypatch):
    fake_gpu((8, 6), name="NVIDIA GeForce RTX 3090")
    h200 = results.load(results.DEFAULT_GPU_FILE)
    own_rows = [dict(r, tflops=r["tflops"] / 3, cublas_tflops=r["cublas_tflops"] / 3)
                for r in h200.select("naive", "fp32") + h200.select("cublas", "fp32")]
    own = results.Results(None, dict(h200.provenance, gpu="NVIDIA GeForce RTX 3090", date="2026-12-02T10:00:00+00:00"),
                          h200.ceilings, tuple(own_rows))
    results.save(own, tmp_path / "nvidia_geforce_rtx_3090.json")
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    shown = results.load()
    naive = shown.select("naive", "fp32", [(4096, 4096, 4096)])[0]
    assert "recorded_on" not in naive and naive["tflops"] == pytest.approx(h200.select("naive", "fp32", [(4096,) * 3])[0]["tflops"] / 3)
    tc6 = shown.select("tc_6_tma_store", "bf16", [(4096, 4096, 4096)])[0]
    assert tc6["recorded_on"].startswith("NVIDIA H200 on ")
    assert shown.label == ("recorded on NVIDIA GeForce RTX 3090 on 2026-12-02; rows marked * recorded on "
                           f"{h200.source}")


def test_features_say_where_they_exist():
    assert features.HOPPER_SM90A.where == "9.0 up to 10.0"
    assert features.BF16_TENSOR_CORES.where == "8.0 and newer"
    assert features.missing(dtypes.FP16.needs, (7, 5)) is None
    assert features.missing(dtypes.BF16.needs, (7, 5)) is features.BF16_TENSOR_CORES
    assert features.TRITON_TENSOR_CORES.where == "8.0 and newer"
    assert features.triton_dot((7, 5)) == features.triton_dot((9, 0), exact_fp32=True) == "FMA on the CUDA cores"
    assert [features.triton_dot(c) for c in [(8, 6), (9, 0), (10, 0), (12, 0)]] == ["mma.sync", "wgmma", "tcgen05.mma",
                                                                                  "mma.sync"]


# ---- Triton: what the locked version compiles for each generation ---------------------------------
# One helper compiles the course's Triton kernels for a GPU generation without a GPU, for both this
# test and the table of every kernel (tools/triton_targets.py, tests/test_triton_targets.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import triton_targets  # noqa: E402


@pytest.mark.slow
def test_triton_fast_has_a_config_that_fits_every_generation():
    """PORTABLE_CONFIGS (what triton_fast falls back to when no tuned candidate fits a GPU's shared
    memory) compiles with the locked Triton for every generation that runs the dtype, and fits."""
    from course_lib.kernels.coalescing_and_triton.fast_configs import PORTABLE_CONFIGS

    portable = {c.dtype: c for c in triton_targets.cases()
                if c.kernel.endswith(":grouped_matmul_kernel") and c.config == PORTABLE_CONFIGS[c.dtype].label}
    assert set(portable) == set(PORTABLE_CONFIGS)
    cases = [(portable[d].key, cap) for cap in triton_targets.CAPABILITIES for d in sorted(portable)
             if ("triton_fast", d) in runnable(divmod(cap, 10))]
    assert len(cases) == 2 + 4 * (len(triton_targets.CAPABILITIES) - 1)  # Turing runs fp32 and fp16
    got = triton_targets.compile_in_subprocess(cases, timeout=600)
    recorded = {triton_targets.row_key(r): r["targets"] for r in triton_targets.load()["kernels"]}
    for key, cap in cases:
        result, dtype = got[(key, cap)], key.split()[1]
        assert result == recorded[key][f"sm_{cap}"], (key, cap, "the table differs: python tools/triton_targets.py --readme")
        assert result["compiles"] and result["shared_bytes"] <= triton_targets.MAX_SHARED_PER_BLOCK[cap], (key, cap)
        # 16-bit types and TF32 go through the tensor cores from sm_80 on, exact fp32 through the FMA
        # units; on Turing this Triton has no tensor-core path: its fp16 dot runs on the FMA units too
        tensor_cores = dtype != "fp32" and features.TRITON_TENSOR_CORES.available(divmod(cap, 10))
        assert (result["dot"] != "fma") == tensor_cores == (dtype != "fp32" and cap >= 80), (key, cap)
