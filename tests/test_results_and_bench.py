"""Results files round-trip and are validated on load; bench never times on the CPU."""

import copy
import json
import os
import subprocess
import sys

import pytest
import torch

from course_lib import backend, bench, profiles, results, timing
from course_lib.bench import recording


def _sample():
    return {
        "provenance": {
            "gpu": "NVIDIA H200", "sm_count": 132, "driver": "580", "cuda": "13.0", "torch": "2.11",
            "triton": "3.6", "numba": "0.68", "date": "2026-11-29T12:00:00+00:00",
        },
        "ceilings": {"copy_bandwidth_gbs": 4300.0, "cublas_peak_tflops": {"fp32": 51.0}},
        "records": [
            {"stage": "cublas", "dtype": "fp32", "M": 1024, "N": 1024, "K": 1024, "ms": 0.05,
             "tflops": 42.9, "cublas_ms": 0.05, "cublas_tflops": 42.9, "ratio_to_cublas": 1.0},
            {"stage": "naive", "dtype": "fp32", "M": 1024, "N": 1024, "K": 1024, "ms": 2.0,
             "tflops": 1.07, "cublas_ms": 0.05, "cublas_tflops": 42.9, "ratio_to_cublas": 1.07 / 42.9},
        ],
    }


def test_round_trip(tmp_path):
    r = results.validate(_sample())
    path = results.save(r, tmp_path / "x.json")
    back = results.load(path)
    assert back.to_json() == r.to_json()
    assert back.label == "recorded on NVIDIA H200 on 2026-11-29"
    assert [x["stage"] for x in back.select(dtype="fp32", shapes=[(1024, 1024, 1024)])] == ["cublas", "naive"]


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(results.ResultsFileError, match="no such file.*--record"):
        results.load(tmp_path / "nope.json")


def test_corrupt_json_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"provenance": {')
    with pytest.raises(results.ResultsFileError, match="cannot be read as JSON"):
        results.load(p)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d.pop("records"), "'records' is missing"),
        (lambda d: d["provenance"].pop("gpu"), "provenance lacks gpu"),
        (lambda d: d["records"][1].pop("cublas_tflops"), "lacks 'cublas_tflops'"),
        (lambda d: d["records"][1].update(tflops="fast"), "is not a float"),
        (lambda d: d["records"][1].update(ms=-1.0), "must be positive"),
        (lambda d: d["records"][1].update(ms=float("inf")), "must be positive"),
        (lambda d: d["records"][1].update(tflops=float("nan")), "must be positive"),
        (lambda d: d["records"][1].update(dtype="fp64"), "dtype 'fp64'"),
        (lambda d: d["records"][1].update(ratio_to_cublas=0.5), "ratio_to_cublas"),
        (lambda d: d["ceilings"].pop("copy_bandwidth_gbs"), "copy_bandwidth_gbs"),
    ],
)
def test_validation_names_what_is_wrong(damage, message):
    d = copy.deepcopy(_sample())
    damage(d)
    with pytest.raises(results.ResultsFileError, match=message):
        results.validate(d)


# Written out, not read from results.RECORD_KEYS: a key dropped from there must fail this test.
@pytest.mark.parametrize("key", ["stage", "dtype", "M", "N", "K", "ms", "tflops", "cublas_ms", "cublas_tflops",
                                 "ratio_to_cublas"])
def test_every_record_key_is_required(key):
    d = copy.deepcopy(_sample())
    d["records"][1].pop(key)
    with pytest.raises(results.ResultsFileError, match=f"record 1 lacks '{key}'"):
        results.validate(d)


@pytest.mark.parametrize("key", ["gpu", "sm_count", "driver", "cuda", "torch", "triton", "numba", "date"])
def test_every_provenance_key_is_required(key):
    d = copy.deepcopy(_sample())
    d["provenance"].pop(key)
    with pytest.raises(results.ResultsFileError, match=f"provenance lacks {key}"):
        results.validate(d)


def test_summaries_are_what_the_raw_logs_give():
    """course_lib/results/*_summary.json are made by experiments/summarize.py from experiments/runs/."""
    import subprocess
    import sys

    root = results.RESULTS_DIR.parent.parent
    got = subprocess.run([sys.executable, str(root / "experiments" / "summarize.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    for path in results.RESULTS_DIR.glob("*_summary.json"):
        prov = json.loads(path.read_text())["provenance"]
        assert prov["made_by"] == "experiments/summarize.py" and prov["runs"] and prov["gpu"]
        assert all((root / run).is_file() for run in prov["runs"])


def test_the_package_ships_no_large_logs():
    for path in results.RESULTS_DIR.iterdir():
        # the recording: 683 records since the shape table grew to mid-size shapes and M = 96-512, each
        # final stage's row with cuBLAS's as-called rounds (bench.recording.pool_cublas_as_called)
        limit = 460_000 if path == results.DEFAULT_GPU_FILE else 100_000
        assert path.stat().st_size < limit, f"{path.name} is {path.stat().st_size // 1000} KB: raw logs go to experiments/runs"


def test_save_refuses_invalid_results(tmp_path):
    bad = results.Results(None, {"gpu": "x"}, {}, ())
    with pytest.raises(results.ResultsFileError):
        results.save(bad, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()


def test_replace_stages_swaps_one_stage_and_its_cublas_rows(tmp_path):
    old = _sample()
    old["records"].append(dict(old["records"][1], stage="tiled"))
    new = copy.deepcopy(_sample())
    new["provenance"]["date"] = "2026-12-01T10:00:00+00:00"
    new["records"][0].update(ms=0.04, tflops=53.7, cublas_ms=0.04, cublas_tflops=53.7)
    new["records"][1].update(ms=1.0, tflops=2.1, cublas_ms=0.04, cublas_tflops=53.7, ratio_to_cublas=2.1 / 53.7)
    results.save(results.validate(old), tmp_path / "rec.json")
    results.save(results.validate(new), tmp_path / "upd.json")
    merged = results.load(recording.replace_stages(tmp_path / "rec.json", tmp_path / "upd.json", "cmd"))
    by_stage = {r["stage"]: r for r in merged.records}
    assert len(merged.records) == 3 and by_stage["naive"]["ms"] == 1.0 and by_stage["cublas"]["ms"] == 0.04
    assert by_stage["tiled"]["ms"] == 2.0  # not re-recorded: kept as it was
    assert merged.provenance["rerecorded"] == [{"stages": ["naive"], "date": "2026-12-01T10:00:00+00:00",
                                                "command": "cmd", "failures": []}]
    assert merged.ceilings["cublas_peak_tflops"] == {"fp32": 53.7}
    other = copy.deepcopy(new)
    other["provenance"]["gpu"] = "NVIDIA A100"
    results.save(results.validate(other), tmp_path / "a100.json")
    with pytest.raises(ValueError, match="same GPU"):
        recording.replace_stages(tmp_path / "rec.json", tmp_path / "a100.json")


def test_replace_stages_can_keep_the_recordings_cublas_rows(tmp_path):
    old = _sample()
    new = copy.deepcopy(_sample())
    new["records"][0].update(ms=0.04, tflops=53.7, cublas_ms=0.04, cublas_tflops=53.7)
    new["records"][1].update(ms=1.0, tflops=2.1, cublas_ms=0.04, cublas_tflops=53.7, ratio_to_cublas=2.1 / 53.7)
    results.save(results.validate(old), tmp_path / "rec.json")
    results.save(results.validate(new), tmp_path / "upd.json")
    merged = results.load(recording.replace_stages(tmp_path / "rec.json", tmp_path / "upd.json", "cmd", keep_cublas=True))
    by_stage = {r["stage"]: r for r in merged.records}
    assert by_stage["naive"]["ms"] == 1.0 and by_stage["naive"]["cublas_ms"] == 0.04  # its own call's cuBLAS
    assert by_stage["cublas"] == old["records"][0]  # the recording's cuBLAS row stays
    assert merged.provenance["rerecorded"][0]["cublas_rows"] == "kept from the recording"


def test_fp8_stages_are_not_merged_beside_cublas_rows_timed_another_way(tmp_path):
    """FP8's cuBLAS was once timed through the per-call wrapper (scales laid out in every call): an FP8
    re-recording may not keep those rows beside its own stages' new yardstick; without keep_cublas
    its cuBLAS rows replace them and the provenance says which yardstick the file holds."""
    def fp8_rows(ms):
        row = {"dtype": "e4m3", "scaling": "block", "M": 4096, "N": 4096, "K": 4096, "ms": ms, "tflops": 1.37 / ms,
               "cublas_ms": ms, "cublas_tflops": 1.37 / ms, "ratio_to_cublas": 1.0}
        return [dict(row, stage="cublas"), dict(row, stage="tc_7_fp8", ms=1.2 * ms, tflops=1.37 / ms / 1.2,
                                                ratio_to_cublas=1 / 1.2)]
    old = _sample()
    old["records"] += fp8_rows(0.12)
    new = copy.deepcopy(_sample())
    new["records"] = fp8_rows(0.115)
    new["provenance"]["fp8_cublas"] = recording.FP8_CUBLAS
    results.save(results.validate(old), tmp_path / "rec.json")
    results.save(results.validate(new), tmp_path / "upd.json")
    with pytest.raises(ValueError, match="merge without keep_cublas"):
        recording.replace_stages(tmp_path / "rec.json", tmp_path / "upd.json", "cmd", keep_cublas=True)
    merged = results.load(recording.replace_stages(tmp_path / "rec.json", tmp_path / "upd.json", "cmd"))
    assert merged.provenance["fp8_cublas"] == recording.FP8_CUBLAS
    (cublas,) = merged.select("cublas", "e4m3", scaling="block")
    assert cublas["ms"] == 0.115
    # From then on an FP8 stage may be re-recorded beside those rows.
    again = copy.deepcopy(new)
    again["records"] = [r for r in fp8_rows(0.11) if r["stage"] != "cublas"]
    results.save(results.validate(again), tmp_path / "again.json")
    recording.replace_stages(tmp_path / "rec.json", tmp_path / "again.json", "cmd", keep_cublas=True)


def test_replace_stages_leaves_the_cublas_rows_of_other_dtypes(tmp_path):
    """Re-recording an fp32 stage times cuBLAS at the squares of every dtype too: its bf16 row must not
    replace the one the recording's bf16 stages were measured beside."""
    old = _sample()
    bf16 = dict(old["records"][0], dtype="bf16", ms=0.01, tflops=200.0, cublas_ms=0.01, cublas_tflops=200.0)
    old["records"].append(bf16)
    new = copy.deepcopy(_sample())
    new["records"].append(dict(bf16, ms=0.02, tflops=100.0, cublas_ms=0.02, cublas_tflops=100.0))
    new["records"][0].update(ms=0.04, tflops=53.7, cublas_ms=0.04, cublas_tflops=53.7)
    results.save(results.validate(old), tmp_path / "rec.json")
    results.save(results.validate(new), tmp_path / "upd.json")
    merged = results.load(recording.replace_stages(tmp_path / "rec.json", tmp_path / "upd.json", "cmd"))
    cublas = {r["dtype"]: r for r in merged.records if r["stage"] == "cublas"}
    assert cublas["bf16"] == bf16 and cublas["fp32"]["ms"] == 0.04 and len(merged.records) == 3


def test_committed_results_file_is_valid():
    r = results.load()
    assert r.provenance["gpu"].startswith("NVIDIA")
    stages = {x["stage"] for x in r.records}
    assert "cublas" in stages
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        assert r.select("cublas", dtype), f"no cuBLAS {dtype} recorded"


def test_flushes_write_or_read_the_buffer_and_refuse_anything_else():
    buf = torch.full((64,), 7, dtype=torch.uint8)
    timing._flusher(buf, "read")()
    assert int(buf.sum()) == 64 * 7  # a read flush leaves the buffer as it was
    timing._flusher(buf, "write")()
    assert int(buf.sum()) == 0
    with pytest.raises(ValueError, match="flush is one of"):
        timing._flusher(buf, "evict")


@pytest.mark.skipif(backend.get().is_gpu, reason="the CPU backend's behaviour")
def test_bench_refuses_to_time_on_the_cpu():
    with pytest.raises(backend.NoGPUError, match="needs the GPU backend"):
        timing.time_fn(lambda: None)
    with pytest.raises(backend.NoGPUError):
        bench.measure("cublas", "fp32", (64, 64, 64))
    with pytest.raises(backend.NoGPUError, match="check it with course_lib.check"):
        bench.bench(lambda a, b: a @ b)


@pytest.mark.skipif(backend.get().is_gpu, reason="the CPU backend's behaviour")
def test_bench_on_the_cpu_returns_recorded_results(tmp_path, monkeypatch, capsys):
    p = tmp_path / "h200.json"
    p.write_text(json.dumps(_sample()))
    monkeypatch.setattr(results, "DEFAULT_GPU_FILE", p)
    r = bench.bench("naive", "fp32", [(1024, 1024, 1024)])
    assert "recorded on NVIDIA H200" in capsys.readouterr().out
    assert [x["stage"] for x in r.records] == ["naive"] and r.label.startswith("recorded")
    with pytest.raises(LookupError, match="nothing recorded"):
        bench.bench("naive", "fp32", [(4096, 4096, 4096)])


@pytest.mark.skipif(backend.get().is_gpu, reason="the CPU backend's behaviour")
def test_the_command_line_shows_the_recording_without_a_gpu():
    env = dict(os.environ, COURSE_BACKEND="cpu")
    run = [sys.executable, "-m", "course_lib.bench"]
    got = subprocess.run(run + ["naive", "--size", "4096"], env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    row = results.course_recording().select("naive", "fp32", [(4096, 4096, 4096)])[0]
    assert "recorded on NVIDIA H200" in got.stdout and results.format_table([row]).splitlines()[1] in got.stdout
    got = subprocess.run(run + ["--record", "--replace-in", "x.json"], env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 2 and "--replace-in needs --stages" in got.stderr


def test_readme_table_is_generated_from_the_results_file():
    from course_lib import report

    assert report.main(["--check"]) == 0, "run python -m course_lib.report to regenerate README.md's table"
    table = report.headline_table(results.load())
    assert "| register_tiling | 03_thread_coarsening | fp32 |" in table


def test_ratio_table_fits_and_says_what_it_shows():
    text = results.ratio_table([results.course_recording()], ["triton_tiled", "triton_fast"])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert lines[0].startswith("recorded on NVIDIA H200") and "GPU time" in lines[0]
    assert lines[-1].startswith("triton_fast") and lines[-1].count("%") == 4


def test_profile_table_shows_each_stage_side_by_side():
    prof = results.summary("stage_profiles")["profiles"]
    text = profiles.profile_table(["naive", "register_tiling"], ["time", "registers", "stalls"])
    lines = text.splitlines()
    assert lines[0].startswith("Nsight Compute on NVIDIA H200") and "(recorded)" in lines[0]
    assert lines[1].split() == ["naive", "register_tiling"]
    time_row = next(line for line in lines if line.startswith("time (ms)"))
    assert time_row.split()[-2:] == [f"{prof[s]['time_ms']:.3g}" for s in ("naive", "register_tiling")]
    assert next(line for line in lines if line.startswith("registers per thread")).split()[-2:] == [
        f"{prof[s]['registers_per_thread']:.0f}" for s in ("naive", "register_tiling")]
    assert "L2 hit rate (%)" not in text  # only the rows asked for
    assert lines.index("  register_tiling") > lines.index("top stalls (cycles per issued instruction)")
    with pytest.raises(LookupError, match="no profile of \\['triton_fast'\\]"):
        profiles.profile_table(["triton_fast"])


class _FakeCuda:
    """torch.cuda for the timer on the CPU: events whose elapsed times come from a list, and which
    refuse to be read until the device was synchronised after they were recorded."""

    def __init__(self, times):
        self.times, self.synced = list(times), True
        cuda = self

        class Event:
            def __init__(self, enable_timing=False):
                pass

            def record(self):
                cuda.synced = False

            def synchronize(self):
                cuda.synced = True

            def elapsed_time(self, other):
                assert cuda.synced, "an event was read before the device was synchronised"
                return cuda.times.pop(0)

        self.Event = Event

    def synchronize(self):
        self.synced = True


def test_the_timer_reports_the_median_after_synchronising(monkeypatch):
    fake = _FakeCuda([10.0, 1.0, 2.0, 100.0])  # the estimate, then three runs: median 2, mean 34
    proxy = type("T", (), {"__getattr__": lambda self, n: getattr(torch, n)})()
    proxy.cuda = fake
    proxy.zeros = lambda *a, **k: torch.zeros(1)
    monkeypatch.setattr(timing, "torch", proxy)
    monkeypatch.setattr(timing.backend, "require_gpu", lambda *a: None)
    monkeypatch.setattr(timing, "_flusher", lambda buf, how: (lambda: None))
    t = timing.time_fn(lambda: None, budget_ms=30.0)
    assert t.runs == 3 and t.median_ms == 2.0


def test_cublas_as_called_is_one_time_per_shape_for_every_kernel():
    """Each final stage times cuBLAS as called in its own rounds; the recording pools them, so that
    every kernel's as-called ratio at a shape is taken against the same cuBLAS time."""
    from course_lib.bench.recording import pool_cublas_as_called

    def row(stage, rounds, ms):
        return {"stage": stage, "dtype": "bf16", "M": 8, "N": 64, "K": 64, "ms_as_called": ms,
                "cublas_ms_as_called": sorted(rounds)[len(rounds) // 2], "cublas_ms_as_called_rounds": rounds}

    rows = (row("tc_6_tma_store", [0.040, 0.041], 0.036), row("triton_fast", [0.030, 0.031], 0.036),
            {"stage": "cublas", "dtype": "bf16", "M": 8, "N": 64, "K": 64, "ms": 0.02},
            dict(row("triton_fast", [0.5], 0.5), M=4096))
    pooled = pool_cublas_as_called(rows)
    assert pooled == pool_cublas_as_called(pooled)  # pooling again changes nothing
    a, b, plain, other = pooled
    assert a["cublas_ms_as_called"] == b["cublas_ms_as_called"] == pytest.approx(0.0355)
    assert a["ratio_to_cublas_as_called"] == b["ratio_to_cublas_as_called"] == pytest.approx(0.0355 / 0.036)
    assert a["cublas_ms_as_called_spread"] == [0.030, 0.041] and a["cublas_ms_as_called_beside"] == pytest.approx(0.0405)
    assert plain == rows[2] and other["cublas_ms_as_called"] == 0.5  # other rows and shapes untouched


def test_cublas_as_called_is_pooled_only_within_one_bench_call():
    """Rounds of two calls (another machine, another day) are not pooled: each row's ratio is taken
    against cuBLAS as called in its own call; a row's call comes from the provenance when missing."""
    from course_lib.bench.recording import pool_cublas_as_called, stamp_calls

    def row(stage, rounds, ms):
        return {"stage": stage, "dtype": "bf16", "M": 1, "N": 64, "K": 64, "ms_as_called": ms,
                "cublas_ms_as_called": rounds[0], "cublas_ms_as_called_rounds": rounds}

    prov = {"date": "day 1", "rerecorded": [{"stages": ["tc_6_tma_store"], "date": "day 3"}]}
    rows = stamp_calls((row("tc_6_tma_store", [0.063, 0.063], 0.059), row("triton_fast", [0.035, 0.035], 0.061),
                        {"stage": "cublas", "dtype": "bf16", "M": 1, "N": 64, "K": 64, "ms": 0.02}), prov)
    assert [r.get("call") for r in rows] == ["day 3", "day 1", None]
    assert stamp_calls(rows, {"date": "day 9"}) == rows  # a call once stamped stays
    tc6, triton, _ = pool_cublas_as_called(rows)
    assert tc6["cublas_ms_as_called"] == pytest.approx(0.063) and triton["cublas_ms_as_called"] == pytest.approx(0.035)
    assert triton["ratio_to_cublas_as_called"] == pytest.approx(0.035 / 0.061)
    same_call = pool_cublas_as_called([dict(r, call="day 1") if "call" in r else r for r in rows])
    assert same_call[1]["cublas_ms_as_called"] == pytest.approx(0.049)  # one call: both kernels' rounds pooled
