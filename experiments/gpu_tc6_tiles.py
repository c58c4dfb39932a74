"""Stage 6's tiles, 128 x 256, 128 x 128 and (since 2026-12-05) 128 x 64, each with whole tiles and with
stream-K, forced, beside the plan by the shape and cuBLAS, at the middle shapes (issue 38).

    source tools/gpu_env.sh && python3 experiments/gpu_tc6_tiles.py --out $OUT/tiles.json
    python3 experiments/gpu_tc6_tiles.py --dry-run      # on any machine: the shapes, variants and plans

Stage 6 now has a 128 x 128 tile beside its 128 x 256 one (tc_6_tma_store.cu, ``plan``): the launcher
takes it where whole 128 x 256 tiles keep the 66 clusters less than NARROW_TILE_BELOW busy and K is too
short for stream-K (the rule as this script's first run on the H200 left it; the run before it had
taken 128 x 128 wherever it filled the clusters better, and lost at every shape with long K). This script checks
every forced tile and schedule and the plan by the shape with ``course_lib.check`` (float64 reference,
C poisoned) at small and odd shapes; replays the plan by the shape (and the forced 128 x 128 stream-K)
from a CUDA graph and on two streams, each result against the eager one; then times each variant and
cuBLAS in alternating rounds in GPU time (``course_lib.timing.time_fn``, the timer of
``course_lib.bench.measure``: L2 flushed before each run, the host's time kept out) at the squares
1024-8192, the shape table's rows with 96 <= M <= 512, and the shapes whose tile the plan changed.
It prints one line per shape (each variant's us and % of cuBLAS, what the plan picked) and writes
the raw log.

The extension is built (or loaded from its cache) by ``tc.extension()`` at the start, as every
``gpu_`` script of this folder does; about a minute the first time. Raw log, never edited.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

import course_lib
from course_lib import correctness, dtypes
from course_lib.gemm import relative_error
from course_lib.kernels import tensor_cores as tc
from course_lib.model import waves
from course_lib.model_shapes import MODEL_SHAPES
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

# name -> (block_n, schedule), as stage6_plan and the extension take them ("auto": the shape decides).
VARIANTS = {
    "128x256 whole": (256, "whole tiles"),
    "128x256 stream-K": (256, "stream-K"),
    "128x128 whole": (128, "whole tiles"),
    "128x128 stream-K": (128, "stream-K"),
    "128x64 whole": (64, "whole tiles"),
    "128x64 stream-K": (64, "stream-K"),
    "auto": (tc.TILE_AUTO, "auto"),
}
CLUSTERS = 66  # the H200's resident 2-CTA clusters (the run checks it against the GPU's SMs)

# (a) correctness: squares, a shape that cuts every tile, and M = 97, 200, 257 with the shape table's
# N and K of the M = 96, 192 and 256 rows (odd M: a partial tile row; 97 goes to the swapped schedule
# by the shape, the forced tiles take it too).
CHECK_SHAPES = [(1024, 1024, 1024), (1536, 1536, 1536), (2048, 2048, 2048), (3072, 3072, 3072),
                (1000, 1032, 1024), (97, 6144, 4096), (200, 18944, 3584), (257, 4096, 14336)]

# (b) graphs and streams: the plan by the shape where it takes the 128 x 128 tile (whole, stream-K) and
# the 128 x 256 tile, and the 128 x 128 stream-K forced where the shape alone would not take it.
GRAPH_CASES = [("auto", (1024, 1024, 1024)), ("auto", (1536, 1536, 1536)), ("auto", (512, 4096, 4096)),
               ("auto", (200, 4096, 4096)), ("auto", (257, 4096, 14336)), ("auto", (2048, 2048, 2048)),
               ("128x128 stream-K", (1024, 1024, 1024)), ("128x128 stream-K", (3000, 3000, 3000)),
               ("128x64 whole", (1024, 1024, 1024)), ("128x64 whole", (1000, 1032, 1024)),
               ("128x64 stream-K", (1024, 1024, 1024)), ("128x64 stream-K", (257, 4096, 14336))]
REPLAYS = 2
STREAM_LAUNCHES = 6  # per stream, queued back to back so that the two streams overlap

# (c) timing: the squares, the table's rows with 96 <= M <= 512, and the shapes (table rows
# and sweep shapes, with the journal's few-tile prefill layers) whose tile the plan changed, and 1600^3
# (its 128 x 128 tiles would fill the clusters worse: the plan keeps 128 x 256).
SQUARES = [(n, n, n) for n in (512, 768, 1024, 1536, 2048, 3072, 4096, 8192)]
EXTRA = [(1000, 1000, 1000), (3000, 3000, 3000), (1600, 1600, 1600), (2048, 2560, 10240), (4096, 2112, 7168),
         (200, 4096, 4096), (1024, 1024, 4096)]
ROUNDS, BUDGET_MS = 3, 30.0


def _busy(M: int, N: int, block_n: int) -> float:
    """Whole-tile efficiency of 128 x block_n tiles on CLUSTERS clusters (the plan's measure)."""
    return waves.whole_tile_efficiency(tc.stage6_cluster_tiles(M, N, block_n), CLUSTERS)


def timing_shapes() -> list[tuple[str, tuple[int, int, int]]]:
    """(label, shape) for every shape timed, each once, in the order above."""
    out = [(f"{s[0]}^3", s) for s in SQUARES]
    out += [(m.label, m.shape) for m in MODEL_SHAPES if 96 <= m.M <= 512]
    changed = [(m.label, m.shape) for m in MODEL_SHAPES if m.M > 512 and tc.stage6_plan(*m.shape).tile != "128x256"]
    out += changed + [(f"{s[0]}x{s[1]}x{s[2]}", s) for s in EXTRA]
    seen, unique = set(), []
    for label, shape in out:
        if tuple(shape) not in seen:
            seen.add(tuple(shape))
            unique.append((label, tuple(shape)))
    return unique


def plan_text(shape, variant: str) -> str:
    block_n, schedule = VARIANTS[variant]
    p = tc.stage6_plan(*shape, CLUSTERS, block_n=block_n, schedule=schedule)
    return f"{p.tile} {p.schedule}"


def dry_run() -> int:
    """What a run would do, on any machine: no GPU, nothing timed."""
    print(f"variants: {', '.join(f'{n} ({plan_text((4096, 4096, 4096), n)} at 4096^3)' for n in VARIANTS)}")
    print(f"checks: {len(VARIANTS)} variants x {len(CHECK_SHAPES)} shapes: {CHECK_SHAPES}")
    print(f"graphs and streams: {GRAPH_CASES}")
    print(f"{'timed':<20}{'M x N x K':<20}{'busy 256':>9}{'busy 128':>9}{'busy 64':>9}  auto picks")
    for label, s in timing_shapes():
        print(f"{label:<20}{'x'.join(map(str, s)):<20}{100 * _busy(s[0], s[1], 256):>8.0f}%"
              f"{100 * _busy(s[0], s[1], 128):>8.0f}%{100 * _busy(s[0], s[1], 64):>8.0f}%  {plan_text(s, 'auto')}")
    return 0


def make_variants(sms: int) -> dict:
    """Each variant as a GEMM of the one signature; "auto" is the manifest's own (what a user gets)."""
    rule = course_lib.get_stage("tc_6_tma_store").shape_multiple
    fns = {}
    for name, (block_n, schedule) in VARIANTS.items():
        if name == "auto":
            fns[name] = course_lib.get_stage("tc_6_tma_store").gemm("bf16")
        else:
            fns[name] = tc.make_gemm("tc_6_tma_store", shape_multiple=rule, group_m=8, max_ctas=sms,
                                     schedule=tc.SCHEDULE_CODES[schedule], block_n=block_n)
    return fns


def _inputs(M: int, N: int, K: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(M, K, generator=gen, device="cuda").to(torch.bfloat16)
    b = torch.randn(K, N, generator=gen, device="cuda").to(torch.bfloat16)
    return a, b


def _error(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    return relative_error(c, a.double() @ b.double())


def graph_case_passes(worst: float, tolerance: float, same_bits: bool) -> bool:
    """A graph-and-streams case passes when every result is within the tolerance of float64 and has
    the eager call's bits: each tile's partial sums are added in a fixed order, so a replay or a
    second stream that differs in any bit has read something it should not have."""
    return worst < tolerance and same_bits


def best_variant(pct: dict[str, float]) -> str | None:
    """The variant with the highest % of cuBLAS; None when every variant failed the sanity check
    (nothing was timed but cuBLAS)."""
    return max(pct, key=pct.get) if pct else None


def check_all(fns: dict, out: dict, save) -> int:
    failures = 0
    for shape in CHECK_SHAPES:
        for name, fn in fns.items():
            try:
                course_lib.check(fn, "bf16", [shape], seed=1, label=f"tc_6 {name}")
                ok, why = True, ""
            except AssertionError as e:  # CheckFailure: the worst element named
                ok, why = False, str(e).splitlines()[0]
            failures += not ok
            out["checks"].append({"variant": name, "shape": list(shape), "plan": plan_text(shape, name), "pass": ok,
                                  **({"why": why} if why else {})})
            print(f"{'PASS' if ok else 'FAIL'} check {name:<17}{'x'.join(map(str, shape)):<16}"
                  f"({plan_text(shape, name)}) {why}", flush=True)
        save()
    return failures


def graph_and_streams(fns: dict, out: dict, save) -> int:
    """For each case: eager results on fresh inputs; the call captured in a graph (on warm inputs) and
    replayed REPLAYS times on copies of those inputs; then the eager call on two streams at once, each
    stream with its own inputs. Every result against the eager one (bits) and float64 (tolerance)."""
    failures = 0
    for name, shape in GRAPH_CASES:
        fn, (M, N, K) = fns[name], shape
        tol = correctness.tolerance("bf16", K)
        fresh = [_inputs(M, N, K, seed) for seed in (11, 12)]
        eager = [fn(*x) for x in fresh]
        torch.cuda.synchronize()
        static = _inputs(M, N, K, 10)
        fn(*static)  # warm: the plan kept, the workspace's per-stream flags made
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = fn(*static)
        results = []
        for r in range(REPLAYS):
            x = fresh[r % 2]
            static[0].copy_(x[0]), static[1].copy_(x[1])
            captured.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            results.append((f"replay {r + 1}", captured.clone(), x, eager[r % 2]))
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        torch.cuda.synchronize()
        outs: list[list[torch.Tensor]] = [[], []]
        for _ in range(STREAM_LAUNCHES):
            for i, s in enumerate(streams):
                with torch.cuda.stream(s):
                    outs[i].append(fn(*fresh[i]))
        torch.cuda.synchronize()
        for i in range(2):
            results += [(f"stream {i + 1}", c, fresh[i], eager[i]) for c in outs[i]]
        worst = max(_error(c, *x) for _, c, x, _ in results)
        same_bits = all(torch.equal(c, e) for _, c, _, e in results)
        ok = graph_case_passes(worst, tol, same_bits)
        failures += not ok
        out["graphs"].append({"variant": name, "shape": list(shape), "plan": plan_text(shape, name), "pass": ok,
                              "worst_error": worst, "tolerance": tol, "same_bits_as_eager": same_bits,
                              "results": len(results)})
        print(f"{'PASS' if ok else 'FAIL'} graph x{REPLAYS} + two streams x{STREAM_LAUNCHES}: {name:<17}"
              f"{'x'.join(map(str, shape)):<16}({plan_text(shape, name)}) worst {worst:.2e} (tol {tol:.1e}), "
              f"{'same bits as eager' if same_bits else 'BITS DIFFER from eager'}", flush=True)
        del graph
        save()
    return failures


def time_all(fns: dict, out: dict, save) -> None:
    names = list(VARIANTS)
    print(f"\nGPU time, us (% of cuBLAS), median of {ROUNDS} alternating rounds")
    head = f"{'shape':<20}{'M x N x K':<18}{'busy':>9} {'cuBLAS':>7}" + "".join(f"{n:>18}" for n in names)
    print(head + "  auto picks")
    print(f"{'':<20}{'':<18}{'256/128':>9}")
    for label, shape in timing_shapes():
        M, N, K = shape
        a, b = _inputs(M, N, K, 0)
        ref = torch.matmul(a, b)
        sane = {}
        for name, fn in fns.items():  # a fast wrong kernel is not a result
            err = relative_error(fn(a, b), ref)
            sane[name] = err <= dtypes.BF16.sanity
        calls = {"cublas": lambda: torch.matmul(a, b)}
        calls.update({n: (lambda f=fns[n]: f(a, b)) for n in names if sane[n]})
        rounds: dict[str, list[float]] = {n: [] for n in calls}
        for _ in range(ROUNDS):
            for n, call in calls.items():
                rounds[n].append(time_fn(call, budget_ms=BUDGET_MS).median_ms)
        us = {n: 1e3 * statistics.median(v) for n, v in rounds.items()}
        pct = {n: 100 * us["cublas"] / us[n] for n in us if n != "cublas"}
        best = best_variant(pct)
        row = {"label": label, "shape": list(shape), "busy_128x256": _busy(M, N, 256), "busy_128x128": _busy(M, N, 128),
               "busy_128x64": _busy(M, N, 64),
               "auto_plan": plan_text(shape, "auto"), "cublas_us": round(us["cublas"], 2),
               "us": {n: round(us[n], 2) for n in names if n in us}, "pct_of_cublas": {n: round(pct[n], 1) for n in pct},
               "insane": [n for n in names if not sane[n]], "best": best,
               "rounds_us": {n: [round(1e3 * v, 2) for v in r] for n, r in rounds.items()}}
        out["timings"].append(row)
        cells = "".join(f"{us[n]:>9.1f} ({pct[n]:3.0f}%)" if n in us else f"{'WRONG':>18}" for n in names)
        print(f"{label:<20}{'x'.join(map(str, shape)):<18}{100 * row['busy_128x256']:>4.0f}/{100 * row['busy_128x128']:<3.0f}%"
              f"{us['cublas']:>7.1f}{cells}  {row['auto_plan']} (best: {best or 'none sane'})", flush=True)
        save()
        del a, b, ref


def main() -> int:
    if "--dry-run" in sys.argv[1:]:
        return dry_run()
    out, save = runlog.start(__doc__, 2, variants={n: list(v) for n, v in VARIANTS.items()},
                             constants={"NARROW_TILE_BELOW": tc.NARROW_TILE_BELOW, "STREAM_K_BELOW": tc.STREAM_K_BELOW,
                                        "STREAM_K_MIN_SLICES": tc.STREAM_K_MIN_SLICES},
                             checks=[], graphs=[], timings=[])
    course_lib.describe()
    t0 = time.time()
    tc.extension()
    print(f"extension built/loaded in {time.time() - t0:.0f} s", flush=True)
    sms = course_lib.backend.sm_count()
    if sms != 2 * CLUSTERS:
        print(f"note: {sms} SMs, not the H200's {2 * CLUSTERS}: the printed plans assume {CLUSTERS} clusters")
    fns = make_variants(sms)
    t0 = time.time()
    failures = check_all(fns, out, save)
    print(f"checks: {failures} failed, {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    failures += graph_and_streams(fns, out, save)
    print(f"graphs and streams: {time.time() - t0:.0f} s", flush=True)
    t0 = time.time()
    time_all(fns, out, save)
    print(f"timing: {time.time() - t0:.0f} s; wrote the raw log", flush=True)
    out["failures"] = failures
    save()
    return 1 if failures else 0


if __name__ == "__main__":
    runlog.run(main)
