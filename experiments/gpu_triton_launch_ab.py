"""The Triton stages' host time per call with their plans' direct launch (``fast_launch.KernelLaunch``:
the compiled kernel's launcher called with the current stream, no launch metadata and no hooks) against
the launch through Triton's runner (what it was before), beside cuBLAS: back-to-back calls, 2000 a round,
alternating for 7 rounds in one process.

    source tools/gpu_env.sh && python3 experiments/gpu_triton_launch_ab.py

bf16 64 x 64 x 64: ``torch.matmul``, stage 6, ``triton_fast`` direct and through the runner (issue 38's
bar: triton_fast <= 1.25 x torch.matmul). e4m3 128 x 128 x 512, one scale per tensor and per block:
cuBLAS's FP8 GEMM laid out once (``fp8.cublas_fp8_for``), ``triton_fp8`` direct and through the runner
(issue 37's bar: <= 1.25 x). "runner" sets ``fast_launch.no_launch_hooks`` to answer False, which
sends every launch through the runner as when a profiler's hook is set. Raw output, never edited.
"""

import statistics
import time

import torch

import course_lib
from course_lib import fp8, registry
from course_lib.kernels.coalescing_and_triton import fast_launch

CALLS, ROUNDS = 2000, 7
_DIRECT = fast_launch.no_launch_hooks


def per_call(f, *args) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        f(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / CALLS * 1e6


def rounds(label: str, fns: dict, args: tuple, reference: str) -> None:
    for f in fns.values():
        for _ in range(200):  # plans the shape, compiles, fills the caches
            f[0](*args)
    torch.cuda.synchronize()
    res: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(ROUNDS):
        for name, (f, direct) in fns.items():
            fast_launch.no_launch_hooks = _DIRECT if direct else (lambda: False)
            res[name].append(per_call(f, *args))
    fast_launch.no_launch_hooks = _DIRECT
    base = statistics.median(res[reference])
    print(f"\n{label}: us per call, {ROUNDS} alternating rounds of {CALLS} calls")
    for name, v in res.items():
        m = statistics.median(v)
        print(f"{name:26} median {m:6.2f} ({m / base:4.2f} x {reference})  min {min(v):6.2f}  {[round(x, 1) for x in v]}")


def main() -> int:
    course_lib.describe()
    a, b = course_lib.random_inputs(64, 64, 64, "bf16", seed=0)
    fast = registry.get_stage("triton_fast").gemm("bf16")
    rounds("bf16 64^3", {"torch.matmul": (torch.matmul, True),
                         "tc_6_tma_store": (registry.get_stage("tc_6_tma_store").gemm("bf16"), True),
                         "triton_fast direct": (fast, True), "triton_fast runner": (fast, False)},
           (a, b), "torch.matmul")
    triton_fp8 = registry.get_stage("triton_fp8").gemm("e4m3")
    for scaling in ("tensor", "block"):
        qa, qw = fp8.fp8_inputs(128, 128, 512, scaling, seed=0)
        rounds(f"e4m3 128 x 128 x 512, {scaling} scales",
               {"torch._scaled_mm": (fp8.cublas_fp8_for(qa, qw), True),
                "triton_fp8 direct": (triton_fp8, True), "triton_fp8 runner": (triton_fp8, False)},
               (qa, qw), "torch._scaled_mm")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
