"""Launch one GEMM twice at 4096^3 so Nsight Compute can profile the second launch.

    PYTHONPATH=. COURSE_BACKEND=gpu ncu --clock-control none --kernel-name <filter> \
        --launch-skip 1 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
        python3 experiments/gpu_ncu_probe.py <what>

<what> and the kernel filter that selects its GEMM kernel:

    tc6        tc_6_tma_store, the course's stage 6                 kernel
    tc6_sk     the stage-6 variant with stream-K, one CTA per SM    kernel   (tc_6_stream_k.py)
    cublas16   torch.matmul, bf16                                   regex:gemm|xmma|cutlass|nvjet
    cublas16h  torch.matmul, fp16                                   regex:gemm|xmma|cutlass|nvjet
    triton16   triton_fast, bf16, first FAST_CONFIGS entry          fast_matmul_kernel
    triton16h  triton_fast, fp16, first FAST_CONFIGS entry          fast_matmul_kernel
    triton32   triton_fast, fp32 (ieee), first FAST_CONFIGS entry   fast_matmul_kernel
    cublas32   torch.matmul, fp32 (no TF32)                         regex:gemm|xmma|cutlass|nvjet

``--clock-control none`` keeps the GPU's own clocks (ncu would otherwise lock them to base), so
the SM frequency in SpeedOfLight is the one the recording ran at. Used for the evidence in the
closing notes of issues 5 and 6 (experiments/run_on_gpu.sh's ``ncu`` section runs them all).
"""

from __future__ import annotations

import sys

import torch

import course_lib
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.kernels import tensor_cores as tc

import tc_6_stream_k as variant

N = 4096


def _first_fast(dtype: str):
    return lambda x, y: c04.fast_matmul(x, y, dtype, c04.FAST_CONFIGS[dtype][0])


# <what>: (dtype, the GEMM). Built lazily: tc6 needs the CUDA extension.
PROBES = {
    "tc6": ("bf16", lambda: course_lib.get_stage("tc_6_tma_store").gemm("bf16")),
    "tc6_sk": ("bf16", lambda: variant.persistent_variant(cluster=2, group_m=8, max_ctas=course_lib.backend.sm_count(),
                                                          stream_k=True)),
    "cublas16": ("bf16", lambda: torch.matmul),
    "cublas16h": ("fp16", lambda: torch.matmul),
    "triton16": ("bf16", lambda: _first_fast("bf16")),
    "triton16h": ("fp16", lambda: _first_fast("fp16")),
    "triton32": ("fp32", lambda: _first_fast("fp32")),
    "cublas32": ("fp32", lambda: torch.matmul),
}


def main(what: str) -> int:
    torch.backends.cuda.matmul.allow_tf32 = False
    if what not in PROBES:
        raise SystemExit(f"unknown {what!r}: {', '.join(PROBES)}")
    dtype, make = PROBES[what]
    a, b = course_lib.random_inputs(N, N, N, dtype, seed=0)
    fn = make()
    for _ in range(2):  # the first launch compiles / builds; ncu profiles the second
        fn(a, b)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
