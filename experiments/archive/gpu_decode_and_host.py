"""Stage 6's decode path (operands swapped, M <= 128) and the final stages' host time, on the GPU.

    python experiments/gpu_decode_and_host.py --out $OUT/decode_and_host.json

Three measurements, each beside cuBLAS in the same run:

* **correctness first**: ``course_lib.check`` of tc_6 with the schedule by the shape on the check's GPU
  shapes (M = 1, 3, 9, 33, 37, 129, 300, ... : odd M included) and with the swapped schedule forced on
  decode shapes of every token tile;
* **decode speed**: tc_6 (by the shape: swapped) and tc_6 with its old schedule (stream-K / whole
  tiles, forced) against cuBLAS on the decode rows of the shape table and M = 8, 128, with
  ``course_lib.bench.measure`` (GPU time, and as called);
* **host time per call**: a 64 x 64 x 64 product called 2,000 times back to back (best of 3) through
  torch.matmul, the course's cuBLAS entry, tc_6 and triton_fast in each dtype.

Raw log, never edited.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import time
import traceback
from pathlib import Path

import torch
import triton

import course_lib
from course_lib import bench, registry
from course_lib.correctness import default_shapes
from course_lib.kernels import tensor_cores as tc
from course_lib.model_shapes import MODEL_SHAPES
from gpu_host_time import host_us_per_call  # the same measurement (this folder is on sys.path)

SMALL = (64, 64, 64)
DECODE = [s.shape for s in MODEL_SHAPES if s.phase == "decode"] + [(8, 4096, 4096), (128, 4096, 4096)]
SWAPPED_CHECK = [(1, 6144, 4096), (3, 8, 8), (9, 4608, 3584), (17, 200, 1032), (33, 1000, 264), (64, 14336, 1000),
                 (100, 520, 18944), (128, 4096, 14336)]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    course_lib.describe()
    out = {"provenance": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                          "python": platform.python_version(),
                          "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                          "command": "python experiments/gpu_decode_and_host.py", "what": __doc__.split("\n\n")[2]},
           "check": {}, "decode": [], "host_us_per_call": {}}

    def save():
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")

    t0 = time.time()
    tc.extension()
    print(f"extension built/loaded in {time.time() - t0:.0f} s", flush=True)
    sms = course_lib.backend.sm_count()
    for label, schedule, shapes in (("tc_6 by the shape, check's shapes", -1, default_shapes(tc.ANY_M) + SWAPPED_CHECK),
                                    ("tc_6 swapped forced", 2, SWAPPED_CHECK)):
        fn = tc.make_gemm("tc_6_tma_store", group_m=8, max_ctas=sms, schedule=schedule)
        try:
            rep = course_lib.check(fn, "bf16", shapes)
            out["check"][label] = "passed: " + ", ".join(f"{r.shape} {r.rel_error:.1e}" for r in rep.results)
        except Exception as e:  # noqa: BLE001 - recorded, then the next measurement
            out["check"][label] = f"FAILED: {type(e).__name__}: {e}"[:3000]
        print(label, "->", out["check"][label][:600], flush=True)
        save()

    old = tc.make_gemm("tc_6_tma_store", group_m=8, max_ctas=sms, schedule=1)  # stream-K (the old decode choice)
    for shape in DECODE:
        for label, gemm in (("tc_6_tma_store", "tc_6_tma_store"), ("tc_6 stream-K forced", old),
                            ("triton_fast", "triton_fast")):
            try:
                r = bench.measure(gemm, "bf16", shape, as_called=True)
                r["stage"] = label
                out["decode"].append(r)
                print(f"{str(shape):<22}{label:<22} {1e3 * r['ms']:7.1f} us  {100 * r['ratio_to_cublas']:5.0f}% GPU time"
                      f"  as called {1e3 * r['ms_as_called']:7.1f} us {100 * r['ratio_to_cublas_as_called']:5.0f}%"
                      f"  (cuBLAS {1e3 * r['cublas_ms']:.1f} / {1e3 * r['cublas_ms_as_called']:.1f} us)", flush=True)
            except Exception as e:  # noqa: BLE001
                out["decode"].append({"shape": shape, "stage": label, "error": f"{type(e).__name__}: {e}"[:500]})
                print(shape, label, "FAILED", e, flush=True)
            save()

    for dtype in ("bf16", "fp16", "tf32", "fp32"):
        a, b = course_lib.random_inputs(*SMALL, dtype, seed=0)
        kernels = [("torch.matmul", torch.matmul), ("cublas", registry.get_stage("cublas").gemm(dtype)),
                   ("triton_fast", registry.get_stage("triton_fast").gemm(dtype))]
        if dtype == "bf16":
            kernels.append(("tc_6_tma_store", registry.get_stage("tc_6_tma_store").gemm(dtype)))
        for name, fn in kernels:
            if name == "torch.matmul" and dtype == "tf32":
                continue
            try:
                us = host_us_per_call(fn, a, b)
            except Exception:  # noqa: BLE001
                out["host_us_per_call"][f"{name} {dtype}"] = traceback.format_exc()[-800:]
                print(name, dtype, "FAILED", traceback.format_exc()[-800:], flush=True)
                continue
            out["host_us_per_call"][f"{name} {dtype}"] = round(us, 2)
            print(f"host time per call {SMALL}: {name:<16}{dtype:<6}{us:7.1f} us", flush=True)
            save()
    save()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
