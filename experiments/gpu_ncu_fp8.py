"""Launch one FP8 GEMM twice at 4096^3 so Nsight Compute can profile the second launch.

    PYTHONPATH=. COURSE_BACKEND=gpu ncu --clock-control none --kernel-name <filter> \
        --launch-skip 1 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --section MemoryWorkloadAnalysis_Tables python3 experiments/gpu_ncu_fp8.py <what> [M,N,K]

<what> (one scale per tensor unless named, e4m3 operands from a normal distribution):

    tc7         tc_7_fp8, promoted every 128 of K (128 x 128 tiles)     filter: regex:stage7
    tc7_fast    tc_7_fp8, fast accumulation (128 x 256 tiles)           filter: regex:stage7
    cublas      torch._scaled_mm, promoted                              filter: regex:gemm|xmma|cutlass|nvjet
    cublas_fast torch._scaled_mm, use_fast_accum                        filter: regex:gemm|xmma|cutlass|nvjet
    triton      the Triton kernel's default (fp8_matmul), promoted          filter: regex:fp8
    triton_row  the same with one scale per row                         filter: regex:fp8
    cublas_row  torch._scaled_mm with one scale per row                 filter: regex:gemm|xmma|cutlass|nvjet
    triton_block   fp8_matmul_blockscaled's default (1 x 128, 128 x 128)   filter: regex:fp8
    tc7_block   tc_7_fp8 with block scales                              filter: regex:stage7
    cublas_block   torch._scaled_mm with block scales                   filter: regex:gemm|xmma|cutlass|nvjet

M,N,K (default 4096,4096,4096) profiles another shape, e.g. a decode row: 16,4096,4096.

Used for the evidence on what limits stage 7's promoted mainloop (experiments/JOURNAL.md).
"""

from __future__ import annotations

import sys

import torch

from course_lib import fp8
from course_lib.kernels import tensor_cores as tc
from course_lib.kernels.coalescing_and_triton import fast_fp8

N = 4096
PROBES = {
    "tc7": lambda qa, qw: tc.tc_7_fp8(qa, qw),
    "tc7_fast": lambda qa, qw: tc.tc_7_fp8(qa, qw, fast_accumulation=True),
    "cublas": lambda qa, qw: fp8.cublas_fp8(qa, qw),
    "cublas_fast": lambda qa, qw: fp8.cublas_fp8(qa, qw, fast_accumulation=True),
    "triton": lambda qa, qw: fast_fp8.fp8_matmul(qa, qw),
    "triton_row": lambda qa, qw: fast_fp8.fp8_matmul(qa, qw),
    "cublas_row": lambda qa, qw: fp8.cublas_fp8(qa, qw),
    "triton_block": lambda qa, qw: fast_fp8.fp8_matmul_blockscaled(qa, qw),
    "tc7_block": lambda qa, qw: tc.tc_7_fp8(qa, qw),
    "cublas_block": lambda qa, qw: fp8.cublas_fp8(qa, qw),
}
SCALING = {"triton_row": "row", "cublas_row": "row", "triton_block": "block", "tc7_block": "block",
           "cublas_block": "block"}


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what not in PROBES or len(sys.argv) > 3:
        print(f"usage: gpu_ncu_fp8.py {{{'|'.join(PROBES)}}} [M,N,K]", file=sys.stderr)
        return 2
    shape = tuple(int(x) for x in sys.argv[2].split(",")) if len(sys.argv) == 3 else (N, N, N)
    qa, qw = fp8.fp8_inputs(*shape, SCALING.get(what, "tensor"), seed=0)
    for _ in range(2):
        PROBES[what](qa, qw)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
