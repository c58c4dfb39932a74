"""Where a final kernel's host time per call goes: cProfile over back-to-back 64 x 64 x 64 calls.

    python experiments/gpu_host_profile.py > $OUT/host_profile.log
    python experiments/gpu_host_profile.py fp8 > $OUT/host_profile_fp8.log

``fp8``: host time per call of torch._scaled_mm, tc_7_fp8 and the Triton FP8 kernels with one scale per tensor, per row and per
block (e4m3, 64 x 64 x 512, alternating rounds), then one profiled round of tc_7_fp8 per row (issue 37's 1.45x).

Host time per call (``gpu_host_time.host_us_per_call``, best of 3 rounds of 2,000 calls) of
torch.matmul, tc_6 and triton_fast in bf16 in alternating rounds, then one profiled round of
triton_fast (the profiler slows every Python call; read the shares, not the times). Raw log.
"""

from __future__ import annotations

import cProfile
import pstats
import sys

import torch

import course_lib
from course_lib import registry
from gpu_host_time import host_us_per_call  # this folder is on sys.path


def _profile(fn, a, b) -> None:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        fn(a, b)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


FP8_SHAPE = (64, 64, 512)  # cuBLAS takes block scales only for K in multiples of 512 (course_lib.fp8.cublas)


def fp8_main() -> int:
    from course_lib import fp8
    from course_lib.kernels import tensor_cores as tc

    course_lib.describe()
    inputs = {s: fp8.fp8_inputs(*FP8_SHAPE, s, seed=0) for s in ("tensor", "row", "block")}
    from course_lib.kernels.coalescing_and_triton import fast_fp8

    fns = {f"{name} {s}": (fn, inputs[s]) for s in inputs
           for name, fn in (("torch._scaled_mm", fp8.cublas_fp8), ("tc_7_fp8", tc.tc_7_fp8),
                            ("triton_fp8", fast_fp8.fp8_matmul_blockscaled if s == "block" else fast_fp8.fp8_matmul))}
    for rnd in range(3):
        for name, (fn, (qa, qw)) in fns.items():
            print(f"round {rnd}: host time per call 64 x 64 x 512 e4m3 {name:<24}{host_us_per_call(fn, qa, qw):6.1f} us",
                  flush=True)
    _profile(tc.tc_7_fp8, *inputs["row"])
    return 0


def main() -> int:
    if sys.argv[1:] == ["fp8"]:
        return fp8_main()
    course_lib.describe()
    a, b = course_lib.random_inputs(64, 64, 64, "bf16", seed=0)
    fns = {"torch.matmul": torch.matmul, "tc_6_tma_store": registry.get_stage("tc_6_tma_store").gemm("bf16"),
           "triton_fast": registry.get_stage("triton_fast").gemm("bf16")}
    for rnd in range(3):
        for name, fn in fns.items():
            print(f"round {rnd}: host time per call 64^3 bf16 {name:<16}{host_us_per_call(fn, a, b):6.1f} us",
                  flush=True)
    _profile(fns["triton_fast"], a, b)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
