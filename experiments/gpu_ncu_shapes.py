"""Launch cuBLAS, triton_fast and stage 6 (bf16) once each on some model shapes, inside an NVTX range
named ``measure``, so that Nsight Compute profiles those launches and nothing else (autotuning and
warm-up run outside the range):

    PYTHONPATH=. COURSE_BACKEND=gpu ncu --clock-control none --nvtx --nvtx-include "measure/" --csv \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size \
        python3 experiments/gpu_ncu_shapes.py [labels, spaces as dashes; sq-N for the square N^3]

What it asks: which kernel cuBLAS runs at the shapes where the course's kernels fall behind (its
name gives the tile, the cluster and split-K or stream-K), with what grid, and how long each kernel
takes with the caches flushed before it (ncu's default cache control), against the course's timer. It prints, in launch order, the label and the library of each profiled call.
"""

from __future__ import annotations

import sys

import torch

from course_lib.gemm import random_inputs
from course_lib.model_shapes import MODEL_SHAPES, ModelShape
from course_lib.registry import get_stage

DEFAULT = ("gpt2-qkv-2k", "gpt2-qkv-8k", "gpt2-xl-fc-4k", "gpt2-dW-qkv", "llama3-qkv-M=1", "llama3-o-M=16",
           "qwen2.5-down-M=32", "llama3-gate-M=64")


def main(labels: list[str]) -> int:
    wanted = labels or list(DEFAULT)
    squares = [int(w[3:]) for w in wanted if w.startswith("sq-")]  # sq-1024: the square 1024^3
    wanted = [w for w in wanted if not w.startswith("sq-")]
    shapes = [ModelShape(f"{n}^3", "-", "square", "square", n, n, n, "") for n in squares]
    shapes += [s for s in MODEL_SHAPES if s.label.replace(" ", "-") in wanted]
    missing = set(wanted) - {s.label.replace(" ", "-") for s in MODEL_SHAPES}
    if missing:
        raise SystemExit(f"not in the shape table: {sorted(missing)}")
    for s in shapes:
        a, b = random_inputs(s.M, s.N, s.K, "bf16")
        for stage in ("cublas", "triton_fast", "tc_6_tma_store"):
            if stage == "tc_6_tma_store" and any(d % 8 for d in s.shape):
                continue
            fn = get_stage(stage).gemm("bf16")
            fn(a, b)  # autotuning, compilation, the extension's build: outside the range
            fn(a, b)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("measure")
            fn(a, b)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            print(f"profiled: {s.label} {stage}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
