"""Build, check and time every tensor-core stage on a GPU, one stage per subprocess, then the
scheduling experiments on the stage-6 variant (tc_6_stream_k.py: cluster size, tile order, grid,
stream-K).

    PYTHONPATH=. COURSE_BACKEND=gpu python3 experiments/gpu_tensor_cores.py [--out DIR] [--stages a,b]

Writes into ``--out`` (default ``$OUT``, else ``./gpu_tensor_cores_out``), a flat folder of at most
8 files:

    env.txt        GPU, driver, library versions, nvidia-smi
    build.log      the builds of the course's extension and the variant's (ninja/nvcc output), their time
    stages.log     everything each stage's subprocess printed (errors with tracebacks)
    results.json   provenance, check results, timings vs cuBLAS (course_lib.bench records),
                   the scheduling experiments, and failures
    summary.txt    the table printed at the end

Each stage runs in its own subprocess with a timeout: a kernel that hangs (the mbarrier watchdog
traps after ~17 s) or poisons the CUDA context loses only its own results. Nothing here changes
the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECK_SHAPES = [(8, 8, 8), (40, 24, 40), (136, 264, 72), (264, 520, 200), (1000, 1008, 520), (2048, 2048, 2048),
                (4096, 4104, 1024)]
SIZES = (1024, 2048, 4096, 8192)
# Scheduling experiments on stage 6 (the variant of tc_6_stream_k.py, the kernel measured as stage 6
# up to 2026-12-01): (name, cluster, group_m, max_ctas, stream_k).
# The first round (cluster, group_m, grid; in nvidia_h200_tensor_core_experiments.json of
# 2026-11-29 13:16 UTC) chose cluster 2, group_m 8, one CTA per SM. The second (below): stream-K for
# the ragged last wave, each setting measured twice in alternation (run-to-run noise is ~1-2 %); it
# lost. A third round (2026-11-30, "epilogue_round" in the same file) measured stage 6's epilogue
# in 4 rounds alternating two staging boxes against the 2 rounds it has: no gain, so that knob was
# removed again (the code as measured is commit c042812). A fourth round (2026-11-30 21:34-21:50 UTC,
# "overlap_round") kept each finished tile in registers and stored it while the next tile's first
# slices ran: all at once after the 2nd slice (the store outlasted the MMAs in flight), with direct
# global stores (slower), or in two halves after the 2nd and 4th slices - that one took ~1 % fewer
# cycles per consumer (in-kernel timeline) and is now stage 6's epilogue.
EXPLORE = [("tc_6_stream_k", 2, 8, 132, sk) for _ in range(2) for sk in (False, True)] + [
    ("tc_6_stream_k", 1, 8, 132, True), ("tc_6_stream_k", 2, 16, 132, True),
]
EXPLORE_SIZES = (4096, 6144, 8192)
# Few tiles (every tile split along K), a ragged wave with a partial K slice, and 4096^3 itself.
EXPLORE_CHECK_SHAPES = [(264, 520, 200), (2048, 2048, 2048), (4096, 4096, 1032), (4096, 4096, 4096)]
BUILD_TIMEOUT_S = 420
STAGE_TIMEOUT_S = 100
EXPLORE_TIMEOUT_S = 240


def _json_line(tag: str, payload: dict) -> None:
    print(f"@@{tag} " + json.dumps(payload), flush=True)


# ---- workers (run in subprocesses) ------------------------------------------------------------
def worker_build() -> int:
    import course_lib  # noqa: F401 - chooses the backend
    from course_lib import compiler
    from course_lib.kernels import tensor_cores as tc

    import tc_6_stream_k as variant

    t0 = time.time()
    ext = tc.extension(verbose=True)
    has_sm90a = bool(getattr(ext, "has_sm90a", False))
    if has_sm90a:
        variant.extension(verbose=True)
    _json_line("build", {"seconds": time.time() - t0, "has_sm90a": has_sm90a, "dir": str(compiler.extensions_dir())})
    return 0


def worker_stage(name: str, sizes: list[int]) -> int:
    import torch

    import course_lib
    from course_lib import bench
    from course_lib.kernels import tensor_cores as tc

    tc.extension()
    for shape in CHECK_SHAPES:
        t0 = time.time()
        try:
            rep = course_lib.check(name, "bf16", [shape])
            r = rep.results[0]
            _json_line("check", {"stage": name, "shape": shape, "ok": True, "rel_error": r.rel_error,
                                 "tolerance": r.tolerance, "seed": r.seed, "seconds": time.time() - t0})
        except AssertionError as e:
            _json_line("check", {"stage": name, "shape": shape, "ok": False, "error": str(e)[:2000]})
        torch.cuda.synchronize()
    for n in sizes:
        try:
            rec = bench.measure(name, "bf16", (n, n, n))
            _json_line("time", rec)
            print(f"{name} {n}: {rec['tflops']:.1f} TF, cuBLAS {rec['cublas_tflops']:.1f} TF "
                  f"({100 * rec['ratio_to_cublas']:.1f} %)", flush=True)
        except AssertionError as e:
            _json_line("time_fail", {"stage": name, "size": n, "error": str(e)[:2000]})
    return 0


def worker_explore(sizes: list[int]) -> int:
    import course_lib  # noqa: F401
    from course_lib import bench

    import tc_6_stream_k as variant

    variant.extension()
    for stage, cluster, group_m, max_ctas, stream_k in EXPLORE:
        fn = variant.persistent_variant(cluster=cluster, group_m=group_m, max_ctas=max_ctas, stream_k=stream_k)
        try:  # a setting is timed only once it computes the right answer (fresh inputs, float64 reference)
            course_lib.check(fn, "bf16", EXPLORE_CHECK_SHAPES)
        except AssertionError as e:
            _json_line("explore_fail", {"stage": fn.__name__, "size": "check", "error": str(e)[:2000]})
            continue
        for n in sizes:
            try:
                rec = bench.measure(fn, "bf16", (n, n, n))
                rec.update({"base_stage": stage, "cluster": cluster, "group_m": group_m, "max_ctas": max_ctas,
                            "stream_k": stream_k})
                _json_line("explore", rec)
                print(f"{rec['stage']} {n}: {rec['tflops']:.1f} TF ({100 * rec['ratio_to_cublas']:.1f} %)", flush=True)
            except AssertionError as e:
                _json_line("explore_fail", {"stage": fn.__name__, "size": n, "error": str(e)[:2000]})
    return 0


# ---- the driver ----------------------------------------------------------------------------------
def _subprocess_env() -> dict[str, str]:
    """The environment of every subprocess: the repository first, then the caller's PYTHONPATH."""
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), COURSE_BACKEND="gpu")


def _run(args: list[str], timeout: int, log) -> tuple[int | str, list[tuple[str, dict]], float]:
    """Run a worker; return its exit code (or 'timeout'), the @@ records it printed, seconds."""
    env = _subprocess_env()
    t0 = time.time()
    log.write(f"\n===== {' '.join(args)} =====\n")
    log.flush()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=str(ROOT))
        code: int | str = proc.returncode
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        code = "timeout"
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    records = []
    for line in out.splitlines():
        if line.startswith("@@"):
            tag, _, payload = line[2:].partition(" ")
            records.append((tag, json.loads(payload)))
        else:
            log.write(line + "\n")
    log.write(err)
    log.write(f"----- exit {code} after {time.time() - t0:.1f} s\n")
    log.flush()
    return code, records, time.time() - t0


def _env_text() -> str:
    lines = []
    for cmd in (["nvidia-smi"], ["nvcc", "--version"], [sys.executable, "-c",
               "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', "
               "triton.__version__); print(torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))"]):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            lines.append(f"$ {' '.join(cmd[:2])}\n{p.stdout}{p.stderr}")
        except (OSError, subprocess.SubprocessError) as e:
            lines.append(f"$ {' '.join(cmd[:2])}\n{type(e).__name__}: {e}")
    return "\n".join(lines)


def _provenance() -> dict:
    code = ("import json, course_lib; from course_lib import bench; "
            "print(json.dumps(bench.provenance('experiments/gpu_tensor_cores.py')))")
    env = _subprocess_env()  # the workers' packages (numpy carried as a wheel) are the ones reported
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=str(ROOT))
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _summary(results: dict) -> str:
    lines = [f"{'stage':<18}{'check':>9}" + "".join(f"{n:>16}" for n in SIZES) + "   (TF/s, % of cuBLAS bf16)"]
    for name, st in results["stages"].items():
        checks = st["checks"]
        ok = sum(c["ok"] for c in checks)
        cells = []
        for n in SIZES:
            rec = next((r for r in st["times"] if r["M"] == n), None)
            cells.append(f"{rec['tflops']:7.1f} {100 * rec['ratio_to_cublas']:5.1f}%" if rec else "      -       ")
        status = f"{ok}/{len(CHECK_SHAPES)}" if st["exit"] == 0 else f"{ok}/{len(CHECK_SHAPES)}!{st['exit']}"
        lines.append(f"{name:<18}{status:>9}" + "".join(f"{c:>16}" for c in cells))
    cub = {}
    for st in results["stages"].values():
        for r in st["times"]:
            cub.setdefault(r["M"], []).append(r["cublas_tflops"])
    lines.append(f"{'cuBLAS (median)':<27}" + "".join(
        f"{sorted(cub[n])[len(cub[n]) // 2]:>9.1f}       " if n in cub else f"{'-':>16}" for n in SIZES))
    if results["explore"]:
        lines.append("")
        lines.append("scheduling experiments (stage, cluster, group_m, max_ctas, stream-K): TF/s, % of cuBLAS")
        for r in results["explore"]:
            sk = "sk" if r.get("stream_k") else "  "
            lines.append(f"  {r['base_stage']:<16} c={r['cluster']} g={r['group_m']:<3} max={r['max_ctas']:<4} {sk} "
                         f"{r['M']:>5}: {r['tflops']:7.1f} {100 * r['ratio_to_cublas']:5.1f}%")
    for f in results["failures"]:
        lines.append("FAILED: " + f)
    lines.append(f"build: {results['build'].get('seconds', float('nan')):.0f} s; total {results['seconds']:.0f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_tensor_cores_out")))
    p.add_argument("--stages", help="comma-separated stage names (default: all six)")
    p.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    p.add_argument("--no-explore", action="store_true", help="skip the scheduling experiments")
    args = p.parse_args(argv)
    if args.worker:
        try:
            kind, rest = args.worker[0], args.worker[1:]
            if kind == "build":
                return worker_build()
            if kind == "stage":
                return worker_stage(rest[0], [int(v) for v in rest[1:]])
            if kind == "explore":
                return worker_explore([int(v) for v in rest])
            raise SystemExit(f"unknown worker {kind}")
        except Exception:  # noqa: BLE001 - printed for the driver's log, then a non-zero exit
            traceback.print_exc()
            return 3

    sys.path.insert(0, str(ROOT))
    from course_lib.kernels.tensor_cores import DESIGNS  # no CUDA work in the driver process

    stages = args.stages.split(",") if args.stages else [d.stage for d in DESIGNS]
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    (out / "env.txt").write_text(_env_text())
    results: dict = {"provenance": _provenance(), "build": {}, "stages": {}, "explore": [], "failures": []}
    with open(out / "build.log", "w") as log:
        code, recs, secs = _run(["--worker", "build"], BUILD_TIMEOUT_S, log)
    results["build"] = dict(next((r for t, r in recs if t == "build"), {}), exit=code, wall_seconds=secs)
    print(f"build: exit {code} in {secs:.0f} s", flush=True)
    if code != 0:
        results["failures"].append(f"build: exit {code} (see build.log)")
    with open(out / "stages.log", "w") as log:
        if code == 0:
            for name in stages:
                code_s, recs, secs = _run(["--worker", "stage", name, *map(str, args.sizes)], STAGE_TIMEOUT_S, log)
                st = {"exit": code_s, "seconds": secs,
                      "checks": [r for t, r in recs if t == "check"],
                      "times": [r for t, r in recs if t == "time"],
                      "time_failures": [r for t, r in recs if t == "time_fail"]}
                results["stages"][name] = st
                bad = [c for c in st["checks"] if not c["ok"]]
                if code_s != 0:
                    results["failures"].append(f"{name}: exit {code_s} (see stages.log)")
                for c in bad:
                    results["failures"].append(f"{name}: check {tuple(c['shape'])}: {c['error'][:300]}")
                for f in st["time_failures"]:
                    results["failures"].append(f"{name}: timing {f['size']}: {f['error'][:300]}")
                print(f"{name}: exit {code_s}, {len(st['checks']) - len(bad)}/{len(CHECK_SHAPES)} checks, "
                      f"{len(st['times'])} timings, {secs:.0f} s", flush=True)
                (out / "results.json").write_text(json.dumps(results, indent=1))
            if not args.no_explore:
                code_e, recs, secs = _run(["--worker", "explore", *map(str, EXPLORE_SIZES)], EXPLORE_TIMEOUT_S, log)
                results["explore"] = [r for t, r in recs if t == "explore"]
                results["failures"] += [f"explore {r['stage']} {r['size']}: {r['error'][:300]}"
                                        for t, r in recs if t == "explore_fail"]
                if code_e != 0:
                    results["failures"].append(f"explore: exit {code_e} (see stages.log)")
    results["seconds"] = time.time() - t_start
    (out / "results.json").write_text(json.dumps(results, indent=1))
    summary = _summary(results)
    (out / "summary.txt").write_text(summary + "\n")
    print(summary)
    return 0 if not results["failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
