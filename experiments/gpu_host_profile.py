"""Where triton_fast's host time per call goes: cProfile over back-to-back 64 x 64 x 64 calls.

    python experiments/gpu_host_profile.py > $OUT/host_profile.log

Host time per call (``gpu_host_time.host_us_per_call``, best of 3 rounds of 2,000 calls) of
torch.matmul, tc_6 and triton_fast in bf16 in alternating rounds, then one profiled round of
triton_fast (the profiler slows every Python call; read the shares, not the times). Raw log.
"""

from __future__ import annotations

import cProfile
import pstats

import torch

import course_lib
from course_lib import registry
from gpu_host_time import host_us_per_call  # this folder is on sys.path


def main() -> int:
    course_lib.describe()
    a, b = course_lib.random_inputs(64, 64, 64, "bf16", seed=0)
    fns = {"torch.matmul": torch.matmul, "tc_6_tma_store": registry.get_stage("tc_6_tma_store").gemm("bf16"),
           "triton_fast": registry.get_stage("triton_fast").gemm("bf16")}
    for rnd in range(3):
        for name, fn in fns.items():
            print(f"round {rnd}: host time per call 64^3 bf16 {name:<16}{host_us_per_call(fn, a, b):6.1f} us",
                  flush=True)
    fn = fns["triton_fast"]
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        fn(a, b)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
