"""Stage 6 after the restructure against stage 6 as measured before it, on a GPU.

Produced experiments/runs/2026-12-01_sass_restructure_cuda/gpu/ab.json (through
experiments/gpu_restructure_cuda_check.sh; the file records this script's path of the day):

    PYTHONPATH=.:experiments COURSE_BACKEND=gpu python3 experiments/gpu_restructure_cuda_ab.py OUT.json

``new`` is the course's tc_6_tma_store (whole tiles, CLUSTER = 2 constant); ``old`` is the variant of
experiments/kernels/tc_6_stream_k.cu with the course's knobs (cluster 2, group_m 8, one CTA per SM,
no stream-K), whose SASS is encoding for encoding the stage 6 the course measured before;
``cublas`` is torch.matmul. Same inputs, checked against each other first, then timed with the
course's timer (course_lib.timing: L2 flushed before every run, median of the runs) in alternating
rounds, so that drift in clock or temperature falls on all three alike.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import torch

import course_lib
from course_lib import backend, bench, timing
from course_lib.kernels import tensor_cores as tc

import tc_6_stream_k as variant

SIZES = (4096, 8192)
ROUNDS = 5


def main(out: Path) -> int:
    gemms = {"new": tc.tc_6_tma_store, "old": variant.as_measured(), "cublas": torch.matmul}
    result = {"provenance": bench.provenance("experiments/gpu_restructure_cuda_ab.py"),
              "what": __doc__.split("\n\n")[0], "rounds": ROUNDS, "sizes": []}
    for n in SIZES:
        a, b = course_lib.random_inputs(n, n, n, "bf16", seed=n)
        ref = torch.matmul(a, b).double()
        errors = {}
        for name, fn in gemms.items():
            c = fn(a, b).double()
            errors[name] = float(torch.linalg.norm(c - ref) / torch.linalg.norm(ref))
        same = bool(torch.equal(gemms["new"](a, b), gemms["old"](a, b)))  # same math, same order of sums
        times: dict[str, list[float]] = {name: [] for name in gemms}
        for _ in range(ROUNDS):
            for name, fn in gemms.items():
                times[name].append(timing.time_fn(lambda: fn(a, b), budget_ms=150).median_ms)
        row = {"n": n, "bitwise_equal_new_old": same, "rel_error_vs_cublas": errors, "ms": times,
               "median_ms": {k: statistics.median(v) for k, v in times.items()}}
        row["tflops"] = {k: 2 * n ** 3 / (ms * 1e-3) / 1e12 for k, ms in row["median_ms"].items()}
        row["new_over_old"] = row["median_ms"]["old"] / row["median_ms"]["new"]
        result["sizes"].append(row)
        print(f"{n}^3: new {row['tflops']['new']:.1f} TF, old {row['tflops']['old']:.1f} TF, cuBLAS "
              f"{row['tflops']['cublas']:.1f} TF; new/old speed {row['new_over_old']:.4f}; outputs equal: {same}; "
              f"per-round ms new {['%.4f' % t for t in times['new']]} old {['%.4f' % t for t in times['old']]}",
              flush=True)
    result["sm_count"] = backend.sm_count()
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
