"""The Triton stages' host time per call with their plans' direct launch (``fast_launch.KernelLaunch``)
in its two forms against the launch through Triton's runner (what it was before the direct launch),
beside cuBLAS: back-to-back calls, 2000 a round, alternating for 7 rounds in one process.

    source tools/gpu_env.sh && python3 experiments/gpu_triton_launch_ab.py

The direct launch's forms: "C" calls the launcher's C function with the scratch from Triton's allocator
(what a plan does where ``fast_launch.c_launch_layout`` knows the launcher, Triton 3.6 and 3.7);
"launcher" calls the launcher object (the compiled kernel's ``run``), which does that work in Python
(each plan's ``c_launch`` set to None for the round). "runner" sets ``fast_launch.no_launch_hooks`` to
answer False, which sends every launch through the runner as when a profiler's hook is set.

bf16 64 x 64 x 64: ``torch.matmul``, stage 6 and ``triton_fast`` (issue 38's bar: triton_fast <= 1.25 x
torch.matmul). e4m3 128 x 128 x 512, one scale per tensor and per block: cuBLAS's FP8 GEMM laid out
once (``fp8.cublas_fp8_for``) and ``triton_fp8`` (issue 37's bar: <= 1.25 x). Raw output, never edited.
"""

import gc
import statistics
import time
import warnings

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


def plans() -> list:
    with warnings.catch_warnings():  # isinstance on some of PyTorch's objects warns (a FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return [o for o in gc.get_objects() if isinstance(o, fast_launch.KernelLaunch)]


def rounds(label: str, fns: dict, args: tuple, reference: str) -> None:
    """``fns``: {name: (function, how its Triton plans launch: "C", "launcher" or "runner")}."""
    for f in fns.values():
        for _ in range(200):  # plans the shape, compiles, fills the caches
            f[0](*args)
    torch.cuda.synchronize()
    c_launch = {id(p): p.c_launch for p in plans()}
    print(f"{label}: {sum(c is not None for c in c_launch.values())} of {len(c_launch)} plans call the C function")
    res: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(ROUNDS):
        for name, (f, how) in fns.items():
            fast_launch.no_launch_hooks = _DIRECT if how != "runner" else (lambda: False)
            for p in plans():
                p.c_launch = c_launch[id(p)] if how == "C" else None
            res[name].append(per_call(f, *args))
    fast_launch.no_launch_hooks = _DIRECT
    for p in plans():
        p.c_launch = c_launch[id(p)]
    base = statistics.median(res[reference])
    print(f"\n{label}: us per call, {ROUNDS} alternating rounds of {CALLS} calls")
    for name, v in res.items():
        m = statistics.median(v)
        print(f"{name:26} median {m:6.2f} ({m / base:4.2f} x {reference})  min {min(v):6.2f}  {[round(x, 1) for x in v]}")


def main() -> int:
    course_lib.describe()
    a, b = course_lib.random_inputs(64, 64, 64, "bf16", seed=0)
    fast = registry.get_stage("triton_fast").gemm("bf16")
    rounds("bf16 64^3", {"torch.matmul": (torch.matmul, "C"),
                         "tc_6_tma_store": (registry.get_stage("tc_6_tma_store").gemm("bf16"), "C"),
                         "triton_fast C": (fast, "C"), "triton_fast launcher": (fast, "launcher"),
                         "triton_fast runner": (fast, "runner")},
           (a, b), "torch.matmul")
    triton_fp8 = registry.get_stage("triton_fp8").gemm("e4m3")
    for scaling in ("tensor", "block"):
        qa, qw = fp8.fp8_inputs(128, 128, 512, scaling, seed=0)
        rounds(f"e4m3 128 x 128 x 512, {scaling} scales",
               {"torch._scaled_mm": (fp8.cublas_fp8_for(qa, qw), "C"),
                "triton_fp8 C": (triton_fp8, "C"), "triton_fp8 launcher": (triton_fp8, "launcher"),
                "triton_fp8 runner": (triton_fp8, "runner")},
               (qa, qw), "torch._scaled_mm")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
