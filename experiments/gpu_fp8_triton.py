"""The Triton FP8 GEMM on the H200: correct first, then its configurations against cuBLAS FP8.

    python experiments/gpu_fp8_triton.py --out $OUT/fp8_triton.json

* **check**: ``course_lib.check`` in e4m3 of ``fast_fp8.fp8_matmul`` on the GPU's FP8 shapes,
  scaled per tensor and per row, with the configuration by the shape, with fast accumulation, and
  each through tensor descriptors;
* **sweep**: every configuration of ``CANDIDATES`` (promoted sums, and the best again with fast
  accumulation) at the squares and the FP8 prefill and decode shapes, GPU time
  (``course_lib.timing.time_fn``), beside cuBLAS FP8 (``torch._scaled_mm``, one scale per tensor,
  promoted and fast) timed in the same loop; TFLOP/s;
* **block scales**: ``fast_fp8.fp8_matmul_blockscaled`` (A per 1 x 128, W per 128 x 128) checked, then
  a few tiles timed beside cuBLAS with the same block scales and cuBLAS with one scale per tensor;
* **accumulation**: relative error at K = 1,024 - 16,384 (M = N = 256, uniform data on [0, 1], one
  scale per tensor, bf16 output) of the kernel with and without fast accumulation.

Raw log, never edited.
"""

from __future__ import annotations

import time
import traceback

import torch

from course_lib import correctness, fp8
from course_lib.gemm import relative_error
from course_lib.kernels.coalescing_and_triton import fast_fp8
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 6144, 4096), (4096, 14336, 4096), (4096, 4096, 14336),
          (8192, 4608, 3584), (2048, 2304, 768), (2048, 4096, 4096), (16, 4096, 4096), (64, 14336, 4096)]
# (block_m, block_n, block_k, num_warps, num_stages, tensor descriptors)
CANDIDATES = [(256, 128, 128, 8, 3, False), (128, 128, 128, 8, 4, False), (64, 64, 128, 4, 4, False),
              (64, 128, 128, 4, 4, False),
              (256, 128, 128, 8, 3, True), (256, 128, 128, 8, 4, True), (128, 256, 128, 8, 3, True),
              (128, 128, 128, 8, 4, True), (128, 128, 128, 4, 4, True), (128, 128, 256, 8, 3, True),
              (64, 64, 128, 4, 4, True), (64, 128, 128, 4, 4, True), (64, 64, 256, 4, 4, True)]


def tflops(shape, ms: float) -> float:
    M, N, K = shape
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def main() -> int:
    out, save = runlog.start(__doc__, 2, check={}, sweep=[], accumulation=[])

    for scaling in ("tensor", "row"):
        for fast, tma in ((False, False), (True, False), (False, True), (True, True)):
            label = f"{scaling}{' fast' if fast else ''}{' tma' if tma else ''}"

            def fn(qa, qw, fast=fast, tma=tma):
                M, N, K = qa.values.shape[0], qw.values.shape[0], qa.values.shape[1]
                cfg = fast_fp8.fp8_config(M, N, K)
                return fast_fp8.fp8_matmul(qa, qw, fast_fp8.Fp8Config(
                    **{**cfg.__dict__, "fast_accumulation": fast, "descriptors": tma}))
            try:
                rep = correctness.check(fn, "e4m3", scaling=scaling)
                out["check"][label] = "passed: " + ", ".join(f"{r.shape} {r.rel_error:.1e}" for r in rep.results)
            except Exception as e:  # noqa: BLE001 - recorded, then the next
                out["check"][label] = f"FAILED: {type(e).__name__}: {e}"[:2000]
            print("check", label, "->", out["check"][label][:400], flush=True)
            save()

    for shape in SHAPES:
        M, N, K = shape
        qa, qw = fp8.fp8_inputs(M, N, K, "tensor", seed=0)
        ref = fp8.cublas_fp8(qa, qw)
        row = {"shape": list(shape)}

        row["cublas ms"] = time_fn(lambda: fp8.cublas_fp8(qa, qw)).median_ms
        row["cublas fast ms"] = time_fn(lambda: fp8.cublas_fp8(qa, qw, fast_accumulation=True)).median_ms
        best = None
        for cand in CANDIDATES:
            bm, bn, bk, w, s, d = cand
            cfg = fast_fp8.Fp8Config(bm, bn, bk, num_warps=w, num_stages=s, descriptors=d)
            key = key_of(cand)
            try:
                c = fast_fp8.fp8_matmul(qa, qw, cfg)
                err = relative_error(c, ref)
                if err > 1e-2:
                    row[key] = f"wrong: {err:.2e} from cuBLAS"
                    continue
                ms = time_fn(lambda: fast_fp8.fp8_matmul(qa, qw, cfg)).median_ms
                row[key] = ms
                if best is None or ms < row[best]:
                    best = key
            except Exception as e:  # noqa: BLE001 - a configuration that does not compile or fit
                row[key] = f"{type(e).__name__}: {e}"[:200]
        row["default"] = str(fast_fp8.fp8_config(M, N, K))
        row["default ms"] = time_fn(lambda: fast_fp8.fp8_matmul(qa, qw)).median_ms
        if best:
            bm, bn, bk, w, s, d = next(c for c in CANDIDATES if key_of(c) == best)
            cfg = fast_fp8.Fp8Config(bm, bn, bk, num_warps=w, num_stages=s, descriptors=d, fast_accumulation=True)
            row["best"] = best
            row["best fast ms"] = time_fn(lambda: fast_fp8.fp8_matmul(qa, qw, cfg)).median_ms
        out["sweep"].append(row)
        msg = (f"{str(shape):<22} cuBLAS {tflops(shape, row['cublas ms']):6.0f} (fast {tflops(shape, row['cublas fast ms']):5.0f})"
               f" | default {tflops(shape, row['default ms']):6.0f}")
        if best:
            msg += (f" | best {best} {tflops(shape, row[best]):6.0f} = {100 * row['cublas ms'] / row[best]:4.0f}%"
                    f" (fast {tflops(shape, row['best fast ms']):5.0f})")
        print(msg + " TFLOP/s", flush=True)
        for k, v in row.items():
            if isinstance(v, str) and ("Error" in v or "wrong" in v):
                print(f"   {k}: {v}", flush=True)
        save()

    out["blockscaled"] = []
    try:
        rep = correctness.check(fast_fp8.fp8_matmul_blockscaled, "e4m3", scaling="block")
        out["check"]["block"] = "passed: " + ", ".join(f"{r.shape} {r.rel_error:.1e}" for r in rep.results)
    except Exception as e:  # noqa: BLE001
        out["check"]["block"] = f"FAILED: {type(e).__name__}: {e}"[:2000]
    print("check block ->", out["check"]["block"][:400], flush=True)
    for shape in SHAPES:
        M, N, K = shape
        qa, qw = fp8.fp8_inputs(M, N, K, "block", seed=0)
        row = {"shape": list(shape)}
        try:
            row["cublas block ms"] = time_fn(lambda: fp8.cublas_fp8(qa, qw)).median_ms
        except Exception as e:  # noqa: BLE001 - cuBLAS refuses some shapes in blocks
            row["cublas block"] = f"{type(e).__name__}: {e}"[:200]
        ta, tw = fp8.fp8_inputs(M, N, K, "tensor", seed=0)
        row["cublas tensor ms"] = time_fn(lambda: fp8.cublas_fp8(ta, tw)).median_ms
        for bm, bn, w, st in ((256, 128, 8, 3), (128, 128, 8, 4), (128, 128, 4, 4), (64, 128, 4, 4), (64, 64, 4, 4)):
            cfg = fast_fp8.Fp8Config(bm, bn, 128, num_warps=w, num_stages=st)
            key = f"{bm}x{bn}x128_w{w}_s{st}"
            try:
                fast_fp8.fp8_matmul_blockscaled(qa, qw, cfg)
                row[key] = time_fn(lambda: fast_fp8.fp8_matmul_blockscaled(qa, qw, cfg)).median_ms
            except Exception as e:  # noqa: BLE001
                row[key] = f"{type(e).__name__}: {e}"[:200]
        out["blockscaled"].append(row)
        times = {k: v for k, v in row.items() if "_w" in k and isinstance(v, float)}
        best = min(times, key=times.get) if times else None
        print(f"{str(shape):<22} blocks: cuBLAS {tflops(shape, row['cublas block ms']) if 'cublas block ms' in row else 0:6.0f}"
              f" (per tensor {tflops(shape, row['cublas tensor ms']):6.0f})"
              + (f" | Triton best {best} {tflops(shape, times[best]):6.0f}" if best else ""), flush=True)
        save()

    for K in (1024, 4096, 16384):
        a = torch.rand(256, K, device="cuda")
        w = torch.rand(256, K, device="cuda")
        qa, qw = fp8.quantize(a), fp8.quantize(w)
        ref = qa.dequantize() @ qw.dequantize().t()
        r = {"K": K, "data": "uniform 0-1", "out": "bf16"}
        for fast in (False, True):
            cfg = fast_fp8.Fp8Config(128, 128, 128, fast_accumulation=fast)
            r[f"fast={fast}"] = relative_error(fast_fp8.fp8_matmul(qa, qw, cfg), ref)
        r["cublas"] = relative_error(fp8.cublas_fp8(qa, qw), ref)
        out["accumulation"].append(r)
        print(f"K={K}: promoted {r['fast=False']:.2e}, fast {r['fast=True']:.2e}, cuBLAS {r['cublas']:.2e}", flush=True)
        save()
    print("wrote the raw log")
    return 0


def key_of(c) -> str:
    bm, bn, bk, w, s, d = c
    return f"{bm}x{bn}x{bk}_w{w}_s{s}{'_tma' if d else ''}"


if __name__ == "__main__":
    t0 = time.time()
    try:
        rc = main()
    except Exception:
        traceback.print_exc()
        rc = 1
    print(f"{time.time() - t0:.0f} s")
    raise SystemExit(rc)
