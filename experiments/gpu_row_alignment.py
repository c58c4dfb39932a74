"""Does a row that does not start on a 128-byte line slow the Hopper kernels down? triton_fast and
stage 6 at squares whose tile and K-slice counts are the same but whose rows are 128-byte aligned or
not, and at 3072^3 with one dimension at a time moved off the alignment (issue 38).

    source tools/gpu_env.sh && python3 experiments/gpu_row_alignment.py --out $OUT/row_alignment.json

In the H200 recording triton_fast bf16 takes 0.130 ms at 3000^3 and 0.090 ms at 3072^3 (62 against 86 %
of cuBLAS), with 24 x 24 tiles of 128 x 128 and 47 against 48 K-slices of 64 in both; its 128 x 128
candidate is 58 % slower at 3000^3 (the autotuning log of that recording). A 3000-wide bf16 row is 6000 bytes,
112 past a 128-byte line (a 3008-wide one, 6016 bytes, is 47 lines). Each row of A is K wide, each row of
B and of C N wide, so the shapes 3072 x 3072 x 3000 (A's rows off), 3072 x 3000 x 3072 (B's and C's) and
3000 x 3072 x 3072 (none off, the edge tiles of M only) say which operand it is. Each shape: triton_fast
as a user calls it (autotuned, its choice printed), stage 6, and three triton_fast configurations forced
(the persistent 128 x 128 x 64 and 128 x 256 x 64 candidates, which load through TMA, and a 128 x 128 tile
loaded through pointers), each with cuBLAS in alternating rounds in GPU time (``course_lib.bench.measure``: the float64
sanity check first, L2 flushed, host time kept out). Raw log, never edited.

``--b-k-major``: the hypothesis that triton_fast pays for B's rows off a line because it reads B in
N-major boxes (a BLOCK_K x BLOCK_N box: 256-512 bytes of each of BLOCK_K rows). At 3000^3, 3072^3 and
3072 x 3000 x 3072 (only B's and C's rows off), the two persistent candidates reading B as given (N-major
boxes) and reading B^T in K-major boxes (``b_layout="nk"``, 128 bytes of each of BLOCK_N rows, as stage
6 and cuBLAS read it), with B handed over as the transpose of an N x K matrix so that no copy is timed;
each against ``torch.matmul`` on the same operands, alternating, GPU time (``course_lib.timing.time_fn``).
"""

from __future__ import annotations

import sys
import time

import course_lib
from course_lib.bench import measure
from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.coalescing_and_triton import autotune
from course_lib.kernels.coalescing_and_triton.fast_configs import FastConfig
from course_lib.kernels.coalescing_and_triton.fast_launch import fast_matmul
import runlog  # this folder is on sys.path

SHAPES = [(s, s, s) for s in (1000, 1024, 3000, 3008, 3040, 3072)] + [
    (3072, 3072, 3000), (3072, 3000, 3072), (3000, 3072, 3072)]
FORCED = {"128x128 s6": FastConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=6, persistent=True),
          "128x256 s3": FastConfig(128, 256, 64, group_m=8, num_warps=8, num_stages=3, persistent=True),
          "128x128 ptr": FastConfig(128, 128, 64, group_m=8, num_warps=4, num_stages=4, loads="pointers")}


K_MAJOR_SHAPES = [(3000, 3000, 3000), (3072, 3072, 3072), (3072, 3000, 3072)]


def b_k_major() -> int:
    """The ``--b-k-major`` section (the docstring's last paragraph)."""
    import dataclasses

    import torch

    from course_lib.gemm import relative_error

    out, save = runlog.start(__doc__, 2, rows=[])
    course_lib.describe()
    for M, N, K in K_MAJOR_SHAPES:
        a, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
        # B as given for "kn"; for "nk" the same values stored N x K, so that reading B^T copies nothing
        operands = {"kn": b, "nk": b.T.contiguous().T}
        ref = a.double() @ b.double()
        line = f"{M}x{N}x{K}".ljust(16)
        for name, base in list(FORCED.items())[:2]:
            for layout in ("kn", "nk"):
                cfg, bl = dataclasses.replace(base, b_layout=layout), operands[layout]
                err = relative_error(fast_matmul(a, bl, "bf16", cfg), ref)
                us, cublas_us = runlog.versus(lambda: fast_matmul(a, bl, "bf16", cfg), lambda: torch.matmul(a, b))
                row = {"name": f"{name} {layout}", "shape": [M, N, K], "us": us, "cublas_us": cublas_us,
                       "pct": 100 * cublas_us / us, "rel_error_vs_float64": err}
                out["rows"].append(row)
                line += f" | {row['name']} {us:6.1f} us {row['pct']:5.1f} %"
        save()
        print(line + f" | cuBLAS {cublas_us:6.1f} us", flush=True)
    return 0


def main() -> int:
    if "--b-k-major" in sys.argv:
        sys.argv.remove("--b-k-major")
        return b_k_major()
    out, save = runlog.start(__doc__, 1, rows=[])
    course_lib.describe()
    tc.extension()
    t0 = time.time()
    targets = {"triton_fast": "triton_fast", "tc_6": "tc_6_tma_store",
               **{name: (lambda a, b, cfg=cfg: fast_matmul(a, b, "bf16", cfg)) for name, cfg in FORCED.items()}}
    for M, N, K in SHAPES:
        line = f"{M}x{N}x{K}".ljust(16)
        for name, gemm in targets.items():
            r = measure(gemm, "bf16", (M, N, K))
            row = {"name": name, "shape": [M, N, K], "us": 1e3 * r["ms"], "cublas_us": 1e3 * r["cublas_ms"],
                   "pct": 100 * r["ratio_to_cublas"], "rel_error_vs_cublas": r["rel_error_vs_cublas"]}
            out["rows"].append(row)
            line += f" | {name} {row['us']:6.1f} us {row['pct']:5.1f} %"
        line += f" | cuBLAS {row['cublas_us']:6.1f} us  [{time.time() - t0:.0f} s]"
        save()
        print(line, flush=True)
    out["tuning_log"] = [e for e in autotune.tuning_log() if e["dtype"] == "bf16"]
    save()
    for e in out["tuning_log"]:
        print(f"autotuned {e['M']}x{e['N']}x{e['K']}: {e['chosen']}")
    return 0


if __name__ == "__main__":
    runlog.run(main)
