"""Stage 7's promoted loop against cuBLAS: the bytes each moves through L2, and the tile order.

    python experiments/gpu_fp8_stage7_l2.py --out $OUT/fp8_stage7_l2.json
    PROBE=tc7|cublas python experiments/gpu_fp8_stage7_l2.py   (two launches at 4096^3, for Nsight Compute)

Nsight Compute at 4096^3 (journal, 2026-12-06, fifth session) found stage 7's consumers waiting for
their next slot's data 15 % of their sampled stalls where cuBLAS's wait 6 %, and L2 throughput times
duration 1.22 x cuBLAS's with the same tile (128 x 128 x 128, 6 stages, a cluster of two). At 4096^3
A and W (32 MB) fit in L2, so the tile order should not change the bytes: this run times stage 7 per
tensor, promoted, with the grouped tile order's group_m = 1, 2, 4, 8 (the default), 16, beside cuBLAS
(alternating rounds, GPU time), at 4096^3 and 8192^3. The PROBE launches are for ncu's L2 and DRAM
sector counts (run_on_gpu-style command lines in the run's README).

Raw log, never edited.
"""

from __future__ import annotations

import os
import statistics

import torch

from course_lib import fp8
from course_lib.kernels import tensor_cores as tc
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

GROUP_M = (1, 2, 4, 8, 16)
SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))
ROUNDS = 3


def _env_ints(name: str, default: tuple) -> tuple:
    """``$NAME`` as "4,8" (numbers) or "8192x8192x8192,4096x14336x4096" (shapes); ``default`` unset."""
    v = os.environ.get(name)
    if not v:
        return default
    items = [tuple(int(x) for x in part.split("x")) for part in v.split(",")]
    return tuple(i[0] if len(i) == 1 else i for i in items)


def probe(what: str) -> int:
    qa, qw = fp8.fp8_inputs(4096, 4096, 4096, "tensor", seed=0)
    call = fp8.cublas_fp8_for(qa, qw) if what == "cublas" else tc.tc_7_fp8
    for _ in range(2):
        call(qa, qw)
    torch.cuda.synchronize()
    return 0


def main() -> int:
    """$SHAPES, $GROUP_M, $ROUNDS and $SCALING ("tensor" or "block") override the defaults above."""
    out, save = runlog.start(__doc__, 2, speed=[])
    scaling, rounds = os.environ.get("SCALING", "tensor"), int(os.environ.get("ROUNDS", ROUNDS))
    for M, N, K in _env_ints("SHAPES", SHAPES):
        qa, qw = fp8.fp8_inputs(M, N, K, scaling, seed=0)
        cublas = fp8.cublas_fp8_for(qa, qw)
        calls = {"cublas": lambda: cublas(qa, qw)}
        for g in _env_ints("GROUP_M", GROUP_M):
            calls[f"tc_7 group_m={g}"] = (lambda g=g: tc.tc_7_fp8(qa, qw, group_m=g))
        times = {k: [] for k in calls}
        for _ in range(rounds):
            for k, fn in calls.items():
                times[k].append(time_fn(fn).median_ms)
        row = {"shape": [M, N, K], "scaling": scaling, "rounds": rounds,
               **{f"{k} ms": statistics.median(v) for k, v in times.items()}}
        out["speed"].append(row)
        save()
        print(f"{(M, N, K)}: " + ", ".join(f"{k} {100 * row['cublas ms'] / row[k + ' ms']:.0f}%" for k in calls), flush=True)
    return 0


if __name__ == "__main__":
    if os.environ.get("PROBE"):
        raise SystemExit(probe(os.environ["PROBE"]))
    runlog.run(main)
