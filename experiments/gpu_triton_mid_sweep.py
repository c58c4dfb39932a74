"""triton_fast's configurations at the shapes where it falls behind cuBLAS: mid-size squares, M from 96
to 256, and layers with fewer whole tiles than SMs (issue 38).

    python experiments/gpu_triton_mid_sweep.py --out $OUT/triton_mid_sweep.json

At each shape (bf16), every configuration of a grid - tiles 64/128 x 64/128/256 with K-slices of 64
or 128, 4 or 8 warps, 3, 4 or 6 stages in flight, persistent or one program per tile, split-K 1 to 4 -
that fits 227 KB of shared memory is launched through ``fast_launch.fast_matmul`` (so through the
same wrapper as the autotuner's candidates), checked once against the float64 product, and timed in
GPU time with the course's timer (``course_lib.timing.time_fn``, 25 ms budget) beside cuBLAS
(``torch.matmul``) timed the same way. Printed per shape: cuBLAS, the autotuner's current candidates'
best, and the five best of the grid, as % of cuBLAS. The configurations that win are candidates for
``autotune.few_tile_configs`` and ``small_m_configs``.

Raw log, never edited.
"""

from __future__ import annotations

import itertools
import time

import torch
import triton

import course_lib
from course_lib.gemm import relative_error
from course_lib.kernels.coalescing_and_triton import autotune
from course_lib.kernels.coalescing_and_triton.fast_configs import FastConfig
from course_lib.kernels.coalescing_and_triton.fast_launch import fast_matmul
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

SHAPES = [("1024^3", (1024, 1024, 1024)), ("1536^3", (1536, 1536, 1536)), ("2048^3", (2048, 2048, 2048)),
          ("3072^3", (3072, 3072, 3072)), ("gpt2 qkv 2k", (2048, 2304, 768)), ("llama3 o 512", (512, 4096, 4096)),
          ("llama3 qkv M=96", (96, 6144, 4096)), ("llama3 down M=256", (256, 4096, 14336))]
SMEM = 227 * 1024


def grid() -> list[FastConfig]:
    out = []
    for bm, bn, bk, w, s, persistent, split in itertools.product(
            (64, 128), (64, 128, 256), (64, 128), (4, 8), (3, 4, 6), (False, True), (1, 2, 4)):
        if (bm * bk + bk * bn) * 2 * s > SMEM - bm * bn * 2 or (persistent and split > 1):
            continue
        if bm * bn // (32 * w) > 128 or (bm == 64 and w == 8 and bn < 256) or (bk == 128 and s > 4):
            continue  # fp32 accumulators above 128 registers a thread spill; tiny tiles on 8 warps idle
        out.append(FastConfig(bm, bn, bk, group_m=8, num_warps=w, num_stages=s, persistent=persistent,
                              split_k=split))
    return out


def main() -> int:
    out, save = runlog.start(__doc__, 1, shapes=[])
    course_lib.describe()
    configs = grid()
    print(f"{len(configs)} configurations per shape", flush=True)
    t0 = time.time()
    for label, (M, N, K) in SHAPES:
        a, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
        ref = a.double() @ b.double()
        cublas_ms = time_fn(lambda: torch.matmul(a, b), budget_ms=25).median_ms
        row = {"label": label, "shape": [M, N, K], "cublas_us": 1e3 * cublas_ms, "configs": {}}
        current = {c.label for c in autotune.shape_candidates("bf16", M, N, K, course_lib.backend.sm_count())}
        for cfg in configs:
            if cfg.split_k > 1 and triton.cdiv(K, cfg.block_k) < 4 * cfg.split_k:
                continue
            try:
                c = fast_matmul(a, b, "bf16", cfg)
                err = relative_error(c, ref)
                if not err < 1e-2:
                    row["configs"][cfg.label] = {"error": err}
                    continue
                ms = time_fn(lambda: fast_matmul(a, b, "bf16", cfg), budget_ms=25).median_ms
            except (triton.runtime.errors.OutOfResources, ValueError) as e:
                row["configs"][cfg.label] = {"skipped": f"{type(e).__name__}"}
                continue
            row["configs"][cfg.label] = {"pct": 100 * cublas_ms / ms, "us": 1e3 * ms}
        timed = sorted(((v["pct"], k) for k, v in row["configs"].items() if "pct" in v), reverse=True)
        now = max((p for p, k in timed if k in current), default=None)
        row["best_current_pct"] = now
        out["shapes"].append(row)
        save()
        print(f"{label:<20} cuBLAS {row['cublas_us']:7.1f} us | current best "
              f"{now if now is None else round(now, 1)} % | grid: " + ", ".join(f"{k} {p:.1f}" for p, k in timed[:5])
              + f"  [{time.time() - t0:.0f} s]", flush=True)
    return 0


if __name__ == "__main__":
    runlog.run(main)
