"""What a caller of the final kernels gets: host time per call, and each kernel's speed against cuBLAS
timed as people call it and in GPU time alone.

    python experiments/gpu_host_time.py --out $OUT/host_time.json

Two measurements, both with cuBLAS (``torch.matmul``) measured the same way in the same run:

* **host time per call**: a small product (64 x 64 x 64) in every dtype of the final stages, called
  back to back ``CALLS`` times after a warm-up (which also lets ``triton_fast`` tune the shape and
  every final stage make its launch plan); the wall time per call, the best of ``REPEATS`` rounds,
  the rounds of all kernels alternating (a slow spell of the host then costs every kernel alike).
  At this size the GPU needs a few microseconds per product, so the wall time is the host's: the
  wrapper's checks, its choice of configuration, the launch. ``torch.matmul`` in the same dtype
  (with TF32 allowed for tf32) is the yardstick. FP8 (e4m3 in, bf16 out) at ``SMALL_FP8`` (cuBLAS's
  block-scaled GEMM takes K in multiples of 512 only) in each scaling: the FP8 stages and the course's
  ``cublas`` wrapper against ``torch._scaled_mm`` with its scales laid out once (``fp8.cublas_fp8_for``).
* **as called vs GPU time**, on the decode shapes of ``course_lib/model_shapes.py``: ``triton.testing.do_bench``
  (each call after an L2 flush; when the host is slower than the GPU, its time shows: what a loop
  of calls gets) and ``triton.testing.do_bench_cudagraph`` (the calls captured in a CUDA graph and
  replayed: GPU time only). Medians in microseconds; the ratio is cuBLAS's time over the kernel's.

Raw log, never edited; ``experiments/summarize.py`` makes the summary the notebooks read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
from pathlib import Path

import torch
import triton
import triton.testing

import course_lib
from course_lib import fp8, registry
from course_lib.target import resolve
from course_lib.model_shapes import MODEL_SHAPES

CALLS, REPEATS = 2000, 3
SMALL = (64, 64, 64)
SMALL_FP8 = (128, 128, 512)
FP8_STAGES = ("cublas", "tc_7_fp8", "triton_fp8")
KERNELS = (("triton_fast", "bf16"), ("tc_6_tma_store", "bf16"), ("cublas", "bf16"))
DTYPES = ("bf16", "fp16", "tf32", "fp32")


def _inputs(M: int, N: int, K: int, dtype: str):
    return course_lib.random_inputs(M, N, K, dtype, seed=0)


def _callable(stage: str, dtype: str):
    if stage == "torch.matmul":
        if dtype == "tf32":
            def tf32_matmul(a, b):  # as a caller who allowed TF32 once, for the whole program
                return torch.matmul(a, b)
            torch.backends.cuda.matmul.allow_tf32 = True
            return tf32_matmul
        torch.backends.cuda.matmul.allow_tf32 = False
        return torch.matmul
    return registry.get_stage(stage).gemm(dtype)


def host_us_per_call(fn, a, b, rounds: int = REPEATS) -> float:
    for _ in range(20):  # warm-up: compiles, tunes this shape, fills the caches
        fn(a, b)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn(a, b)
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / CALLS * 1e6)
    return best


def both_timings(fn, a, b) -> dict:
    fn(a, b)  # tunes / builds outside the timed runs and outside the graph capture
    torch.cuda.synchronize()
    out = {"as_called_us": 1e3 * triton.testing.do_bench(lambda: fn(a, b), return_mode="median")}
    try:
        out["gpu_us"] = 1e3 * triton.testing.do_bench_cudagraph(lambda: fn(a, b), return_mode="median")
    except Exception as e:  # noqa: BLE001 - a kernel that cannot be captured is recorded as such
        out["gpu_us"], out["graph_error"] = None, f"{type(e).__name__}: {e}"[:300]
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--host-only", action="store_true", help="host time per call only, not the decode shapes")
    args = p.parse_args()
    course_lib.describe()
    prov = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
        "cuda": torch.version.cuda, "python": platform.python_version(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python experiments/gpu_host_time.py", "calls": CALLS, "repeats": REPEATS,
        "what": __doc__.split("\n\n")[2].strip(),
    }
    host = {}
    for _ in range(REPEATS):
        for dtype in DTYPES:
            for stage in ("torch.matmul", "cublas", "triton_fast") + (("tc_6_tma_store",) if dtype == "bf16" else ()):
                a, b = _inputs(*SMALL, dtype)
                us = host_us_per_call(_callable(stage, dtype), a, b, rounds=1)
                host[f"{stage} {dtype}"] = round(min(us, host.get(f"{stage} {dtype}", us)), 2)
                print(f"host time per call, {SMALL}: {stage} {dtype}: {us:.1f} us", flush=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    for _ in range(REPEATS):
        for scaling in fp8.OPERAND_SCALING:
            qa, qw = resolve("cublas", "e4m3", scaling).inputs(*SMALL_FP8, seed=0)
            scaled_mm = fp8.cublas_fp8_for(qa, qw)  # the library call, scales laid out once (bench's yardstick)
            for stage in ("torch._scaled_mm",) + FP8_STAGES:
                t = resolve(stage if stage != "torch._scaled_mm" else "cublas", "e4m3", scaling)
                if t.why_not_here:
                    continue
                us = host_us_per_call(scaled_mm if stage == "torch._scaled_mm" else t.fn, qa, qw, rounds=1)
                key = f"{stage} e4m3 per {scaling}"
                host[key] = round(min(us, host.get(key, us)), 2)
                print(f"host time per call, {SMALL_FP8}: {key}: {us:.1f} us", flush=True)
    rows = []
    for s in (s for s in MODEL_SHAPES if s.phase == "decode" and not args.host_only):
        for stage, dtype in KERNELS:
            st = registry.get_stage(stage)
            if st.why_not_here(dtype) is not None:
                continue
            a, b = _inputs(s.M, s.N, s.K, dtype)
            try:
                got = both_timings(st.gemm(dtype), a, b)
            except (ValueError, RuntimeError) as e:  # a shape the stage refuses
                rows.append({"label": s.label, "M": s.M, "N": s.N, "K": s.K, "stage": stage, "dtype": dtype,
                             "error": f"{type(e).__name__}: {e}"[:300]})
                continue
            rows.append({"label": s.label, "M": s.M, "N": s.N, "K": s.K, "stage": stage, "dtype": dtype,
                         "phase": s.phase, **got})
            print(f"{s.label:<20}{stage:<16}{dtype:<6} as called {got['as_called_us']:9.1f} us, "
                  f"GPU time {got['gpu_us'] if got['gpu_us'] is None else round(got['gpu_us'], 1)} us", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"provenance": prov, "small_shape": list(SMALL), "small_shape_fp8": list(SMALL_FP8),
                                    "host_us_per_call": host,
                                    "shapes": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
