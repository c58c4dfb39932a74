"""Triton FP8's configurations per shape and scaling, against cuBLAS, and its host time per call.

    python experiments/gpu_fp8_triton_sweep.py --out $OUT/fp8_triton_sweep.json [--quick] [--class C] [--label L]
    python experiments/gpu_fp8_triton_sweep.py --host --out $OUT/fp8_triton_host.json
    python experiments/gpu_fp8_triton_sweep.py --plan

* **sweep** (a GPU): at every FP8 shape the course records for ``triton_fp8`` in each scaling
  (``course_lib.bench.recording.record_plan``), candidate configurations of the block-scaled kernel
  (``fp8_matmul_blockscaled``: pointer loads and tensor descriptors) and of the per-tensor kernel
  (``fp8_matmul``, descriptors on and off); per row, the per-tensor sweep's three best at the shape
  and the default. Tiles 64x128, 128x128, 128x64, 64x256, 128x256, 256x128 (at M <= DECODE_M the
  64-row ones, and 64x64, 64x32), 4 and 8 warps, pointer loads, descriptors, and descriptors with
  one program per SM walking the tiles (``persistent``, since 2026-12-05), 4 stages, and the 4-warp
  ones also with the stages at which two programs share an SM (``two_per_sm``); then 3 and 5 stages for the three best
  where K is longer than SHORT_K. Left out before timing: configurations whose pipeline does not fit
  227 KB of shared memory, or whose fp32 accumulators need more registers per thread than
  ``MAX_ACCUMULATOR_PER_THREAD`` (where ptxas spills). Each configuration is checked against float64
  once per class of M (``course_lib.check`` at one shape that cuts every tile and the last K block),
  each timing's C compared with the float64 product at the shape, and each timed with
  ``triton.testing.do_bench`` (median) beside cuBLAS with the same scaling (``fp8.cublas_fp8_for``,
  the scales laid out once, as ``bench`` times it, where its shape rule allows; the sweep's earlier
  runs timed ``fp8.cublas_fp8``, which lays them out in every call: 3-37 % slower with block scales,
  so their block-scaled shares read high; their ranking of configurations stands). Written: every
  measurement, the best configuration per (shape, scaling), and per shape class of
  ``fast_fp8_configs.shape_class`` the configuration best over all of the class's shapes (geometric
  mean of % of cuBLAS) beside the library's current one - what ``SCALES_CONFIGS`` and
  ``BLOCKSCALED_CONFIGS`` are set from. ``--quick``: 4096^3, 8192^3 and one decode shape, no second
  round, no rows; ``--class`` / ``--label``: the shapes of one class, only some candidates. At most
  1,618 timings in full (``--plan`` lists them; 978 before the two-per-SM candidates, then estimated at
  3-4 minutes on the H200: about 40 ms per timing, and Triton compiling some 150 kernels at well under a
  second each), about a minute quick; progress and the time so far are printed after each shape, and the
  log is saved after each shape.
* **host** (a GPU, or the CPU): host time per call at 64 x 64 x 64, back to back (``CALLS`` calls,
  median of ``ROUNDS`` rounds, the callables' rounds alternating): ``triton_fp8`` per tensor, per row
  and in blocks, its wrapper alone (the plan's launch replaced by nothing), ``torch._scaled_mm`` with
  the scales laid out beforehand, the course's ``fp8.cublas_fp8`` and stage 7 (``tc_7_fp8``, on
  Hopper); blocks also at 64 x 64 x 512,
  where cuBLAS takes them. On the CPU Triton's interpreter runs the kernels, so only the wrapper's
  time is the host cost of a GPU's call.
* **plan** (any machine): the candidates per shape and scaling the sweep would time, and how many.

Raw log, never edited.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import platform
import statistics
import sys
import time
import types
from pathlib import Path

import torch

from course_lib import backend, correctness, fp8  # first: it sets Triton's interpreter up on the CPU
import triton  # noqa: E402 - after course_lib (above)
from course_lib.bench.recording import record_plan
from course_lib.gemm import relative_error
from course_lib.kernels import tensor_cores
from course_lib.kernels.coalescing_and_triton import fast_fp8
from course_lib.kernels.coalescing_and_triton.fast_fp8_configs import (
    DECODE_M,
    SHAPE_CLASSES,
    SHORT_K,
    Fp8Config,
    fp8_blockscaled_config,
    fp8_config,
    shape_class,
)
from course_lib.model.hardware import H200, device_sms

TILES = ((64, 128), (128, 128), (128, 64), (64, 256), (128, 256), (256, 128))
DECODE_TILES = ((64, 64), (64, 32))  # also at M <= DECODE_M, where a 64-row tile is mostly empty
WARPS = (4, 8)
FIRST_STAGES, OTHER_STAGES = 4, (3, 5)
SECOND_ROUND = 3  # the best this many of the first round get the other stage counts
ROW_CANDIDATES = 3  # per row: the per-tensor sweep's best this many at the shape, and the default
BLOCK_K = 128
SHARED_LIMIT = H200.max_smem_per_block  # bytes one block may have (Triton refuses a kernel above)
# fp32 accumulator elements per thread, BLOCK_M * BLOCK_N / (32 * warps), above which ptxas spills:
# every configuration of the grid compiled for sm_90a (Triton 3.7.1, 4096^3), registers and spill
# stores read from ptxas -v. Block scales keep two accumulators (each slice's fresh sum and the
# total): 64 per thread fit (80-230 registers), 128 spill (104-3036 bytes). One scale per tensor or
# row: 128 fit or nearly (253-255 registers, 0-284 bytes; 256 x 128 on 8 warps, the best of
# experiments/gpu_fp8_triton.py, among them), 256 spill 1-3 KB.
MAX_ACCUMULATOR_PER_THREAD = {"block": 64, "tensor": 128}
CHECK_N, CHECK_K = 400, 2000  # cut 64-, 128- and 256-wide tiles; K: 15 blocks and 80 of a 16th
CHECK_M = 272  # rows of the check for M >= 16 (cuts every tile); below, the shape's own M
QUICK_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (64, 14336, 4096))
HOST_SHAPE, HOST_BLOCK_SHAPE = (64, 64, 64), (64, 64, 512)
DO_BENCH = dict(warmup=5, rep=25, return_mode="median")  # ms of warm-up and of timed runs per candidate


# ---- the candidates ---------------------------------------------------------------------------------
def shared_bytes(cfg: Fp8Config) -> int:
    """Shared memory of the pipeline: ``num_stages`` K-slices of A's and W's tiles, one byte per
    element (what Triton reported for every configuration compiled, to within 64 bytes); a persistent
    configuration also stages its bf16 tile of C there for the store (compiled for sm_90a on
    2026-12-05: 16,384 to 66,560 bytes more, the tile's 2 bytes per element plus at most 1 KB)."""
    pipeline = cfg.num_stages * (cfg.block_m + cfg.block_n) * cfg.block_k
    return pipeline + (cfg.block_m * cfg.block_n * 2 + 1024 if cfg.persistent else 0)


def accumulator_per_thread(cfg: Fp8Config) -> int:
    return cfg.block_m * cfg.block_n // (32 * cfg.num_warps)


def fits(cfg: Fp8Config, kind: str) -> bool:
    """Whether ``cfg`` is worth timing for ``kind`` ("block" or "tensor"): its pipeline fits shared
    memory and its accumulators fit the registers (:data:`MAX_ACCUMULATOR_PER_THREAD`)."""
    return shared_bytes(cfg) <= SHARED_LIMIT and accumulator_per_thread(cfg) <= MAX_ACCUMULATOR_PER_THREAD[kind]


def default_config(kind: str, shape) -> Fp8Config:
    return fp8_blockscaled_config(*shape) if kind == "block" else fp8_config(*shape)


def two_per_sm(cfg: Fp8Config) -> Fp8Config | None:
    """``cfg`` with the most stages (at least 2) at which two of its programs fit one SM's shared
    memory (each block also keeps 1 KB), where its warps are one warpgroup (4 warps: even at 255
    registers a thread two fit the 65,536 registers); None otherwise or when it already fits. Two
    one-warpgroup programs on an SM can overlap one's promotion with the other's wgmmas, the way
    cuBLAS's and DeepGEMM's two consumer warpgroups do; Triton waits for each slice's wgmmas before
    the fp32 add inside one program (``warp_group_dot_wait {pendings = 0}`` in the TTGIR of a
    ``max_num_imprecise_acc`` dot, compiled for sm_90a)."""
    if cfg.num_warps != 4 or cfg.persistent:
        return None
    half = (H200.smem_per_sm - 2 * 1024) // 2
    for s in range(cfg.num_stages, 1, -1):
        c = dataclasses.replace(cfg, num_stages=s)
        if shared_bytes(c) <= half:
            return None if s == cfg.num_stages else c
    return None


def first_round(kind: str, shape) -> list[Fp8Config]:
    """The configurations timed first at ``shape``: every tile, warp count and load style that fits,
    at FIRST_STAGES stages (fewer where K has fewer slices), the same one-warpgroup configurations
    with as many stages as let two programs share an SM (:func:`two_per_sm`), and the library's
    default."""
    M, N, K = shape
    tiles = TILES if M > DECODE_M else tuple(t for t in TILES if t[0] == 64) + DECODE_TILES
    stages = max(2, min(FIRST_STAGES, triton.cdiv(K, BLOCK_K)))
    out = [Fp8Config(bm, bn, BLOCK_K, num_warps=w, num_stages=stages, descriptors=d, persistent=p)
           for bm, bn in tiles for w in WARPS for d, p in ((False, False), (True, False), (True, True))]
    out += [c2 for c in out if (c2 := two_per_sm(c)) is not None]
    return list(dict.fromkeys([c for c in out if fits(c, kind)] + [default_config(kind, shape)]))


def second_round(kind: str, shape, best: list[Fp8Config]) -> list[Fp8Config]:
    """The other stage counts of the best of the first round, where K is long enough to pipeline."""
    if shape[2] <= SHORT_K:
        return []
    out = [dataclasses.replace(c, num_stages=s) for c in best for s in OTHER_STAGES]
    return [c for c in dict.fromkeys(out) if fits(c, kind) and c not in best]


@dataclasses.dataclass(frozen=True)
class Scope:
    """What one run sweeps: everything; ``quick`` (QUICK_SHAPES, one round, no rows); the shapes of one
    class only (``shape_class``); only the first round's candidates whose label contains ``label``
    (and the defaults), with no second round."""
    quick: bool = False
    shape_class: str | None = None
    label: str | None = None

    @property
    def second_round(self) -> bool:
        return not self.quick and self.label is None

    def candidates(self, kind: str, shape) -> list[Fp8Config]:
        first = first_round(kind, shape)
        if self.label is None:
            return first
        return [c for c in first if self.label in c.label or c == default_config(kind, shape)]


def sweep_shapes(scope: Scope) -> dict[str, list[tuple[int, int, int]]]:
    """Per scaling, the shapes the course records ``triton_fp8`` at (``--quick``: QUICK_SHAPES among
    them; ``--class``: those of that class)."""
    shapes: dict[str, list] = {}
    for p in record_plan(["triton_fp8"]):
        if scope.shape_class in (None, shape_class(*p.shape)):
            shapes.setdefault(p.scaling, []).append(tuple(p.shape))
    if scope.quick:
        shapes = {s: [x for x in v if x in QUICK_SHAPES] for s, v in shapes.items() if s != "row"}
    return shapes


# ---- measuring ----------------------------------------------------------------------------------------
def provenance(mode: str) -> dict:
    gpu = backend.get().is_gpu
    return {"gpu": torch.cuda.get_device_name() if gpu else "none: the CPU backend (Triton's interpreter)",
            "sm_count": device_sms() if gpu else None, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "command": "python experiments/gpu_fp8_triton_sweep.py " + " ".join(sys.argv[1:]), "mode": mode,
            "what": __doc__.split("\n\n")[2]}


def tflops(shape, ms: float) -> float:
    M, N, K = shape
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def wrapper(kind: str):
    return fast_fp8.fp8_matmul_blockscaled if kind == "block" else fast_fp8.fp8_matmul


class Sweep:
    """The sweep's state: the log, what was checked, the time so far."""

    def __init__(self, out: dict, save, started: float) -> None:
        self.out, self.save, self.started = out, save, started
        self.checked: dict[tuple, str] = {}

    def check(self, kind: str, scaling: str, cfg: Fp8Config, M: int) -> str:
        """``course_lib.check`` of ``cfg`` once per (scaling, configuration, class of M); "passed ..."
        or "FAILED ..."."""
        m = M if M < 16 else CHECK_M
        key = (scaling, cfg, m)
        if key not in self.checked:
            fn = wrapper(kind)
            try:
                rep = correctness.check(lambda qa, qw: fn(qa, qw, cfg), "e4m3", [(m, CHECK_N, CHECK_K)],
                                        scaling=scaling, seed=0)
                self.checked[key] = f"passed: {rep.results[0].rel_error:.2e}"
            except Exception as e:  # noqa: BLE001 - recorded; the configuration is then not timed
                self.checked[key] = f"FAILED: {type(e).__name__}: {e}"[:600]
            self.out["checks"].append({"scaling": scaling, "config": cfg.label, "shape": [m, CHECK_N, CHECK_K],
                                       "result": self.checked[key]})
        return self.checked[key]

    def measure(self, kind: str, scaling: str, shape, cfg: Fp8Config, qa, qw, ref, cublas_ms, phase: str) -> dict:
        row = {"scaling": scaling, "shape": list(shape), "class": shape_class(*shape), "config": cfg.label,
               "fields": dataclasses.asdict(cfg), "phase": phase, "default": cfg == default_config(kind, shape)}
        checked = self.check(kind, scaling, cfg, shape[0])
        if not checked.startswith("passed"):
            return row | {"error": "check " + checked}
        fn = wrapper(kind)
        try:
            c = fn(qa, qw, cfg)
            row["rel_error"] = relative_error(c, ref)
            if row["rel_error"] > 1e-2:
                return row | {"error": f"wrong at this shape: {row['rel_error']:.2e} from float64"}
            ms = triton.testing.do_bench(lambda: fn(qa, qw, cfg), **DO_BENCH)
        except Exception as e:  # noqa: BLE001 - a configuration that does not compile or fit
            return row | {"error": f"{type(e).__name__}: {e}"[:300]}
        row |= {"ms": ms, "tflops": tflops(shape, ms)}
        if cublas_ms:
            row["pct_of_cublas"] = 100 * cublas_ms / ms
        return row

    def shape(self, kind: str, scaling: str, shape, candidates: list[Fp8Config] | None, scope: Scope) -> list[dict]:
        """Every candidate at one shape and scaling, beside cuBLAS; the rows measured."""
        M, N, K = shape
        qa, qw = fp8.fp8_inputs(M, N, K, scaling, seed=0)
        ref = qa.dequantize() @ qw.dequantize().T  # float64
        cub = {"scaling": scaling, "shape": list(shape)}
        try:
            once = fp8.cublas_fp8_for(qa, qw)  # the scales laid out once, as bench's yardstick
            cub["ms"] = triton.testing.do_bench(lambda: once(qa, qw), **DO_BENCH)
            cub["tflops"] = tflops(shape, cub["ms"])
        except Exception as e:  # noqa: BLE001 - cuBLAS refuses some shapes (its shape rule)
            cub["error"] = f"{type(e).__name__}: {e}"[:300]
        self.out["cublas"].append(cub)
        cublas_ms = cub.get("ms")
        rows = [self.measure(kind, scaling, shape, c, qa, qw, ref, cublas_ms, "first")
                for c in (candidates if candidates is not None else scope.candidates(kind, shape))]
        if candidates is None and scope.second_round:
            best = [Fp8Config(**r["fields"]) for r in sorted((r for r in rows if "ms" in r), key=lambda r: r["ms"])]
            rows += [self.measure(kind, scaling, shape, c, qa, qw, ref, cublas_ms, "second")
                     for c in second_round(kind, shape, best[:SECOND_ROUND])]
        self.out["measurements"] += rows
        timed = [r for r in rows if "ms" in r]
        if timed:
            best_row = min(timed, key=lambda r: r["ms"])
            default_row = next((r for r in timed if r["default"]), None)
            self.out["best"].append({
                "scaling": scaling, "shape": list(shape), "class": shape_class(*shape), "config": best_row["config"],
                "fields": best_row["fields"], "ms": best_row["ms"], "tflops": best_row["tflops"],
                "pct_of_cublas": best_row.get("pct_of_cublas"), "cublas_tflops": cub.get("tflops"),
                "default": default_config(kind, shape).label, "default_tflops": default_row and default_row["tflops"],
                "default_pct_of_cublas": default_row and default_row.get("pct_of_cublas")})
            pct = f" = {best_row['pct_of_cublas']:.0f} %" if "pct_of_cublas" in best_row else ""
            dflt = f", default {default_row['tflops']:.0f}" if default_row else ""
            print(f"{scaling:<6} {str(shape):<22} cuBLAS {cub.get('tflops', float('nan')):6.0f} | best "
                  f"{best_row['config']:<28} {best_row['tflops']:6.0f}{pct}{dflt} TFLOP/s | {len(rows)} timed, "
                  f"{time.time() - self.started:.0f} s so far", flush=True)
        failed = [r for r in rows if "error" in r]
        for r in failed[:5]:
            print(f"   {r['config']}: {r['error'][:200]}", flush=True)
        self.save()
        return rows


def class_summary(out: dict) -> dict:
    """Per scaling and shape class: the configuration best over every shape of the class (the highest
    geometric mean of % of cuBLAS among those measured at all of them), and the current default's."""
    summary: dict = {}
    for scaling in dict.fromkeys(r["scaling"] for r in out["measurements"]):
        for cls in SHAPE_CLASSES:
            rows = [r for r in out["measurements"]
                    if r["scaling"] == scaling and r["class"] == cls and "pct_of_cublas" in r]
            shapes = sorted({tuple(r["shape"]) for r in rows})
            if not shapes:
                continue
            per_config: dict[str, dict] = {}
            for r in rows:
                per_config.setdefault(r["config"], {"fields": r["fields"], "pct": {}})["pct"][tuple(r["shape"])] = r["pct_of_cublas"]

            def gmean(values):
                return math.exp(statistics.fmean(math.log(v) for v in values))

            everywhere = {k: v for k, v in per_config.items() if len(v["pct"]) == len(shapes)}
            entry = {"shapes": [list(s) for s in shapes]}
            if everywhere:
                best = max(everywhere, key=lambda k: gmean(everywhere[k]["pct"].values()))
                v = everywhere[best]
                entry["best_over_class"] = {"config": best, "fields": v["fields"],
                                            "geomean_pct_of_cublas": gmean(v["pct"].values()),
                                            "worst_pct_of_cublas": min(v["pct"].values())}
            defaults = [r for r in rows if r["default"]]
            if defaults:
                entry["current_default"] = {"configs": sorted({r["config"] for r in defaults}),
                                            "geomean_pct_of_cublas": gmean([r["pct_of_cublas"] for r in defaults]),
                                            "worst_pct_of_cublas": min(r["pct_of_cublas"] for r in defaults),
                                            "shapes_measured": len(defaults)}
            bests = [b for b in out["best"] if b["scaling"] == scaling and b["class"] == cls and b.get("pct_of_cublas")]
            if bests:
                entry["best_per_shape_geomean_pct"] = gmean([b["pct_of_cublas"] for b in bests])
            summary.setdefault(scaling, {})[cls] = entry
    return summary


def sweep(out: dict, save, scope: Scope) -> None:
    backend.require_gpu("the sweep", "times kernels (--plan lists what it would time, on any machine)")
    started = time.time()
    s = Sweep(out, save, started)
    shapes = sweep_shapes(scope)
    out |= {"shapes": {k: [list(x) for x in v] for k, v in shapes.items()}, "checks": [], "cublas": [],
            "measurements": [], "best": [], "quick": scope.quick, "scope": dataclasses.asdict(scope)}
    for scaling, kind in (("block", "block"), ("tensor", "tensor")):
        for shape in shapes.get(scaling, []):
            s.shape(kind, scaling, shape, None, scope)
    for shape in shapes.get("row", []):  # the per-tensor kernel's best at the shape, with a scale per row
        tensor_rows = sorted((r for r in out["measurements"] if r["scaling"] == "tensor" and tuple(r["shape"]) == shape
                              and "ms" in r), key=lambda r: r["ms"])
        cands = [Fp8Config(**r["fields"]) for r in tensor_rows[:ROW_CANDIDATES]] + [fp8_config(*shape)]
        s.shape("tensor", "row", shape, list(dict.fromkeys(cands)), scope)
    out["classes"] = class_summary(out)
    out["seconds"] = round(time.time() - started, 1)
    save()
    for scaling, classes in out["classes"].items():
        for cls, e in classes.items():
            b, d = e.get("best_over_class"), e.get("current_default")
            print(f"{scaling:<6} {cls:<9} ({len(e['shapes'])} shapes): "
                  + (f"best over the class {b['config']} {b['geomean_pct_of_cublas']:.0f} % "
                     f"(worst {b['worst_pct_of_cublas']:.0f} %)" if b else "no configuration measured at every shape")
                  + (f"; default {d['geomean_pct_of_cublas']:.0f} % (worst {d['worst_pct_of_cublas']:.0f} %)" if d else ""),
                  flush=True)
    print(f"sweep: {out['seconds']:.0f} s", flush=True)


# ---- host time per call -------------------------------------------------------------------------------
CALLS = {"gpu": 2000, "cpu": 20}  # calls per round (the interpreter runs the kernel on the CPU)
ROUNDS = 7


def host_callables() -> dict[str, tuple]:
    """name -> (callable of no arguments, what it is)."""
    out = {}
    for scaling, shape in (("tensor", HOST_SHAPE), ("row", HOST_SHAPE), ("block", HOST_SHAPE), ("block", HOST_BLOCK_SHAPE)):
        qa, qw = fp8.fp8_inputs(*shape, scaling, seed=0)
        at = "x".join(map(str, shape))
        out[f"triton_fp8 {scaling} {at}"] = (lambda qa=qa, qw=qw: fast_fp8.triton_fp8(qa, qw), "the manifest's stage")
        out[f"triton_fp8 wrapper alone {scaling} {at}"] = (wrapper_alone(qa, qw), "the plan's launch replaced by nothing")
        out[f"tc_7_fp8 {scaling} {at}"] = (lambda qa=qa, qw=qw: tensor_cores.tc_7_fp8(qa, qw),
                                           "stage 7 as the manifest calls it (Hopper only)")
        if scaling != "block" or shape == HOST_BLOCK_SHAPE:
            sa, sw = fp8.scaled_mm_scales(qa, qw)
            wt = qw.values.t()
            out[f"torch._scaled_mm {scaling} {at}"] = (
                lambda qa=qa, wt=wt, sa=sa, sw=sw: torch._scaled_mm(qa.values, wt, scale_a=sa, scale_b=sw,
                                                                    out_dtype=torch.bfloat16),
                "scales laid out beforehand")
            out[f"fp8.cublas_fp8 {scaling} {at}"] = (lambda qa=qa, qw=qw: fp8.cublas_fp8(qa, qw),
                                                     "the course's cuBLAS wrapper, checks on every call")
    return out


def wrapper_alone(qa, qw):
    """triton_fp8 on these operands with its plan's launch replaced by nothing: the key, the look-up,
    C's allocation and the scales' pointers - the wrapper's own host time."""
    fast_fp8.triton_fp8(qa, qw)  # makes the plan
    plan = fast_fp8.triton_fp8.plans.get(fast_fp8.fp8_plan_key(qa, qw))
    nothing = types.SimpleNamespace(launch=lambda *args: None)

    def call():
        real, plan.kernel = plan.kernel, nothing
        try:
            return fast_fp8.triton_fp8(qa, qw)
        finally:
            plan.kernel = real

    return call


def host(out: dict, save) -> None:
    gpu = backend.get().is_gpu
    calls = CALLS["gpu" if gpu else "cpu"]
    fns = host_callables()
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    out["host_errors"] = {}
    for name, (fn, _) in list(fns.items()):  # warm-up: compiles, makes the plans, fills the caches
        try:
            for _ in range(3 if not gpu else 20):
                fn()
        except Exception as e:  # noqa: BLE001 - e.g. torch._scaled_mm in blocks on the CPU: recorded, left out
            out["host_errors"][name] = f"{type(e).__name__}: {e}"[:300]
            del fns[name]
    sync()
    rounds: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, (fn, _) in fns.items():
            if name.startswith("triton_fp8 wrapper alone"):
                n = calls * (100 if not gpu else 1)
            else:
                n = calls
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            rounds[name].append((time.perf_counter() - t0) / n * 1e6)
    out["host"] = {name: {"us_per_call": statistics.median(v), "rounds_us": [round(x, 2) for x in v],
                          "what": fns[name][1]} for name, v in rounds.items()}
    out["host_calls_per_round"], out["host_rounds"] = calls, ROUNDS
    save()
    for name, r in out["host"].items():
        print(f"{name:<45} {r['us_per_call']:9.1f} us per call", flush=True)
    for name, e in out["host_errors"].items():
        print(f"{name:<45} refused: {e.splitlines()[0][:100]}", flush=True)
    if not gpu:
        print("(CPU: Triton's interpreter runs each kernel; the wrapper alone is what a GPU's call costs the host "
              "before its launch)")


# ---- what the sweep would time -----------------------------------------------------------------------
def plan(scope: Scope) -> None:
    total = 0
    for scaling, shapes in sweep_shapes(scope).items():
        kind = "block" if scaling == "block" else "tensor"
        for shape in shapes:
            if scaling == "row":
                n = ROW_CANDIDATES + 1
                print(f"{scaling:<6} {str(shape):<22} {shape_class(*shape):<9} <= {n} (the per-tensor best and the default)")
            else:
                first = scope.candidates(kind, shape)
                n = len(first) + (len(second_round(kind, shape, first[:SECOND_ROUND])) if scope.second_round else 0)
                print(f"{scaling:<6} {str(shape):<22} {shape_class(*shape):<9} {len(first)} first"
                      + (f" + {n - len(first)} second" if scope.second_round else "") + ": "
                      + ", ".join(c.label for c in first))
            total += n
    print(f"{total} timings at most")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--quick", action="store_true", help="4096^3, 8192^3 and one decode shape; one round; no rows")
    p.add_argument("--host", action="store_true", help="host time per call instead of the sweep (GPU or CPU)")
    p.add_argument("--plan", action="store_true", help="list what the sweep would time, and stop")
    p.add_argument("--class", dest="shape_class", choices=SHAPE_CLASSES, help="only the shapes of this class")
    p.add_argument("--label", help="only the candidates whose label holds this (e.g. ' s3 tma') and the defaults; "
                                   "one round")
    args = p.parse_args()
    scope = Scope(args.quick, args.shape_class, args.label)
    if args.plan:
        plan(scope)
        return 0
    if args.out is None:
        p.error("--out PATH is needed (the raw log)")
    out = {"provenance": provenance("host" if args.host else "sweep")}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")

    if args.host:
        host(out, save)
    else:
        sweep(out, save, scope)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
