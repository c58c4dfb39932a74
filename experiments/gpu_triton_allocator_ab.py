"""triton_fast's host time per call with its descriptor allocator as it is (a look-up by device and raw
stream) against the allocator before (every launch through ``common.stream_buffer``, which queries the
current stream and device), and ``torch.matmul``: a 64 x 64 x 64 bf16 product called back to back, 2000
calls a round, the three alternating for 7 rounds in one process (``triton.set_allocator`` switches).

    source tools/gpu_env.sh && python3 experiments/gpu_triton_allocator_ab.py

Raw output, never edited (runs/2026-12-06_0520_h100_rule: the journal quotes it).
"""

import statistics
import time

import torch
import triton
from triton.runtime import _allocation

import course_lib
from course_lib import registry
from course_lib.kernels.coalescing_and_triton import common

CALLS, ROUNDS = 2000, 7


def main() -> int:
    a, b = course_lib.random_inputs(64, 64, 64, "bf16", seed=0)
    fn = registry.get_stage("triton_fast").gemm("bf16")
    for _ in range(200):  # plans the shape and sets the course's allocator
        fn(a, b)
    torch.cuda.synchronize()
    new = _allocation._allocator.get()

    def old(size: int, alignment: int, stream: int | None) -> torch.Tensor:  # the allocator before
        return common.stream_buffer("descriptors", size, torch.device("cuda", torch.cuda.current_device()))

    def per_call(f) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            f(a, b)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / CALLS * 1e6

    res: dict[str, list[float]] = {"new": [], "old": [], "torch.matmul": []}
    for _ in range(ROUNDS):
        triton.set_allocator(new)
        res["new"].append(per_call(fn))
        triton.set_allocator(old)
        res["old"].append(per_call(fn))
        res["torch.matmul"].append(per_call(torch.matmul))
    triton.set_allocator(new)
    print(torch.cuda.get_device_name(), f"64^3 bf16, us per call, {ROUNDS} alternating rounds of {CALLS} calls")
    for k, v in res.items():
        print(f"{k:14} median {statistics.median(v):.2f} min {min(v):.2f}  {[round(x, 1) for x in v]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
