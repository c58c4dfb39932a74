"""Launch one course stage twice at 4096^3 so Nsight Compute can profile its second launch.

    COURSE_BACKEND=gpu PYTHONPATH=. ncu --clock-control none --kernel-name regex:<filter> \
        --launch-skip 1 --launch-count 1 --csv --page raw --metrics <list> \
        python3 experiments/ncu_course_stages.py <probe>

``experiments/ncu_course_stages.sh`` runs every probe with the metric list below and writes one CSV.
The first launch compiles (numba, Triton) or builds (the CUDA extension); ncu profiles the second.
"""

from __future__ import annotations

import sys

import torch

import course_lib
from course_lib.kernels.coalescing_and_triton import article

N = 4096

# probe: (stage or callable, dtype, ncu kernel-name regex)
PROBES = {
    "naive": ("naive", "fp32", "naive_kernel"),
    "naive_x_along_rows": ("naive_x_along_rows", "fp32", "naive_x_along_rows_kernel"),
    "shared_memory_tiling": ("shared_memory_tiling", "fp32", "tiled_kernel"),
    "coarsened_2x2": ("coarsened_2x2", "fp32", "coarsened_2x2_kernel"),
    "register_tiling": ("register_tiling", "fp32", "register_tiling_kernel"),
    "register_tiling_4x4_64": ("register_tiling_4x4_64", "fp32", "register_tiling_kernel"),
    "register_tiling_row_warps": ("register_tiling_row_warps", "fp32", "register_tiling_kernel"),
    # The article's two Triton kernels at BLOCK_SIZE 64, at 4096^3 (the notebook's analysis uses 64).
    "article_plain_ieee": (lambda a, b: article.article_experiment_gemm(a, b, block_size=64), "fp32", "tiled_matmul_kernel"),
    "article_transposed_ieee": (lambda a, b: article.article_experiment_gemm(a, b, block_size=64, transposed_y=True),
                                "fp32", "tiled_matmul_transposed_b_kernel"),
    "article_plain_tf32": (lambda a, b: article.article_experiment_gemm(a, b, block_size=64, input_precision="tf32"),
                           "fp32", "tiled_matmul_kernel"),
    "article_transposed_tf32": (lambda a, b: article.article_experiment_gemm(a, b, block_size=64, input_precision="tf32",
                                                                          transposed_y=True),
                                "fp32", "tiled_matmul_transposed_b_kernel"),
    # The tensor-core kernels are all called "kernel", in namespaces: matched on the demangled name.
    "tc_2_wgmma_tma": ("tc_2_wgmma_tma", "bf16", "stage2::kernel"),
    "tc_3_pipeline": ("tc_3_pipeline", "bf16", "stage3::kernel"),
}


def main(probe: str) -> int:
    if probe not in PROBES:
        raise SystemExit(f"unknown probe {probe!r}: {', '.join(PROBES)}")
    what, dtype, _ = PROBES[probe]
    fn = course_lib.get_stage(what).gemm(dtype) if isinstance(what, str) else what
    a, b = course_lib.random_inputs(N, N, N, dtype, seed=0)
    for _ in range(2):
        fn(a, b)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--filters":
        for name, (_, _, kernel) in PROBES.items():
            print(name, kernel)
        raise SystemExit(0)
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
