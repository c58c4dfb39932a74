"""Stage 6's schedules side by side on mid-size and model shapes, and what limits the decode rows.

    python experiments/gpu_tc6_schedules.py --out $OUT/tc6_schedules.json

Issue 26 asks for 1024^3 and 2048^3 at >= 90 % of cuBLAS and a tile chosen per shape. Stage 6 has
three schedules (tc_launch.h): whole 128 x 256 tiles, stream-K, and the operands swapped (64 x T tiles
of C^T with split-K, built for decode; forced, it covers any M with token tiles of 128). This script
times every schedule, forced, beside the one chosen by the shape and cuBLAS, in GPU time
(``course_lib.bench.measure``), on squares from 512 to 4096 and on every row of the shape table; and
for every decode row it gives the bytes each product must read over its time (the weights dominate:
a decode step is a read of the weight matrix), for tc_6 and cuBLAS, against the H200's 4.8 TB/s.

Then the host time per call of a 64 x 64 x 64 product (``gpu_host_time.host_us_per_call``) for
torch.matmul and triton_fast, bf16 and fp16, in alternating rounds (last session's single round
gave triton_fast 30.5 us in bf16 and 18.9 us in fp16 through the same code).

With ``MID=1`` in the environment: only the mid-size squares and the table's rows with fewer whole
tiles than SMs or M from 96 to 256 (issue 38), and no host time.

Raw log, never edited.
"""

from __future__ import annotations

import os
import time

import torch

import course_lib
from course_lib import bench, registry
from course_lib.kernels import tensor_cores as tc
from course_lib.model_shapes import MODEL_SHAPES
from gpu_host_time import host_us_per_call  # the same measurement (this folder is on sys.path)
import runlog  # this folder is on sys.path

SQUARES = [(n, n, n) for n in (512, 768, 1024, 1536, 1600, 2048, 3072, 4096)]
SCHEDULES = {"by shape": -1, "whole tiles": 0, "stream-K": 1, "swapped": 2}
H200_TB_S = 4.8  # HBM3e, the datasheet's figure


def main() -> int:
    out, save = runlog.start(__doc__, 1, schedules=[], host_us_per_call={})
    course_lib.describe()

    t0 = time.time()
    tc.extension()
    print(f"extension built/loaded in {time.time() - t0:.0f} s", flush=True)
    sms = course_lib.backend.sm_count()
    rule = course_lib.get_stage("tc_6_tma_store").shape_multiple
    fns = {name: tc.make_gemm("tc_6_tma_store", shape_multiple=rule, group_m=8, max_ctas=sms, schedule=s)
           for name, s in SCHEDULES.items()}
    shapes = [(f"{s[0]}^3", s, "square") for s in SQUARES] + [(m.label, m.shape, m.phase) for m in MODEL_SHAPES]
    mid = bool(os.environ.get("MID"))
    if mid:
        tiles = lambda s: -(-s[0] // 128) * -(-s[1] // 256)  # noqa: E731 - whole 128 x 256 tiles
        shapes = [(label, s, phase) for label, s, phase in shapes
                  if (phase == "square" and 1000 <= s[0] <= 3072) or 96 <= s[0] <= 256 or tiles(s) < sms]
        shapes += [("3000^3", (3000, 3000, 3000), "square")]
    for label, shape, phase in shapes:
        course_lib.check(fns["swapped"], "bf16", [shape])  # the forced swap is right before it is timed
        row = {"label": label, "shape": list(shape), "phase": phase}
        for name, fn in fns.items():
            r = bench.measure(fn, "bf16", shape)
            row[name] = round(100 * r["ratio_to_cublas"], 1)
            row["cublas_us"] = round(1e3 * r["cublas_ms"], 2)
            row[f"{name} us"] = round(1e3 * r["ms"], 2)
        if phase == "decode":
            M, N, K = shape
            gbytes = 2 * (M * K + K * N + M * N) / 1e9
            row["TB/s by shape"] = round(gbytes / row["by shape us"] * 1e-3 * 1e6, 2)
            row["TB/s cuBLAS"] = round(gbytes / row["cublas_us"] * 1e-3 * 1e6, 2)
        out["schedules"].append(row)
        print(f"{label:<22}{str(shape):<22} " + "  ".join(f"{n} {row[n]:5.1f}%" for n in SCHEDULES)
              + f"  (cuBLAS {row['cublas_us']:.1f} us)"
              + (f"  {row['TB/s by shape']} / {row['TB/s cuBLAS']} TB/s of {H200_TB_S}" if phase == "decode" else ""),
              flush=True)
        save()

    if mid:
        print("wrote the raw log")
        return 0
    a16, b16 = course_lib.random_inputs(64, 64, 64, "bf16", seed=0)
    ah, bh = course_lib.random_inputs(64, 64, 64, "fp16", seed=0)
    for rnd in range(3):
        for dtype, (a, b) in (("bf16", (a16, b16)), ("fp16", (ah, bh))):
            for name, fn in (("torch.matmul", torch.matmul), ("triton_fast", registry.get_stage("triton_fast").gemm(dtype))):
                us = round(host_us_per_call(fn, a, b), 2)
                out["host_us_per_call"].setdefault(f"{name} {dtype}", []).append(us)
                print(f"round {rnd}: host time per call 64^3 {name:<14}{dtype}: {us:6.1f} us", flush=True)
        save()
    print("wrote the raw log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
