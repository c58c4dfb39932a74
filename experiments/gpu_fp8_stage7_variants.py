"""Stage 7's promoted mainloop, variants: why it runs at two thirds of cuBLAS, and what helps.

    python experiments/gpu_fp8_stage7_variants.py --out $OUT/fp8_stage7_variants.json

The first run of stage 7 (experiments/runs/2026-12-03_0604_fp8_stage7_first) reached 98-106 % of
cuBLAS with fast accumulation (128 x 256 tiles, one wgmma batch always queued) but 65-69 % when it
promotes every slice (128 x 128 tiles; each consumer waits for its slice's wgmmas, wait_group 0,
then adds them into fp32). Hypothesis: both consumer warpgroups wait for the same slot, issue together, finish
together and promote together, so the tensor cores idle while both promote. Variants, each
course_lib/csrc/tc_7_fp8.cu built with other -D values (its own extension):

* ``base``: as the course builds it (promote every slice, consumers free-running; since
  2026-12-06 two accumulator sets in groups of 4 slices, a slice promoted while the next one runs);
* ``group 1`` / ``group 2`` / ``group 8``: the promoted loop with other group sizes (-DTC7_GROUP; 1 =
  one slice at a time, each promoted after its own wgmmas: the course's loop before);
* ``fast n128``: fast accumulation on the promoted kernels' 128 x 128 tile (no promotion at all), to
  part the tile's cost from the promotion's (``ONLY="base,fast n128"``);
* ``before`` / ``before fast n128``: the same two built from another copy of course_lib/csrc, named by
  ``$BEFORE_CSRC`` (a folder holding an earlier tc_7_fp8.cu and its headers), to measure a rewrite of
  the mainloop against the kernel it replaces in the same run (``$BASE_CSRC``, if set, is where the
  other variants are built from).

``PROBE=<variant>:<scaling> python experiments/gpu_fp8_stage7_variants.py`` (no ``--out``) launches that
variant twice at 4096^3 and exits, for Nsight Compute (``--kernel-name regex:stage7 --launch-skip 1``).

Measured and removed since (the -D knobs are gone from tc_7_fp8.cu; build the file as it was at the
commit named to run them again): ``ordered`` (the consumers take turns to issue, named barriers),
``every2`` / ``every4`` (per tensor or row, promote every 2 / 4 slices, one batch queued in between),
``ordered every2`` - at commit 42758af; ``ordered after`` (the other consumer's turn only once this
one's wgmmas are done) - at commit 819d41e; ``halves`` (-DTC7_LOOP=1: the tile's columns as two
m64n64 accumulator halves, one in flight while the other is promoted) and ``two sets`` (-DTC7_LOOP=2:
two whole accumulator sets, slice k + 1 in flight while k is promoted) - at commit 55f9656, both
serialised by ptxas (C7514); ``turns after`` / ``turns issued`` (-DTC7_TURNS=1 / 2: the turn-taking
above again on the shorter loop, the other's turn once this one's wgmmas are done / issued) - in the
working tree of commit 7c956ba, not committed (runs/2026-12-04_0940_fp8_stage7_loop/turns/). None
helped enough to keep (experiments/JOURNAL.md).

For each: correctness (``course_lib.check`` in e4m3 per tensor and per block, a few shapes), then GPU time
(``time_fn``, alternating rounds, median of three) at 4096^3, 8192^3 and 4096 x 14336 x 4096 per
tensor and per block, beside cuBLAS per tensor (promoted); and the accumulation error at K = 16,384
(uniform data on [0, 1], M = N = 256, per tensor) for each promotion interval.

Raw log, never edited.
"""

from __future__ import annotations

import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from course_lib import backend, compiler, correctness, fp8
from course_lib.gemm import relative_error
from course_lib.kernels import tensor_cores as tc
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

BINDING = Path(__file__).resolve().parent / "kernels" / "tc_7_variants_binding.cu"
VARIANTS = {"base": [], "fast n128": ["-DTC7_FAST_BLOCK_N=128"],
            # slices per group of the overlapped promotion (tc_fp8.cuh, promoted_sum_overlapped; the
            # course's is 4): 1 = one slice at a time, each promoted after its own wgmmas
            "group 1": ["-DTC7_GROUP=1"], "group 2": ["-DTC7_GROUP=2"], "group 8": ["-DTC7_GROUP=8"]}
BEFORE = os.environ.get("BEFORE_CSRC")
if BEFORE:
    VARIANTS.update({"before": [], "before fast n128": ["-DTC7_FAST_BLOCK_N=128"]})
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096)]
CHECK_SHAPES = [(37, 72, 208), (300, 1000, 528), (1000, 1032, 4096)]
ROUNDS = 3


def build(name: str, defines: list[str]):
    _, flags, _ = tc.build_plan(backend.get().capability)
    module = "course_tc_7_" + name.replace(" ", "_")
    csrc = Path(BEFORE if name.startswith("before") else os.environ.get("BASE_CSRC", tc.CSRC)).resolve()
    return compiler.load_extension(module, [csrc / tc.FP8_STAGE.source, BINDING], flags + defines, (csrc,))


def probe(spec: str) -> int:
    """Launch variant ``name`` twice at 4096^3 in ``scaling`` (``name:scaling``), for Nsight Compute."""
    name, scaling = spec.rsplit(":", 1)
    ext = build(name, VARIANTS[name])
    qa, qw = fp8.fp8_inputs(4096, 4096, 4096, scaling, seed=0)
    for _ in range(2):
        gemm(ext, fast=name.endswith("fast n128"))(qa, qw)
    torch.cuda.synchronize()
    return 0


def gemm(ext, fast: bool = False):
    def run(qa, qw):
        args = tc.tc_7_fp8_arguments(qa, qw, fast)
        ext.tc_7_fp8(*args, 8, backend.sm_count())
        return args[4]
    return run


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def main() -> int:
    only = os.environ.get("ONLY")
    variants = {k: v for k, v in VARIANTS.items() if only is None or k in only.split(",")}
    out, save = runlog.start(__doc__, 2, variants=list(variants), builds={}, check=[], speed=[], accumulation=[])
    with ThreadPoolExecutor(len(variants)) as pool:  # nvcc processes in parallel
        futures = {name: pool.submit(build, name, d) for name, d in variants.items()}
    exts = {}
    for name, f in futures.items():
        try:
            exts[name] = f.result()
            out["builds"][name] = "ok"
        except Exception as e:  # noqa: BLE001
            out["builds"][name] = f"{type(e).__name__}: {e}"[-2000:]
            print(f"build {name}: {out['builds'][name][-600:]}", flush=True)
    save()

    for name, ext in exts.items():
        for scaling in ("tensor", "block"):
            row = {"variant": name, "scaling": scaling}
            try:
                fn = gemm(ext, fast=name.endswith("fast n128") and scaling == "tensor")
                r = correctness.check(fn, "e4m3", CHECK_SHAPES, scaling=scaling, seed=3, label=f"{name} {scaling}")
                row["worst rel_error"] = max(x.rel_error for x in r.results)
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"[:1500]
                print(f"check {name} {scaling}: {row['error'][:600]}", flush=True)
            out["check"].append(row)
    save()
    broken = {r["variant"] for r in out["check"] if "error" in r}

    torch.manual_seed(0)
    for M, N, K in SHAPES:
        a, w = torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda")
        ops = {s: (fp8.quantize(a, "e4m3", *fp8.OPERAND_SCALING[s][0]), fp8.quantize(w, "e4m3", *fp8.OPERAND_SCALING[s][1]))
               for s in ("tensor", "block")}
        calls = {"cublas tensor": lambda: fp8.cublas_fp8(*ops["tensor"]),
                 "cublas tensor fast": lambda: fp8.cublas_fp8(*ops["tensor"], fast_accumulation=True)}
        for name, ext in exts.items():
            if name in broken:
                continue
            if name.endswith("fast n128"):
                calls[f"{name} tensor fast"] = (lambda f=gemm(ext, fast=True): f(*ops["tensor"]))
                continue
            for s in ("tensor", "block"):
                calls[f"{name} {s}"] = (lambda f=gemm(ext), s=s: f(*ops[s]))
        calls["base tensor fast"] = lambda: gemm(exts["base"], fast=True)(*ops["tensor"])
        times = {k: [] for k in calls}
        for _ in range(ROUNDS):
            for k, fn in calls.items():
                times[k].append(time_fn(fn).median_ms)
        row = {"shape": [M, N, K], **{f"{k} ms": statistics.median(v) for k, v in times.items()},
               **{f"{k} ms per round": v for k, v in times.items()}}
        out["speed"].append(row)
        ref = row["cublas tensor ms"]
        print(f"{(M, N, K)}: " + ", ".join(f"{k} {tflops(M, N, K, row[k + ' ms']):.0f} ({100 * ref / row[k + ' ms']:.0f}%)"
                                           for k in calls), flush=True)
        save()

    gen = torch.Generator(device="cuda").manual_seed(0)
    for K in (4096, 16384):
        a, w = torch.rand(256, K, generator=gen, device="cuda"), torch.rand(256, K, generator=gen, device="cuda")
        qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
        ref = qa.dequantize() @ qw.dequantize().t()
        r = {"K": K, "data": "uniform 0-1", "M": 256, "N": 256, "out": "bf16"}
        for name, ext in exts.items():
            if name not in broken:
                r[name] = relative_error(gemm(ext, fast=name.endswith("fast n128"))(qa, qw), ref)
        r["base fast"] = relative_error(gemm(exts["base"], fast=True)(qa, qw), ref)
        out["accumulation"].append(r)
        print(f"accumulation K={K}: " + ", ".join(f"{k} {v:.2e}" for k, v in r.items() if isinstance(v, float)), flush=True)
        save()
    print("wrote the raw log")
    return 0


if __name__ == "__main__":
    if os.environ.get("PROBE"):
        raise SystemExit(probe(os.environ["PROBE"]))
    runlog.run(main)
