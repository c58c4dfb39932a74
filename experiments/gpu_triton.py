"""Stage 04 on the H200: check the Triton stages, sweep the fast kernel's configs, re-run the article's
experiment and gather the compiler evidence that explains it.

Run from the repository root on the GPU machine (H200 image: Python 3.12, torch 2.11, Triton 3.6):

    COURSE_BACKEND=gpu PYTHONPATH=. OUT=/root/out python3 experiments/gpu_triton.py

It finishes in about 3-4 minutes (``--budget`` caps the whole run, default 320 s; a section that
runs out of time says what it skipped). In order:

1. correctness (parallel, 1 process per CPU core up to 12): ``course_lib.check`` of every Triton
   stage x dtype on the GPU shapes; meanwhile the same processes compile every sweep candidate and
   article's kernel once at a small shape with the same JIT specialisation as 4096/8192, which fills
   Triton's on-disk cache so the timing phase does not wait for compilers;
2. the article experiment (8192x6144 @ 6144x4096, fp32): BLOCK_SIZE 32 and 64, ``ieee`` and ``tf32``,
   Y as given vs Y pre-transposed (timed with the copy, as the article did, and without it), each
   side by side with cuBLAS of the same precision;
3. compiler evidence for those kernels (Triton 3.6 on sm_90a): TTGIR/PTX/SASS counts — tensor-core
   (wgmma) vs FMA instructions, cp.async widths, shared loads/stores by width, layout conversions,
   registers, spills, shared memory;
4. the sweep: every candidate of ``SWEEP`` per dtype at 4096^3 and 8192^3, each timed in
   alternating rounds with cuBLAS on the same inputs (``course_lib.timing.time_fn``: CUDA events,
   L2 flushed, median), plus for TF32 the kernel alone when B^T is already stored;
5. the top candidates per dtype re-measured with ``course_lib.bench.measure`` (fresh inputs, the
   recording method) at 4096/8192 and at three non-square shapes of the course's size sweep;
6. only when ``--sections`` names ``repeat``: ``--repeat`` independent ``bench.measure`` records each
   of the registered (autotuned) ``triton_fast`` and of cuBLAS timed against itself at 4096^3 and
   8192^3, interleaved — how far apart recordings land, to tell a gap of a few per cent from noise.

Files written under $OUT (default ./gpu_triton_out; 6 files, no subfolders):
  results.json          everything above as data (records have the keys of course_lib.bench.measure)
  summary.txt           the compact tables printed at the end
  paste_fast_configs.py the best candidates per dtype as a FAST_CONFIGS literal, ready to paste into
                        course_lib/kernels/coalescing_and_triton/fast_configs.py
  article_ttgir.txt        TTGIR of the article's kernels (BLOCK_SIZE 64 and 32, ieee/tf32, plain/transposed)
  article_sass.txt         SASS of the BLOCK_SIZE 64 article's kernels
  fast_ttgir.txt        TTGIR + resource summary of the best fast config per dtype

Optional, afterwards: shared-memory bank conflicts and pipe use of the article's kernels with Nsight Compute.
``--ncu-article`` launches each of the 8 seed variants once to compile them, then once more; the
``--launch-skip 8 --launch-count 8`` below profiles the second round. First the counters that answer
"bank conflicts or not" (the names work on Hopper with recent ncu versions):

    COURSE_BACKEND=gpu PYTHONPATH=. ncu --clock-control none --kernel-name regex:tiled_matmul \
      --launch-skip 8 --launch-count 8 --metrics gpu__time_duration.sum,\
    l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,\
    l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,\
    l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,\
    l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
    smsp__inst_executed_op_shared_ld.sum,\
    sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
      python3 experiments/gpu_triton.py --ncu-article > $OUT/ncu_article_banks.txt

then pipe utilisation and stall reasons through ncu's own sections (stable names, no metric guessing):

    COURSE_BACKEND=gpu PYTHONPATH=. ncu --clock-control none --kernel-name regex:tiled_matmul \
      --launch-skip 8 --launch-count 8 --section SpeedOfLight --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
      python3 experiments/gpu_triton.py --ncu-article > $OUT/ncu_article_sections.txt

If ncu rejects a metric name, ``ncu --query-metrics | grep -i -e bank -e wavefronts`` lists this
version's names.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import re
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

import course_lib
from course_lib import backend, bench, timing
from course_lib import dtypes
from course_lib.gemm import flops, prepare, random_inputs
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.kernels.coalescing_and_triton import FastConfig as F
from course_lib.kernels.coalescing_and_triton import article, autotune, fast_configs, fast_launch, tiled

STAGES = ("triton_fast", "triton_tiled_descriptors", "triton_tiled", "triton_tiled_transposed_b")
DTYPES = ("tf32", "fp16", "bf16", "fp32")
SIZES = (4096, 8192)

# ---- the candidates ------------------------------------------------------------------------------
# Every entry was compiled for sm_90a with Triton 3.6 and 3.9 on a CPU machine (no GPU; Triton ships
# ptxas): all fit in the H200's 227 KiB of shared memory per block and none spills registers with
# Triton 3.6 (fp32 with descriptors does with 3.9: ~5 KB of stack). "nk" = B^T copied inside the call
# (the copy is timed); the first entries are the module's current FAST_CONFIGS.
def _with_current(extra: list[F], dtype: str) -> list[F]:
    return list(c04.FAST_CONFIGS[dtype]) + [c for c in extra if c not in c04.FAST_CONFIGS[dtype]]


# The first sweep (2026-11-29 13:40 UTC, in the experiments file) tried the tutorial-style
# non-persistent configs, 256 x 128 tiles, GROUP_M 4/16 and pointer loads; the second (14:46 UTC)
# grouping and tile shape of the persistent loop; their winners are FAST_CONFIGS. The third to fifth
# rounds (2026-11-30 19:26, 19:59 and 21:24 UTC, "third/fourth/fifth_sweep_fp32") took fp32 from
# pointer loads with 64 x 128 tiles (82-85 %) to descriptors with 64 x 64 x 64 tiles and 2 stages
# (90.5 / 94.2 %); larger tiles, 8 or 2 warps, more stages and K slices of 16 or 128 were slower.
# The sixth round (2026-11-30 22:46 and 22:51 UTC, "sixth_sweep" and "sixth_sweep_fp32_b"; code as
# measured: commits 558ffa1 and a6ea4af, whose FastConfig had the knobs named here) tried Triton's
# automatic warp specialisation of the 16-bit persistent loop (slower; of four configs one did not
# compile with Triton 3.6 and one returned NaN), for fp32 a register cap, 2 stages of K slices of 32, the persistent loop with 2
# programs per SM and pointer stores for C (none faster), and for fp32 the split C store, which fits
# a 5th program per SM (+~1 %: FAST_CONFIGS["fp32"][0] since). The seventh round (2026-12-01
# 00:24 UTC, "seventh_sweep_16bit") tried, for 16-bit types, cuBLAS's own tile at 4096^3 (Nsight
# Compute names its kernel nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA: 256 x 128 x 64, 4 stages,
# clusters of 1 x 2; 89-92 % in Triton), K slices of 128 with 2 stages (70 %), GROUP_M 4 / 16 with the
# 4-stage split epilogue (95-97 %) and 3 stages with the split epilogue (98.1-98.5 %: the first 16-bit
# candidate since). All compile for sm_90a with Triton 3.9 offline within 229,408 bytes of shared
# memory. The list below is what to re-run.
_16BIT_EXTRA = [
    F(256, 128, 64, 8, 8, 4, persistent=True, epilogue_split=2),
    F(256, 128, 64, 8, 8, 3, persistent=True),
    F(128, 256, 64, 8, 8, 3, persistent=True, epilogue_split=2),
    F(128, 256, 128, 8, 8, 2, persistent=True, epilogue_split=2),
    F(128, 256, 64, 16, 8, 4, persistent=True, epilogue_split=2),
    F(128, 256, 64, 4, 8, 4, persistent=True, epilogue_split=2),
]
SWEEP: dict[str, list[F]] = {
    "fp16": _with_current(_16BIT_EXTRA, "fp16"),
    "bf16": _with_current(_16BIT_EXTRA, "bf16"),
    "tf32": _with_current([F(128, 128, 32, 8, 8, 4, b_layout="nk")], "tf32"),
    "fp32": _with_current([
        F(64, 64, 64, 8, 4, 2, epilogue_split=2),
        F(64, 64, 64, 8, 4, 2),
    ], "fp32"),
}
ARTICLE_VARIANTS = [(p, bs, v) for bs in (64, 32) for p in ("ieee", "tf32") for v in ("plain", "transposed")]
EXTRA_SHAPES = ((8192, 6144, 4096), (3000, 3000, 3000), (8192, 2048, 4096))  # from bench.SWEEP_SHAPES


class Clock:
    def __init__(self, budget: float) -> None:
        self.t0, self.budget = time.time(), budget

    def elapsed(self) -> float:
        return time.time() - self.t0

    def left(self) -> float:
        return self.budget - self.elapsed()


def log(msg: str) -> None:
    print(msg, flush=True)


# ==== 1. correctness and compile warm-up, in parallel processes ==================================
def _job_check(name: str, dtype: str) -> dict[str, Any]:
    t0 = time.time()
    try:
        rep = course_lib.check(name, dtype, seed=1234)
        w = rep.worst
        return {"stage": name, "dtype": dtype, "ok": True, "shapes": len(rep.results),
                "worst_shape": list(w.shape), "worst_rel_error": w.rel_error, "tolerance": w.tolerance,
                "seconds": round(time.time() - t0, 1)}
    except Exception as e:  # noqa: BLE001 - returned and reported, never hidden
        return {"stage": name, "dtype": dtype, "ok": False, "error": f"{type(e).__name__}: {e}"[:3000],
                "seconds": round(time.time() - t0, 1)}


def _job_warm_fast(dtype: str, cfg_dict: dict[str, Any]) -> dict[str, Any]:
    """Compile one candidate at 256^3: every dimension and stride divisible by 16, like 4096 and
    8192, so the JIT specialisation (and Triton's cache entry) is the one the sweep will use.
    Returns what Triton reports about the compiled kernel (registers, spills, shared memory)."""
    cfg = F(**cfg_dict)
    try:
        a, b = random_inputs(256, 256, 256, dtype, seed=0)
        ops = prepare(a, b, stage="triton_fast", dtypes=(dtype,))
        c = torch.full((256, 256), float("nan"), dtype=a.dtype, device=a.device)  # poisoned first
        ck, _ = fast_launch.launch_fast(ops, dtype, cfg, c)
        if cfg.b_layout == "nk":  # the kernel-only form (B^T given) has the same strides: cached too
            c04.fast_matmul(a, b.T.contiguous().T, dtype, cfg)
        err = float(torch.linalg.norm(c.double() - (a.double() @ b.double())) / torch.linalg.norm(a.double() @ b.double()))
        return {"dtype": dtype, "config": cfg.label, "ok": err < dtypes.get(dtype).sanity, "rel_error": err,
                "registers": getattr(ck, "n_regs", None), "spills": getattr(ck, "n_spills", None),
                "shared_bytes": ck.metadata.shared, "warps": ck.metadata.num_warps}
    except Exception as e:  # noqa: BLE001
        return {"dtype": dtype, "config": cfg.label, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}


def _job_warm_article(precision: str, block: int, variant: str) -> dict[str, Any]:
    try:
        x = torch.randn(256, 192, device="cuda")
        y = torch.randn(192, 128, device="cuda")
        yy = y.T.contiguous().T if variant == "transposed" else y
        article.article_experiment_gemm(x, yy, block_size=block, input_precision=precision, transposed_y=variant == "transposed")
        return {"article": [precision, block, variant], "ok": True}
    except Exception as e:  # noqa: BLE001
        return {"article": [precision, block, variant], "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}


def _run_job(job: tuple) -> dict[str, Any]:
    kind, *args = job
    return {"check": _job_check, "fast": _job_warm_fast, "article": _job_warm_article}[kind](*args)


def phase_parallel(clock: Clock, budget: float, skip_checks: bool, with_seed: bool = True) -> tuple[list, list]:
    jobs: list[tuple] = []
    if not skip_checks:
        jobs += [("check", s, d) for s in STAGES for d in DTYPES]
    seen = set()
    for d, cands in SWEEP.items():
        for cfg in cands:
            key = (d, cfg)
            if key not in seen:
                seen.add(key)
                jobs.append(("fast", d, cfg.as_dict()))
    if with_seed:
        jobs += [("article", p, bs, v) for p, bs, v in ARTICLE_VARIANTS]
    workers = max(1, min(12, (os.cpu_count() or 2) - 2))
    log(f"[1] {len(jobs)} jobs (checks + compile warm-up) on {workers} processes")
    results: list[dict] = []
    deadline = time.time() + budget
    pool = None
    try:
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
        futures = [pool.submit(_run_job, j) for j in jobs]
        for fut in cf.as_completed(futures, timeout=max(1.0, deadline - time.time())):
            r = fut.result()
            results.append(r)
            if "stage" in r:
                state = "ok  " if r["ok"] else "FAIL"
                log(f"    check {state} {r['stage']:<27}{r['dtype']:<5} {r.get('seconds', 0):5.1f} s"
                    + ("" if r["ok"] else f"  {r['error'][:300]}"))
            elif not r["ok"]:
                log(f"    warm-up FAILED {r}")
        pool.shutdown(wait=True)
    except cf.TimeoutError:
        log(f"    [1] budget of {budget:.0f} s spent; unfinished jobs are reported as not run")
        pool.shutdown(wait=False, cancel_futures=True)
        for child in mp.active_children():  # this script's own pool workers
            child.terminate()
    except Exception:  # noqa: BLE001 - fall back to checking in this process
        log("    process pool failed; checking in this process instead:\n" + traceback.format_exc())
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for j in jobs:
            if j[0] == "check" and clock.left() > 0:
                results.append(_run_job(j))
    done_checks = {(r["stage"], r["dtype"]) for r in results if "stage" in r}
    checks = [r for r in results if "stage" in r] + [
        {"stage": s, "dtype": d, "ok": None, "error": "not run (time budget)"}
        for _, s, d in (j for j in jobs if j[0] == "check") if (s, d) not in done_checks
    ]
    warm = [r for r in results if "stage" not in r]
    log(f"[1] done at {clock.elapsed():.0f} s")
    return checks, warm


# ==== timing side by side with cuBLAS ============================================================
def side_by_side(fn: Callable[[], Any], ref: Callable[[], Any], label: str, dtype: str,
                 shape: tuple[int, int, int], rounds: int = 2, budget_ms: float = 40.0) -> dict[str, Any]:
    """course_lib.bench.measure's method on inputs the caller made once: alternating rounds of
    bench.time_fn (CUDA events, L2 flushed before each run), medians, ratio to cuBLAS."""
    c, r = fn(), ref()
    err = float(torch.linalg.norm(c.double() - r.double()) / torch.linalg.norm(r.double()).clamp_min(1e-30))
    if not err <= dtypes.get(dtype).sanity:
        raise AssertionError(f"{label} ({dtype}) at {shape} differs from cuBLAS by {err:.2e}; not timed")
    del c, r
    mine, theirs = [], []
    for _ in range(rounds):
        mine.append(timing.time_fn(fn, budget_ms=budget_ms))
        theirs.append(timing.time_fn(ref, budget_ms=budget_ms))
    ms = statistics.median(t.median_ms for t in mine)
    cms = statistics.median(t.median_ms for t in theirs)
    M, N, K = shape
    tf, ctf = flops(M, N, K) / (ms * 1e-3) / 1e12, flops(M, N, K) / (cms * 1e-3) / 1e12
    return {"stage": label, "dtype": dtype, "M": M, "N": N, "K": K, "ms": ms,
            "ms_p20": min(t.p20_ms for t in mine), "ms_p80": max(t.p80_ms for t in mine),
            "tflops": tf, "cublas_ms": cms, "cublas_tflops": ctf, "ratio_to_cublas": tf / ctf,
            "runs": sum(t.runs for t in mine), "rel_error_vs_cublas": err}


def _cublas(dtype: str, a: torch.Tensor, b: torch.Tensor) -> Callable[[], Any]:
    fn = course_lib.get_stage("cublas").gemm(dtype)
    return lambda: fn(a, b)


# ==== 2 + 3. the article experiment and its evidence ================================================
_SASS_OP = re.compile(r"^[^\t]*\t(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)", re.M)


def evidence(compiled: Any) -> dict[str, Any]:
    """Counts that say what the compiler made of a kernel (Triton's CompiledKernel)."""
    ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    cp = collections.Counter(re.findall(r"cp\.async\.c[ag]\.shared\.global(?:\.L2::\w+)? \[[^\]]*\], \[[^\]]*\], (0x\w+|\d+)", ptx))
    out: dict[str, Any] = {
        "ttgir_warp_group_dot": len(re.findall(r"ttng\.warp_group_dot ", ttgir)),
        "ttgir_fma_dot (tt.dot left for FMA)": len(re.findall(r"= tt\.dot ", ttgir)),
        "ttgir_convert_layout": ttgir.count("ttg.convert_layout"),
        "ttgir_local_load": ttgir.count("ttg.local_load"),
        "ttgir_local_alloc": ttgir.count("ttg.local_alloc"),
        "ttgir_memdesc_trans": ttgir.count("memdesc_trans"),
        "ttgir_K_major_smem (transposed = true)": ttgir.count("transposed = true"),
        "ptx_wgmma": ptx.count("wgmma.mma_async"),
        "ptx_mma_sync": ptx.count("mma.sync"),
        "ptx_fma_f32": len(re.findall(r"\bfma\.rn\.f32\b", ptx)),
        "ptx_cp_async_by_bytes": {str(int(k, 0)): v for k, v in sorted(cp.items())},
        "ptx_tma_loads": ptx.count("cp.async.bulk.tensor"),
        "ptx_ld_shared_by_width": dict(sorted(collections.Counter(re.findall(r"ld\.shared((?:\.v\d)?\.\w+)", ptx)).items())),
        "ptx_st_shared_by_width": dict(sorted(collections.Counter(re.findall(r"st\.shared((?:\.v\d)?\.\w+)", ptx)).items())),
        "registers": getattr(compiled, "n_regs", None),
        "spills": getattr(compiled, "n_spills", None),
        "shared_bytes": compiled.metadata.shared,
        "num_warps": compiled.metadata.num_warps,
        "num_stages": compiled.metadata.num_stages,
    }
    try:
        sass = compiled.asm["sass"]
        ops = collections.Counter(_SASS_OP.findall(sass))
        keep = ("FFMA", "HGMMA", "LDS", "STS", "LDSM", "LDGSTS", "LDG", "STG", "UTMALDG", "UTMASTG", "BAR", "SHFL", "LDL", "STL", "MOV", "PRMT")
        out["sass_ops"] = {k: v for k, v in sorted(ops.items()) if k.split(".")[0] in keep}
        out["sass_total"] = sum(ops.values())
    except Exception as e:  # noqa: BLE001 - SASS needs cuobjdump; the counts above stand without it
        out["sass_ops"] = f"unavailable: {type(e).__name__}: {e}"[:300]
    return out


def phase_article(clock: Clock, budget: float, files: dict[str, list[str]]) -> tuple[list, list]:
    M, N, K = article.ARTICLE_SHAPE
    g = torch.Generator(device="cuda").manual_seed(6144)
    x = torch.randn(M, K, device="cuda", generator=g)
    y = torch.randn(K, N, device="cuda", generator=g)
    yt = y.T.contiguous()
    records, evid = [], []
    stop = time.time() + budget
    log(f"[2] article experiment {M}x{K} @ {K}x{N} fp32 (course names M={M}, N={N}, K={K})")
    for precision, bs, variant in ARTICLE_VARIANTS:
        dtype = "fp32" if precision == "ieee" else "tf32"
        forms = [("plain", y, False)] if variant == "plain" else [("transposed+copy", y, True), ("transposed", yt.T, True)]
        for form, yy, tr in forms:
            label = f"article:{form}:BLOCK_SIZE={bs}"
            if time.time() > stop:
                records.append({"stage": label, "dtype": dtype, "skipped": "time budget"})
                continue
            try:
                fn = lambda yy=yy, tr=tr: article.article_experiment_gemm(x, yy, block_size=bs, input_precision=precision, transposed_y=tr)  # noqa: E731
                r = side_by_side(fn, _cublas(dtype, x, y), label, dtype, (M, N, K))
                records.append(r)
                log(f"    {label:<38}{dtype:<5}{r['tflops']:8.1f} TF  ({100 * r['ratio_to_cublas']:5.1f}% of cuBLAS {r['cublas_tflops']:.1f})")
            except Exception as e:  # noqa: BLE001
                records.append({"stage": label, "dtype": dtype, "error": f"{type(e).__name__}: {e}"[:2000]})
                log(f"    {label} {dtype} FAILED: {e}")
        # evidence: launch the kernel once more directly to get Triton's compiled object
        try:
            cfg = tiled.TileConfig(bs, bs, bs)
            ops = prepare(x, y if variant == "plain" else yt.T, stage="article", dtypes=(dtype,))
            if variant == "plain":
                _, ck = tiled.launch_tiled_matmul(ops, dtype, cfg, "article")
            else:
                _, ck = article.launch_transposed_b(ops, yt, dtype, cfg, "article")
            e = {"precision": precision, "block_size": bs, "variant": variant, **evidence(ck)}
            evid.append(e)
            files["article_ttgir.txt"].append(f"// ===== article {variant} BLOCK_SIZE={bs} input_precision={precision} =====\n{ck.asm['ttgir']}")
            if bs == 64 and isinstance(e.get("sass_ops"), dict):
                files["article_sass.txt"].append(f"// ===== article {variant} BLOCK_SIZE={bs} input_precision={precision} =====\n{ck.asm['sass'][:400_000]}")
        except Exception as e:  # noqa: BLE001
            evid.append({"precision": precision, "block_size": bs, "variant": variant, "error": f"{type(e).__name__}: {e}"[:2000]})
    del x, y, yt
    torch.cuda.empty_cache()
    log(f"[2] done at {clock.elapsed():.0f} s")
    return records, evid


# ==== 4. the sweep ===============================================================================
def phase_sweep(clock: Clock, budget: float, warm: list[dict] | None = None) -> tuple[list, list]:
    stop = time.time() + budget
    # A candidate whose compile failed in the warm-up (or crashed the compiler) is not launched here.
    failed_warm_up = {(w["dtype"], w["config"]): w.get("error", "wrong result") for w in warm or [] if not w.get("ok")}
    records: list[dict] = []
    extra: list[dict] = []
    inputs: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}

    def operands(dtype: str, n: int):
        if (dtype, n) not in inputs:
            g = torch.Generator(device="cuda").manual_seed(n)
            a = torch.randn(n, n, device="cuda", generator=g).to(dtypes.get(dtype).torch_dtype)
            b = torch.randn(n, n, device="cuda", generator=g).to(dtypes.get(dtype).torch_dtype)
            inputs[(dtype, n)] = (a, b)
        return inputs[(dtype, n)]

    # How long B^T's copy takes alone (what "nk" pays on every call): torch's copy, and the course's
    # transpose kernel with its default and two other tile shapes.
    for n in SIZES if "tf32" in DTYPES else ():
        a, b = operands("tf32", n)
        ways = [("b.T.contiguous()", lambda: b.T.contiguous())]
        for block, warps in ((fast_configs.TRANSPOSE_BLOCK, fast_configs.TRANSPOSE_WARPS), ((32, 32), 4), ((64, 64), 8), ((128, 32), 4)):
            ways.append((f"course_lib transpose {block[0]}x{block[1]} w{warps}",
                         lambda block=block, warps=warps: c04.transpose(b, block, warps)))
        assert torch.equal(c04.transpose(b), b.T), "transpose kernel is wrong"
        for what, fn in ways:
            t = timing.time_fn(fn, budget_ms=40)
            extra.append({"what": f"{what} fp32 {n}x{n}", "ms": t.median_ms,
                          "GB/s (read+write)": 2 * b.numel() * 4 / (t.median_ms * 1e-3) / 1e9})
            log(f"    {extra[-1]['what']:<50}{t.median_ms:8.3f} ms {extra[-1]['GB/s (read+write)']:8.0f} GB/s")
    longest = max(len(v) for v in SWEEP.values())
    log(f"[4] sweep: {sum(len(v) for v in SWEEP.values())} candidates x {SIZES}")
    for i in range(longest):  # round-robin over dtypes: a short budget cuts every dtype's tail evenly
        for dtype in DTYPES:
            if i >= len(SWEEP[dtype]):
                continue
            cfg = SWEEP[dtype][i]
            for n in SIZES:
                label = f"triton_fast[{cfg.label}]"
                if time.time() > stop:
                    records.append({"stage": label, "dtype": dtype, "M": n, "N": n, "K": n, "config": cfg.as_dict(), "skipped": "time budget"})
                    continue
                if (dtype, cfg.label) in failed_warm_up:
                    records.append({"stage": label, "dtype": dtype, "M": n, "N": n, "K": n, "config": cfg.as_dict(),
                                    "skipped": f"warm-up failed: {failed_warm_up[(dtype, cfg.label)][:300]}"})
                    log(f"    {dtype:<5}{n:>5}  {cfg.label:<44}skipped (warm-up failed)")
                    continue
                a, b = operands(dtype, n)
                try:
                    r = side_by_side(lambda: c04.fast_matmul(a, b, dtype, cfg), _cublas(dtype, a, b), label, dtype, (n, n, n))
                    r["config"] = cfg.as_dict()
                    records.append(r)
                    log(f"    {dtype:<5}{n:>5}  {cfg.label:<44}{r['tflops']:7.1f} TF  {100 * r['ratio_to_cublas']:6.1f}%")
                    if cfg.b_layout == "nk":  # the same kernel when B^T is already stored (no copy)
                        bt_view = b.T.contiguous().T
                        k = side_by_side(lambda: c04.fast_matmul(a, bt_view, dtype, cfg), _cublas(dtype, a, b),
                                         label + " kernel only (B^T stored)", dtype, (n, n, n))
                        k["config"] = cfg.as_dict()
                        k["kernel_only"] = True
                        records.append(k)
                        log(f"    {'':<10} {'  ... B^T already stored':<44}{k['tflops']:7.1f} TF  {100 * k['ratio_to_cublas']:6.1f}%")
                        del bt_view
                except Exception as e:  # noqa: BLE001
                    records.append({"stage": label, "dtype": dtype, "M": n, "N": n, "K": n, "config": cfg.as_dict(),
                                    "error": f"{type(e).__name__}: {e}"[:2000]})
                    log(f"    {dtype:<5}{n:>5}  {cfg.label:<44}FAILED {type(e).__name__}: {str(e)[:200]}")
    inputs.clear()
    torch.cuda.empty_cache()
    log(f"[4] done at {clock.elapsed():.0f} s")
    return records, extra


def ranking(records: list[dict]) -> dict[str, list[tuple[float, F, dict]]]:
    """Per dtype: candidates measured at every size, ranked by their worst ratio to cuBLAS."""
    by: dict[tuple[str, F], dict[int, float]] = collections.defaultdict(dict)
    for r in records:
        if "tflops" in r and not r.get("kernel_only"):
            by[(r["dtype"], F(**r["config"]))][r["M"]] = r["ratio_to_cublas"]
    out: dict[str, list] = collections.defaultdict(list)
    for (dtype, cfg), ratios in by.items():
        if set(ratios) == set(SIZES):
            out[dtype].append((min(ratios.values()), cfg, ratios))
    for v in out.values():
        v.sort(key=lambda t: -t[0])
    return out


def paste_configs(ranked: dict[str, list]) -> str:
    lines = ["# Measured by experiments/gpu_triton.py on the H200; ranked by the worse of the two ratios to cuBLAS",
             "# (4096^3 and 8192^3, timed side by side). Paste over FAST_CONFIGS in",
             "# course_lib/kernels/coalescing_and_triton/fast_configs.py.",
             "FAST_CONFIGS: dict[str, tuple[FastConfig, ...]] = {"]
    for dtype in ("fp16", "bf16", "tf32", "fp32"):
        lines.append(f'    "{dtype}": (')
        for worst, cfg, ratios in ranked.get(dtype, [])[:3]:
            d = cfg.as_dict()
            default = F(16, 16, 16).as_dict()
            args = [str(d["block_m"]), str(d["block_n"]), str(d["block_k"])]
            args += [f"{k}={d[k]!r}" for k in ("group_m", "num_warps", "num_stages", "b_layout", "loads", "persistent", "epilogue_split")
                     if k in ("group_m", "num_warps", "num_stages") or d[k] != default[k]]
            got = ", ".join(f"{n}: {100 * ratios[n]:.1f}%" for n in SIZES)
            lines.append(f"        FastConfig({', '.join(args)}),  # {got} of cuBLAS")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ==== 5. official re-measurement of the winners ===================================================
def phase_confirm(clock: Clock, budget: float, ranked: dict[str, list], files: dict[str, list[str]]) -> tuple[list, list]:
    stop = time.time() + budget
    records, fast_evidence = [], []
    for dtype in DTYPES:
        if not ranked.get(dtype):
            continue
        worst, cfg, _ = ranked[dtype][0]
        # evidence for the winner: 512^3 has the JIT specialisation of 4096^3 (all divisible by 16)
        try:
            a, b = random_inputs(512, 512, 512, dtype, seed=0)
            ops = prepare(a, b, stage="t", dtypes=(dtype,))
            c = torch.empty(512, 512, dtype=dtypes.get(dtype).torch_dtype, device="cuda")
            ck, used = fast_launch.launch_fast(ops, dtype, cfg, c)
            e = {"dtype": dtype, "config": cfg.label, "descriptors_used": used, **evidence(ck)}
            fast_evidence.append(e)
            files["fast_ttgir.txt"].append(f"// ===== triton_fast {dtype} {cfg.label} =====\n// {json.dumps({k: v for k, v in e.items() if k != 'sass_ops'})}\n{ck.asm['ttgir']}")
            del a, b, c
        except Exception as e:  # noqa: BLE001
            fast_evidence.append({"dtype": dtype, "config": cfg.label, "error": f"{type(e).__name__}: {e}"[:2000]})
        shapes = [(n, n, n) for n in SIZES] + list(EXTRA_SHAPES)
        for shape in shapes:
            if time.time() > stop:
                records.append({"stage": f"triton_fast[{cfg.label}]", "dtype": dtype, "shape": list(shape), "skipped": "time budget"})
                continue
            try:
                r = bench.measure(lambda a, b: c04.fast_matmul(a, b, dtype, cfg), dtype, shape, rounds=2, budget_ms=50)
                r["stage"] = f"triton_fast[{cfg.label}]"
                r["config"] = cfg.as_dict()
                records.append(r)
                log(f"    measure {dtype:<5}{str(shape):<20}{cfg.label:<44}{r['tflops']:7.1f} TF  {100 * r['ratio_to_cublas']:6.1f}%")
            except Exception as e:  # noqa: BLE001
                records.append({"stage": f"triton_fast[{cfg.label}]", "dtype": dtype, "shape": list(shape), "error": f"{type(e).__name__}: {e}"[:2000]})
    torch.cuda.empty_cache()
    log(f"[5] done at {clock.elapsed():.0f} s")
    return records, fast_evidence


# ==== 6. repeated recordings of the registered stage (how far apart independent measurements are) ==
def phase_repeat(clock: Clock, budget: float, times: int) -> list[dict]:
    """``times`` independent ``bench.measure`` records (the recording's method and inputs) of the
    registered ``triton_fast`` (autotuned) and of cuBLAS timed against itself, per dtype and size,
    interleaved, so that a gap of a few per cent can be told from the spread of the measurement."""
    stop = time.time() + budget
    out: list[dict] = []
    for dtype in DTYPES:
        for n in SIZES:
            ratios: dict[str, list[float]] = {"triton_fast": [], "cublas": []}
            for _ in range(times):
                for stage in ratios:
                    if time.time() > stop:
                        break
                    r = bench.measure(stage, dtype, (n, n, n))
                    ratios[stage].append(r["ratio_to_cublas"])
            tuned = [cfg.label for key, cfg in autotune.tuned_configs().items() if key[:4] == (dtype, n, n, n)]
            row = {"dtype": dtype, "M": n, "N": n, "K": n, "triton_fast_config": tuned}
            for stage, v in ratios.items():
                row[stage] = {"ratios": v, "median": statistics.median(v) if v else None,
                              "min": min(v, default=None), "max": max(v, default=None)}
            out.append(row)
            log(f"    repeat {dtype:<5}{n:>5}  triton_fast {tuned}: " + "  ".join(
                f"{st} median {100 * row[st]['median']:.1f}% [{100 * row[st]['min']:.1f}, {100 * row[st]['max']:.1f}] (n={len(v)})"
                for st, v in ratios.items() if v))
    log(f"[6] done at {clock.elapsed():.0f} s")
    return out


# ==== summary ====================================================================================
def summary(checks, seed, seed_ev, ranked, confirm, extra, warm) -> str:
    out = []
    ok = sum(1 for c in checks if c.get("ok"))
    out.append(f"CHECKS: {ok}/{len(checks)} stage x dtype passed on the GPU shapes")
    out += [f"  {c['stage']} {c['dtype']}: {'not run' if c.get('ok') is None else 'FAILED'}: {c.get('error', '')[:200]}"
            for c in checks if not c.get("ok")]
    bad_warm = [w for w in warm if not w.get("ok")]
    if bad_warm:
        out.append(f"WARM-UP FAILURES: {len(bad_warm)}")
        out += [f"  {w}"[:300] for w in bad_warm]
    compiled = [w for w in warm if w.get("ok") and w.get("registers") is not None]
    if compiled:
        out.append("COMPILED (sweep candidates): warps, registers per thread, spills, shared memory")
        out += [f"  {w['dtype']:<5}{w['config']:<50}{w['warps']:>3} warps {w['registers']:>4} regs "
                f"{w['spills']:>4} spills {w['shared_bytes'] // 1024:>4} KiB" for w in compiled]
    out.append("")
    out.append("SEED EXPERIMENT (8192x6144 @ 6144x4096 fp32), TFLOP/s and % of cuBLAS in the same run")
    out.append(f"  {'variant':<40}{'dtype':<6}{'TF':>8}{'%cuBLAS':>9}")
    for r in seed:
        if "tflops" in r:
            out.append(f"  {r['stage']:<40}{r['dtype']:<6}{r['tflops']:8.1f}{100 * r['ratio_to_cublas']:8.1f}%")
        else:
            out.append(f"  {r['stage']:<40}{r['dtype']:<6}  {r.get('error', r.get('skipped', ''))[:80]}")
    out.append("")
    out.append("SEED EVIDENCE (Triton on the H200, per kernel)")
    cols = ["ptx_wgmma", "ptx_fma_f32", "ptx_cp_async_by_bytes", "ptx_ld_shared_by_width", "ttgir_convert_layout", "ttgir_K_major_smem (transposed = true)", "registers", "spills", "shared_bytes"]
    for e in seed_ev:
        head = f"  {e['variant']:<11}bs={e['block_size']:<3}{e['precision']:<5}"
        out.append(head + ("  " + e["error"][:150] if "error" in e else "  " + ", ".join(f"{c.split(' ')[0]}={e.get(c)}" for c in cols)))
    out.append("")
    out.append("SWEEP (fast kernel), best 3 per dtype by the worse ratio of 4096^3 / 8192^3")
    for dtype in DTYPES:
        for worst, cfg, ratios in ranked.get(dtype, [])[:3]:
            out.append(f"  {dtype:<5}{cfg.label:<46}" + "  ".join(f"{n}: {100 * ratios[n]:5.1f}%" for n in SIZES))
    bars = {"fp16": 1.00, "bf16": 1.00, "fp32": 0.95, "tf32": 0.90}
    out.append("")
    out.append("BARS (issue 5): " + ", ".join(
        f"{d} {'MET' if ranked.get(d) and ranked[d][0][0] >= bars[d] else 'not met'} ({100 * ranked[d][0][0]:.1f}% vs {100 * bars[d]:.0f}%)"
        if ranked.get(d) else f"{d}: no data" for d in DTYPES))
    out.append("")
    out.append("CONFIRMED with course_lib.bench.measure (fresh inputs), winners per dtype")
    for r in confirm:
        if "tflops" in r:
            out.append(f"  {r['dtype']:<5}{r['M']:>6}{r['N']:>6}{r['K']:>6}  {r['tflops']:7.1f} TF  {100 * r['ratio_to_cublas']:6.1f}%  {r['stage']}")
        else:
            out.append(f"  {r['dtype']:<5}{str(r.get('shape')):<20}  {r.get('error', r.get('skipped', ''))[:100]}")
    for e in extra:
        out.append(f"  {e['what']}: {e['ms']:.3f} ms ({e['GB/s (read+write)']:.0f} GB/s)")
    return "\n".join(out)


def ncu_article() -> int:
    """Launch each seed variant once after a warm-up launch (for ncu; see the module docstring)."""
    M, N, K = article.ARTICLE_SHAPE
    x = torch.randn(M, K, device="cuda")
    y = torch.randn(K, N, device="cuda")
    yt = y.T.contiguous()
    calls = []
    for precision, bs, variant in ARTICLE_VARIANTS:
        yy = y if variant == "plain" else yt.T
        calls.append(lambda yy=yy, p=precision, bs=bs, v=variant: article.article_experiment_gemm(
            x, yy, block_size=bs, input_precision=p, transposed_y=v == "transposed"))
    for call in calls:  # warm-up: compile and launch once (ncu --launch-skip 8 skips these)
        call()
    torch.cuda.synchronize()
    for (precision, bs, variant), call in zip(ARTICLE_VARIANTS, calls):
        print(f"ncu launch: article {variant} BLOCK_SIZE={bs} input_precision={precision}", flush=True)
        call()
        torch.cuda.synchronize()
    return 0


def main(argv: list[str] | None = None) -> int:
    global DTYPES, SWEEP
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=320.0, help="seconds for the whole run")
    p.add_argument("--skip-checks", action="store_true")
    p.add_argument("--ncu-article", action="store_true", help="only launch the article's kernels once each (for ncu)")
    p.add_argument("--sections", default="checks,seed,sweep,confirm",
                   help="comma-separated subset of checks,seed,sweep,confirm,repeat (default: all but repeat)")
    p.add_argument("--repeat", type=int, default=8, help="independent measurements per dtype and size in 'repeat'")
    p.add_argument("--dtypes", default=",".join(DTYPES), help=f"comma-separated subset of {','.join(DTYPES)} "
                   "for the checks, the sweep and the confirmation (default: all)")
    args = p.parse_args(argv)
    wanted = set(args.dtypes.split(","))
    if wanted - set(DTYPES):
        raise SystemExit(f"--dtypes: pick from {','.join(DTYPES)}, not {args.dtypes!r}")
    DTYPES = tuple(d for d in DTYPES if d in wanted)
    SWEEP = {d: v for d, v in SWEEP.items() if d in DTYPES}
    sections = set(args.sections.split(","))
    known = {"checks", "seed", "sweep", "confirm", "repeat"}
    if sections - known:
        raise SystemExit(f"unknown sections {sorted(sections - known)}")
    if not backend.get().is_gpu:
        raise SystemExit("experiments/gpu_triton.py needs the GPU backend (COURSE_BACKEND=gpu on a machine with an NVIDIA GPU)")
    if args.ncu_article:
        return ncu_article()
    clock = Clock(args.budget)
    out = Path(os.environ.get("OUT", "gpu_triton_out"))
    out.mkdir(parents=True, exist_ok=True)
    course_lib.describe()
    prov = bench.provenance("COURSE_BACKEND=gpu PYTHONPATH=. python3 experiments/gpu_triton.py " + " ".join(argv or sys.argv[1:]))
    files: dict[str, list[str]] = {"article_ttgir.txt": [], "article_sass.txt": [], "fast_ttgir.txt": []}
    data: dict[str, Any] = {"provenance": prov, "sweep_candidates": {d: [c.as_dict() for c in v] for d, v in SWEEP.items()}}

    def save() -> None:  # after every phase, so a run cut short still leaves its data
        (out / "results.json").write_text(json.dumps(data, indent=1, default=str) + "\n")

    checks, warm, seed, seed_ev, ranked, confirm, extra = [], [], [], [], {}, [], []
    if sections & {"checks", "sweep", "confirm"}:  # the warm-up compiles what the sweep times
        checks, warm = phase_parallel(clock, budget=min(130.0, 0.4 * args.budget),
                                      skip_checks=args.skip_checks or "checks" not in sections,
                                      with_seed="seed" in sections)
        data.update(checks=checks, warm_up=warm)
        save()
    if "seed" in sections:
        seed, seed_ev = phase_article(clock, budget=min(45.0, max(10.0, clock.left() * 0.25)), files=files)
        data.update(seed_experiment=seed, seed_evidence=seed_ev)
        save()
    if "sweep" in sections:
        sweep, extra = phase_sweep(clock, budget=max(10.0, clock.left() - (45.0 if "confirm" in sections else 5.0)), warm=warm)
        ranked = ranking(sweep)
        data.update(sweep=sweep, transpose_cost=extra,
                    ranking={d: [{"worst_ratio": w, "config": c.as_dict(), "label": c.label, "ratios": r} for w, c, r in v] for d, v in ranked.items()})
        save()
    if "confirm" in sections and ranked:
        confirm, fast_ev = phase_confirm(clock, budget=max(5.0, clock.left() - (5.0 if "repeat" not in sections else 0.5 * clock.left())), ranked=ranked, files=files)
        data.update(confirm=confirm, fast_evidence=fast_ev)
        save()
    if "repeat" in sections:
        data.update(repeat=phase_repeat(clock, budget=max(5.0, clock.left() - 5.0), times=args.repeat))
        save()
    text = summary(checks, seed, seed_ev, ranked, confirm, extra, warm)
    (out / "summary.txt").write_text(text + "\n")
    (out / "paste_fast_configs.py").write_text(paste_configs(ranked))
    for name, parts in files.items():
        (out / name).write_text("\n\n".join(parts) + "\n")
    print("\n" + "=" * 100 + "\n" + text)
    print(f"\nwrote {sorted(f.name for f in out.iterdir())} to {out} in {clock.elapsed():.0f} s")
    failed = any(c.get("ok") is False for c in checks)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
