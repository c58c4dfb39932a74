"""Stage 6 at the small squares: how much of its time is per K-slice, how much is paid once (issue 38).

    source tools/gpu_env.sh && python3 experiments/gpu_tc6_fixed_cost.py --out $OUT/fixed_cost.json

At M = N = 512 and 1024 the 128 x 64 and 128 x 128 tiles (whole tiles, forced) and cuBLAS are timed in
GPU time (``course_lib.timing.time_fn``, bench's timer: L2 flushed before each run, the host's time
kept out) in alternating rounds at K = 64 ... 4096, so one CTA's tile goes from one K-slice of 64 to
64 of them while the grid stays the same. A straight line through time against slices splits each
kernel's time into a part paid once per launch (launch, prologue, the first slice's load, the
epilogue, the exit: the intercept) and a part per slice (the slope). The earlier profile (1024^3,
H100: ours 10.4 us, cuBLAS 5.8 us; 512^3 7.0 against 3.2) could not tell the two apart. cuBLAS's
kernel at each shape is named from torch.profiler, since it may change kernel with K. Environment:
``LABEL`` names the run (the kernel variant built). Raw log, never edited.

    python3 experiments/gpu_tc6_fixed_cost.py --launch 64|cublas

launches stage 6 (128 x 64 whole tiles, forced) or cuBLAS at 1024^3 twice and exits, for Nsight Compute
to profile the second launch (experiments/run_on_gpu.sh, section ``fixed_cost``).

Not yet run on a GPU (experiments/JOURNAL.md: when it was written, and why).
"""

from __future__ import annotations

import os
import statistics
import sys

import torch

import course_lib
from course_lib.kernels import tensor_cores as tc
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

SIDES = (512, 1024)
KS = (64, 128, 256, 512, 1024, 2048, 4096)
ROUNDS, BUDGET_MS = 3, 20.0


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope of ys against xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def cublas_kernel(a: torch.Tensor, b: torch.Tensor) -> str:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return max(set(names), key=names.count) if names else "?"


def launch_twice(what: str) -> int:
    """Stage 6 with 128 x 64 tiles (``what`` = "64") or cuBLAS at 1024^3, twice: ncu profiles the second."""
    a = torch.randn(1024, 1024, device="cuda").to(torch.bfloat16)
    b = torch.randn(1024, 1024, device="cuda").to(torch.bfloat16)
    fn = torch.matmul if what == "cublas" else tc.make_gemm(
        "tc_6_tma_store", shape_multiple=course_lib.get_stage("tc_6_tma_store").shape_multiple, group_m=8,
        max_ctas=torch.cuda.get_device_properties(0).multi_processor_count,
        schedule=tc.SCHEDULE_CODES["whole tiles"], block_n=int(what))
    for _ in range(2):
        fn(a, b)
    torch.cuda.synchronize()
    return 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--launch":
        return launch_twice(sys.argv[2])
    out, save = runlog.start(__doc__, part=2, label=os.environ.get("LABEL", ""), rows=[], fits=[])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rule = course_lib.get_stage("tc_6_tma_store").shape_multiple
    fns = {f"128x{bn}": tc.make_gemm("tc_6_tma_store", shape_multiple=rule, group_m=8, max_ctas=sms,
                                     schedule=tc.SCHEDULE_CODES["whole tiles"], block_n=bn) for bn in (64, 128)}
    fns["cublas"] = torch.matmul
    for side in SIDES:
        for k in KS:
            gen = torch.Generator(device="cuda").manual_seed(k)
            a = torch.randn(side, k, generator=gen, device="cuda").to(torch.bfloat16)
            b = torch.randn(k, side, generator=gen, device="cuda").to(torch.bfloat16)
            ref = a.double() @ b.double()
            for name, fn in fns.items():
                err = (fn(a, b).double() - ref).norm() / ref.norm()
                assert err < 1e-2, f"{name} at {side}x{side}x{k}: relative error {err:.2e}"
            times: dict[str, list[float]] = {n: [] for n in fns}
            for _ in range(ROUNDS):
                for name, fn in fns.items():
                    times[name].append(time_fn(lambda: fn(a, b), budget_ms=BUDGET_MS).median_ms * 1e3)
            row = {"M": side, "N": side, "K": k, "slices": k // 64, "cublas_kernel": cublas_kernel(a, b),
                   **{f"{n}_us": statistics.median(t) for n, t in times.items()}}
            out["rows"].append(row)
            print(f"{side}x{side}x{k:<5} " + "  ".join(f"{n} {row[f'{n}_us']:6.2f} us" for n in fns)
                  + f"  [{row['cublas_kernel'][:60]}]", flush=True)
            save()
    for side in SIDES:
        rows = [r for r in out["rows"] if r["M"] == side]
        for name in fns:
            once, per = fit([r["slices"] for r in rows], [r[f"{name}_us"] for r in rows])
            out["fits"].append({"side": side, "kernel": name, "once_us": once, "per_slice_us": per})
            print(f"fit {side}: {name:<8} once {once:6.2f} us  per slice {per:6.3f} us", flush=True)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
