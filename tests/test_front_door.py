"""One front door for check, bench and compare (course_lib.target.resolve), FP8 through it, and what
bench records, measured with a fake timer on the CPU."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from course_lib import backend, bench, dtypes, fp8, results, target
from course_lib.bench import recording
from course_lib.registry import get_stage, stages
from course_lib.timing import Timing


def test_resolve_takes_a_name_or_a_record_and_normalises_it_once():
    by_name, by_record = target.resolve("cublas", "bf16"), target.resolve("cublas", dtypes.BF16)
    assert by_name.dtype is by_record.dtype is dtypes.BF16
    assert by_name.scaling is None and by_name.arithmetic == "bf16"
    fp = target.resolve("triton_fp8", dtypes.E4M3)
    assert fp.scaling == target.DEFAULT_SCALING and fp.output_dtype == torch.bfloat16
    assert target.resolve("triton_fp8", "e4m3", "block").arithmetic == "e4m3, scaled per block"


@pytest.mark.parametrize("args, message", [
    (("cublas", "bf16", "row"), "scaling is for FP8 GEMMs"),
    (("triton_fp8", "e4m3", "column"), "unknown FP8 scaling 'column'"),
    (("naive", "bf16"), "supports fp32, not bf16"),
    (("triton_fp8", "fp16"), "supports e4m3, not fp16"),
    (("cublas", "fp64"), "unknown dtype 'fp64'"),
])
def test_resolve_refuses_what_does_not_exist_and_says_what_does(args, message):
    with pytest.raises(ValueError, match=message):
        target.resolve(*args)


def test_every_fp8_stage_lists_its_scalings_and_cublas_is_the_reference_of_every_dtype():
    cublas = get_stage("cublas")
    assert set(cublas.dtypes) == set(dtypes.NAMES)
    for st in stages():
        for d in st.dtypes:
            if dtypes.get(d).operands == "fp8":
                assert st.scalings and set(st.scalings) <= set(cublas.scalings), st.name
                assert set(st.scalings) <= set(fp8.OPERAND_SCALING), st.name


@pytest.mark.parametrize("M, N, K", [(3, 256, 384), (256, 128, 640)])
def test_cublas_fp8_lays_out_block_scales_as_scaled_mm_documents(M, N, K):
    """torch._scaled_mm with block scales takes A's as M x K/128, M contiguous, and W's 128 x 128
    blocks as blocks of W^T: K/128 x N/128 (N != K here, so a missing transpose shows)."""
    qa, qw = fp8.fp8_inputs(M, N, K, "block", seed=0)
    sa, sw = fp8.scaled_mm_scales(qa, qw)
    assert tuple(sa.shape) == (M, K // 128) and sa.stride() == (1, M)
    assert tuple(sw.shape) == (K // 128, N // 128)
    assert torch.equal(sw, qw.scales.t()) and torch.equal(sa, qa.scales)
    qa, qw = fp8.fp8_inputs(M, N, K, "row", seed=0)
    sa, sw = fp8.scaled_mm_scales(qa, qw)
    assert tuple(sa.shape) == (M, 1) and tuple(sw.shape) == (1, N)
    qa, qw = fp8.fp8_inputs(M, N, K, "tensor", seed=0)
    assert all(s.dim() == 0 for s in fp8.scaled_mm_scales(qa, qw))


@pytest.mark.skipif(backend.get().is_gpu, reason="a fake timer on the CPU")
@pytest.mark.parametrize("gemm, dtype, scaling", [("triton_tiled", "fp16", None), ("triton_fp8", "e4m3", "row")])
def test_measure_records_the_ratio_as_cublas_time_over_the_stage_s(gemm, dtype, scaling, monkeypatch):
    """With a timer that says the stage takes 2 ms and cuBLAS 1 ms, the record says 50 % of cuBLAS,
    in GPU time and as called, with the dtype and (FP8) the scaling it was measured in."""
    stage_fn = target.resolve(gemm, dtype, scaling).fn
    ran = []

    def stage(a, b):
        ran.append("stage")
        return stage_fn(a, b)

    def fake_time_fn(fn, budget_ms=100.0, host=False, **kw):
        ran.clear()
        fn()
        ms = (2.0 if ran == ["stage"] else 1.0) * (1.5 if host else 1.0)
        return Timing(median_ms=ms, p20_ms=ms, p80_ms=ms, runs=10)

    monkeypatch.setattr(bench, "_require_gpu", lambda what: None)
    monkeypatch.setattr(bench, "time_fn", fake_time_fn)
    r = bench.measure(stage, dtype, (16, 32, 256), scaling=scaling, as_called=True)
    assert r["ms"] == 2.0 and r["cublas_ms"] == 1.0 and r["ms_as_called"] == 3.0
    assert r["ratio_to_cublas"] == pytest.approx(0.5) and r["ratio_to_cublas_as_called"] == pytest.approx(0.5)
    assert r["tflops"] == pytest.approx(r["cublas_tflops"] / 2)
    assert r["dtype"] == dtype and r.get("scaling") == scaling
    results.validate({"provenance": _provenance(), "ceilings": {"copy_bandwidth_gbs": 1.0}, "records": [r]})


@pytest.mark.skipif(backend.get().is_gpu, reason="a fake timer on the CPU")
def test_measure_keeps_what_a_stage_that_plans_per_shape_ran(monkeypatch):
    """A stage with a plan (stage 6: its tile and schedule by the shape) has it in each record, so a
    table prints what was measured, not what today's rule would pick; a stage without one has none."""
    t = target.resolve("triton_tiled", "fp16", None)
    planning = dataclasses.replace(t, stage=dataclasses.replace(t.stage, plan=lambda M, N, K: f"{M}x{N // 2} whole tiles"))
    monkeypatch.setattr(bench, "_require_gpu", lambda what: None)
    monkeypatch.setattr(bench, "time_fn", lambda fn, **kw: (fn(), Timing(median_ms=1.0, p20_ms=1.0, p80_ms=1.0, runs=3))[1])
    r = bench.measure(planning, "fp16", (16, 32, 64))
    assert r["plan"] == "16x16 whole tiles"
    assert "plan" not in bench.measure(t, "fp16", (16, 32, 64))
    data = {"provenance": _provenance(), "ceilings": {"copy_bandwidth_gbs": 1.0}}
    results.validate(dict(data, records=[r]))
    with pytest.raises(results.ResultsFileError, match="plan"):
        results.validate(dict(data, records=[dict(r, plan="")]))


def _provenance() -> dict:
    return {k: "x" for k in results.PROVENANCE_KEYS} | {"sm_count": 132, "date": "2026-12-04"}


def test_an_fp8_record_must_say_its_scaling_and_only_an_fp8_record_may():
    base = {"stage": "tc_7_fp8", "dtype": "e4m3", "M": 64, "N": 64, "K": 64, "ms": 1.0, "tflops": 1.0,
            "cublas_ms": 1.0, "cublas_tflops": 1.0, "ratio_to_cublas": 1.0}
    data = {"provenance": _provenance(), "ceilings": {"copy_bandwidth_gbs": 1.0}}
    results.validate(dict(data, records=[dict(base, scaling="row")]))
    for record in (base, dict(base, dtype="bf16", scaling="row")):
        with pytest.raises(results.ResultsFileError, match="scaling"):
            results.validate(dict(data, records=[record]))
    res = results.validate(dict(data, records=[dict(base, scaling="row"), dict(base, scaling="block")]))
    assert [r["scaling"] for r in res.select("tc_7_fp8", "e4m3", scaling="block")] == ["block"]


def test_the_recording_plan_measures_each_fp8_stage_in_each_scaling():
    plan = recording.record_plan(["tc_7_fp8", "triton_fp8"], capability=(9, 0))
    for name in ("tc_7_fp8", "triton_fp8"):
        square = [p.scaling for p in plan if p.stage == name and p.shape == (4096, 4096, 4096)]
        assert sorted(square) == sorted(get_stage(name).scalings)
    assert all(p.dtype == "e4m3" for p in plan)
    assert not recording.record_plan(["tc_7_fp8"], capability=(8, 0))  # no FP8 tensor cores before 8.9


def test_a_shape_rule_may_differ_per_dtype_and_check_keeps_to_it():
    """cuBLAS's FP8 GEMM (torch._scaled_mm) takes N and K in multiples of 16; its other dtypes any shape."""
    cublas = get_stage("cublas")
    assert cublas.shape_rule("e4m3") == fp8.SCALED_MM_SHAPE_MULTIPLE and cublas.shape_rule("bf16") == 1
    t = target.resolve("cublas", "e4m3", "row")
    assert t.shape_rule == (1, 16, 16)
    qa, qw = fp8.fp8_inputs(3, 8, 16, "row", seed=0)
    with pytest.raises(ValueError, match="multiples of 16, not N=8"):
        fp8.cublas_fp8(qa, qw)


def test_cublas_block_scaled_refuses_the_shapes_it_got_wrong_and_the_plan_skips_them():
    """At K = 768 (6 blocks of 128) cuBLAS's block-scaled GEMM returned wrong results on the H200."""
    assert get_stage("cublas").shape_rule("e4m3", "block") == fp8.SCALED_MM_BLOCK_SHAPE_MULTIPLE == (4, 16, 512)
    for M, K in ((768, 768), (3, 1024)):
        qa, qw = fp8.fp8_inputs(M, 256, K, "block", seed=0)
        with pytest.raises(ValueError, match="M in multiples of 4 and K of 512"):
            fp8.cublas_fp8(qa, qw)
    plan = recording.record_plan(["tc_7_fp8"], capability=(9, 0))
    assert (768, 768, 768) in {p.shape for p in plan if p.scaling == "row"}
    assert (768, 768, 768) not in {p.shape for p in plan if p.scaling == "block"}
