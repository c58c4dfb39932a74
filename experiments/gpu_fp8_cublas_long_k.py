"""cuBLAS's FP8 fast path at long K: which kernel it runs, and whether it splits K.

    python experiments/gpu_fp8_cublas_long_k.py --out $OUT/fp8_cublas_long_k.json

Notebook 12 measured cuBLAS's fast accumulation (``use_fast_accum``) erring by 9.1 % at 256 x 256 x
16,384 on positive data, where the model of the tensor core's narrow adder - and the course's own
kernels with fast accumulation - err by 25 %; at every K <= 4,096 cuBLAS's errors are the model's.
Hypothesis: at 256 x 256 x 16,384 cuBLAS splits K (few tiles, long K), so each part's sum is shorter
and the parts are added in fp32. For each shape, fast and promoted: the kernels cuBLAS launches (names,
grid and block from a PyTorch profiler trace) and the relative error against float64 on data uniform
on [0, 1] (one scale per tensor, bf16 out), beside stage 7 with fast accumulation. If the hypothesis
holds, 256 x 256 x 16,384 shows a split (a grid along K, or a second reduction kernel) and 4096 x 4096 x
16,384 (enough tiles, no reason to split) errs like the model.

Raw log, never edited.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import torch

from course_lib import fp8
from course_lib.gemm import relative_error
import runlog  # this folder is on sys.path

SHAPES = [(256, 256, 4096), (256, 256, 16384), (4096, 4096, 16384)]


def kernels_launched(fn) -> list[dict]:
    """The GPU kernels one call of ``fn`` launches: name, grid, block (from a Kineto trace)."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    return [{"name": e["name"], "grid": e.get("args", {}).get("grid"), "block": e.get("args", {}).get("block")}
            for e in events if e.get("cat") == "kernel"]


def main() -> int:
    out, save = runlog.start(__doc__, 2, shapes=[])
    gen = torch.Generator(device="cuda").manual_seed(0)
    for M, N, K in SHAPES:
        a = torch.rand(M, K, generator=gen, device="cuda")
        w = torch.rand(N, K, generator=gen, device="cuda")
        qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
        ref = qa.dequantize().double() @ qw.dequantize().double().t()
        row = {"shape": [M, N, K]}
        for label, fn in (("cublas fast", lambda: fp8.cublas_fp8(qa, qw, fast_accumulation=True)),
                          ("cublas promoted", lambda: fp8.cublas_fp8(qa, qw))):
            row[label] = {"rel_error": relative_error(fn().double(), ref), "kernels": kernels_launched(fn)}
            print(f"{(M, N, K)} {label}: {row[label]['rel_error']:.3e} {row[label]['kernels']}", flush=True)
        out["shapes"].append(row)
        save()
    return 0


if __name__ == "__main__":
    runlog.run(main)
