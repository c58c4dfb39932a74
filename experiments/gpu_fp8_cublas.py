"""cuBLAS in FP8 on the H200: speed per scaling against bf16, and the accumulator's precision.

    python experiments/gpu_fp8_cublas.py --out $OUT/fp8_cublas.json

Issue 27's yardsticks, measured before any FP8 kernel of the course exists:

* **speed**: ``torch._scaled_mm`` on e4m3 inputs (A row-major M x K, B the weight of nn.Linear, N x K,
  passed as its transpose), bf16 output, with one scale per tensor, one per row of A and column of
  B, and (where this torch offers it on this GPU) 1 x 128 blocks of A and 128 x 128 blocks of B;
  beside cuBLAS bf16 (``torch.matmul``) on the same shapes. GPU time (``course_lib.timing.time_fn``,
  one call after an L2 flush, host time kept out) and as called (``host=True``); TFLOP/s.
* **accumulation**: at K = 1,024, 4,096 and 16,384 (M = N = 256, one scale per tensor, values from
  a normal distribution and from a uniform one on [0, 1]), the relative error of ``_scaled_mm``
  with fp32 output and ``use_fast_accum`` True (the tensor core's FP8 accumulator over the whole
  of K) and False (cuBLAS promotes partial sums into fp32) against the float64 product of the
  dequantized inputs.

Raw log, never edited.
"""

from __future__ import annotations


import torch

from course_lib import fp8
from course_lib.gemm import relative_error
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (2048, 2304, 768), (16, 4096, 4096),
          (4096, 6144, 4096), (2048, 4096, 4096), (4096, 4096, 14336), (8192, 4608, 3584), (1, 6144, 4096),
          (64, 14336, 4096)]


def quantized(a: torch.Tensor, w: torch.Tensor, scaling: str):
    (sa, ba), (sw, bw) = fp8.OPERAND_SCALING[scaling]
    return fp8.quantize(a, "e4m3", sa, ba), fp8.quantize(w, "e4m3", sw, bw)


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def main() -> int:
    out, save = runlog.start(__doc__, 2, speed=[], accumulation=[])

    torch.manual_seed(0)
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        row = {"shape": [M, N, K]}
        t = time_fn(lambda: torch.matmul(a, w.t()))
        row["bf16 ms"] = t.median_ms
        row["bf16 ms as called"] = time_fn(lambda: torch.matmul(a, w.t()), host=True).median_ms
        for scaling in ("tensor", "row", "block"):
            for fast in (False, True):
                key = f"e4m3 {scaling}{' fast' if fast else ''}"
                try:
                    qa, qw = quantized(a.float(), w.float(), scaling)
                    c = fp8.cublas_fp8(qa, qw, fast_accumulation=fast)
                    ref = qa.dequantize() @ qw.dequantize().t()
                    row[f"{key} rel_error"] = relative_error(c, ref)
                    row[f"{key} ms"] = time_fn(lambda: fp8.cublas_fp8(qa, qw, fast_accumulation=fast)).median_ms
                    row[f"{key} ms as called"] = time_fn(lambda: fp8.cublas_fp8(qa, qw, fast_accumulation=fast), host=True).median_ms
                except Exception as e:  # noqa: BLE001 - what this torch refuses is recorded as such
                    row[f"{key} error"] = f"{type(e).__name__}: {e}"[:400]
        out["speed"].append(row)
        msg = f"{str((M, N, K)):<22} bf16 {tflops(M, N, K, row['bf16 ms']):6.0f}"
        for key in [k[:-3] for k in row if k.endswith(" ms") and k.startswith("e4m3")]:
            msg += f" | {key} {tflops(M, N, K, row[key + ' ms']):6.0f}"
        print(msg + " TFLOP/s", flush=True)
        for k in (k for k in row if k.endswith("error") and not k.endswith("rel_error")):
            print(f"   {k}: {row[k][:200]}", flush=True)
        save()

    # fp32 output, so that the output's rounding (bf16: 2^-9) does not hide the accumulator's; values
    # of both signs (sums that cancel) and positive ones (sums that grow with K).
    for data in ("normal", "uniform 0-1"):
        for K in (1024, 4096, 16384):
            make = torch.randn if data == "normal" else torch.rand
            a, w = make(256, K, device="cuda"), make(256, K, device="cuda")
            qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
            ref = qa.dequantize() @ qw.dequantize().t()
            r = {"data": data, "K": K, "M": 256, "N": 256, "out": "fp32"}
            for fast in (False, True):
                r[f"fast_accum={fast}"] = relative_error(fp8.cublas_fp8(qa, qw, fast_accumulation=fast, out_dtype=torch.float32), ref)
            r["bf16 inputs, fp32 out"] = relative_error(torch.matmul(a.bfloat16().float(), w.bfloat16().float().t()),
                                                        a.bfloat16().double() @ w.bfloat16().double().t())
            out["accumulation"].append(r)
            print(f"{data:<12} K={K:>6}: rel. error, promoted {r['fast_accum=False']:.2e}, "
                  f"fast accumulation {r['fast_accum=True']:.2e}", flush=True)
            save()
    print("wrote the raw log")
    return 0


if __name__ == "__main__":
    runlog.run(main)
