"""Stage 7 (the CUDA FP8 kernel, tc_7_fp8) on the H200: correct first, then against cuBLAS FP8.

    python experiments/gpu_fp8_stage7.py --out $OUT/fp8_stage7.json

* **check**: ``course_lib.check`` in e4m3 of ``tc_7_fp8`` scaled per tensor, per row and per
  block (A 1 x 128, W 128 x 128), promoted, and per tensor with fast accumulation, on shapes that cut
  its tiles and the K blocks; each shape's relative error against the float64 product of the
  dequantized operands.
* **speed**: at the squares and the FP8 prefill and decode shapes, stage 7 and cuBLAS FP8
  (``torch._scaled_mm``) with the same scaling - per tensor promoted, per tensor with fast
  accumulation, per row, per block - timed in alternating rounds (every variant once per round, three
  rounds; the median of the rounds' medians): GPU time (``course_lib.timing.time_fn``, one call after
  an L2 flush, host time kept out) and, in one more round, as called (``host=True``); TFLOP/s.
* **accumulation**: at K = 1,024, 4,096 and 16,384 (M = N = 256, values from a normal distribution and
  from a uniform one on [0, 1], one scale per tensor, bf16 output) the relative error of stage 7
  promoted and with fast accumulation, beside cuBLAS's.

Raw log, never edited.
"""

from __future__ import annotations

import statistics

import torch

from course_lib import correctness, fp8
from course_lib.gemm import relative_error
from course_lib.kernels import tensor_cores as tc
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (2048, 2304, 768), (16, 4096, 4096),
          (4096, 6144, 4096), (2048, 4096, 4096), (4096, 4096, 14336), (8192, 4608, 3584), (1, 6144, 4096),
          (64, 14336, 4096)]
CHECK_SHAPES = [(1, 8, 16), (37, 72, 208), (130, 136, 256), (16, 264, 1024), (300, 1000, 528), (1, 4096, 4096),
                (1000, 1032, 4096), (2048, 2048, 2048), (4096, 4096, 4096)]
# variant -> (scaling, fast accumulation)
VARIANTS = {"tensor": ("tensor", False), "tensor fast": ("tensor", True), "row": ("row", False), "block": ("block", False)}
ROUNDS = 3


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def main() -> int:
    out, save = runlog.start(__doc__, 2, check=[], speed=[], accumulation=[])

    for name, (scaling, fast) in VARIANTS.items():
        row = {"variant": name}
        try:
            report = correctness.check(lambda qa, qw: tc.tc_7_fp8(qa, qw, fast_accumulation=fast), "e4m3",
                                       CHECK_SHAPES, scaling=scaling, seed=7, label=f"tc_7_fp8 {name}")
            row["shapes"] = [{"shape": list(r.shape), "rel_error": r.rel_error, "tolerance": r.tolerance}
                             for r in report.results]
            print(f"check {name:<12} passed on {len(report.results)} shapes, worst rel. error "
                  f"{max(r.rel_error for r in report.results):.2e}", flush=True)
        except Exception as e:  # noqa: BLE001 - a failure is recorded and the run goes on
            row["error"] = f"{type(e).__name__}: {e}"[:2000]
            print(f"check {name}: {row['error'][:1000]}", flush=True)
        out["check"].append(row)
        save()

    torch.manual_seed(0)
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda")
        w = torch.randn(N, K, device="cuda")
        calls = {}
        for name, (scaling, fast) in VARIANTS.items():
            (sa, ba), (sw, bw) = fp8.OPERAND_SCALING[scaling]
            qa, qw = fp8.quantize(a, "e4m3", sa, ba), fp8.quantize(w, "e4m3", sw, bw)
            calls[f"tc_7 {name}"] = (lambda qa=qa, qw=qw, fast=fast: tc.tc_7_fp8(qa, qw, fast_accumulation=fast))
            if not (scaling == "block" and fast):
                calls[f"cublas {name}"] = (lambda qa=qa, qw=qw, fast=fast: fp8.cublas_fp8(qa, qw, fast_accumulation=fast))
        row = {"shape": [M, N, K], "rounds": ROUNDS}
        times = {k: [] for k in calls}
        for _ in range(ROUNDS):
            for k, fn in calls.items():
                try:
                    times[k].append(time_fn(fn).median_ms)
                except Exception as e:  # noqa: BLE001 - what cuBLAS refuses is recorded as such
                    row[f"{k} error"] = f"{type(e).__name__}: {e}"[:400]
        for k, ts in times.items():
            if ts:
                row[f"{k} ms"] = statistics.median(ts)
                row[f"{k} ms per round"] = ts
                try:
                    row[f"{k} ms as called"] = time_fn(calls[k], host=True).median_ms
                except Exception as e:  # noqa: BLE001
                    row[f"{k} as called error"] = f"{type(e).__name__}: {e}"[:400]
        out["speed"].append(row)
        msg = f"{str((M, N, K)):<22}"
        for name in VARIANTS:
            mine, theirs = row.get(f"tc_7 {name} ms"), row.get(f"cublas {name} ms")
            if mine:
                msg += f" | {name} {tflops(M, N, K, mine):5.0f}"
                if theirs:
                    msg += f" ({100 * theirs / mine:4.0f}% of cuBLAS {tflops(M, N, K, theirs):5.0f})"
        print(msg + " TFLOP/s", flush=True)
        save()

    for data in ("normal", "uniform 0-1"):
        for K in (1024, 4096, 16384):
            make = torch.randn if data == "normal" else torch.rand
            a, w = make(256, K, device="cuda"), make(256, K, device="cuda")
            qa, qw = fp8.quantize(a, "e4m3", "tensor"), fp8.quantize(w, "e4m3", "tensor")
            ref = qa.dequantize() @ qw.dequantize().t()
            r = {"data": data, "K": K, "M": 256, "N": 256, "out": "bf16"}
            for fast in (False, True):
                r[f"tc_7 fast_accum={fast}"] = relative_error(tc.tc_7_fp8(qa, qw, fast_accumulation=fast), ref)
                r[f"cublas fast_accum={fast}"] = relative_error(fp8.cublas_fp8(qa, qw, fast_accumulation=fast), ref)
            out["accumulation"].append(r)
            print(f"{data:<12} K={K:>6}: tc_7 promoted {r['tc_7 fast_accum=False']:.2e}, fast "
                  f"{r['tc_7 fast_accum=True']:.2e} | cuBLAS promoted {r['cublas fast_accum=False']:.2e}, fast "
                  f"{r['cublas fast_accum=True']:.2e}", flush=True)
            save()
    print("wrote the raw log")
    return 0


if __name__ == "__main__":
    runlog.run(main)
