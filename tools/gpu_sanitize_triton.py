"""Run the final Triton stages' launch paths at small shapes, for compute-sanitizer.

    PYTHONPATH=. COURSE_BACKEND=gpu compute-sanitizer --tool memcheck python3 tools/gpu_sanitize_triton.py

``triton_fast`` (bf16 and tf32, the dtypes of its two B layouts) and ``triton_fp8`` (per tensor, per
row, per block), each called three times per shape with fresh operands and outputs, so that the
plan's later launches run too: the direct launch with tensor descriptors encoded once per address
(``fast_launch.DescriptorArgs``), a new address for C every call. Shapes: a square of whole tiles, one
with partial tiles and a partial K slice, split-K's few tiles with a long K (``triton_fast``), and the
FP8 rule's "large" class at a shape of cut tiles (2300 x 1928 x 1040: the descriptor kernels, two
programs an SM per tensor, persistent with block scales). Exits non-zero if an output differs from
the float64 reference.
"""

from __future__ import annotations

import sys

import torch

import course_lib
from course_lib import fp8
from course_lib.correctness import tolerance
from course_lib.gemm import relative_error

FAST_SHAPES = ((256, 256, 256), (264, 520, 200), (64, 512, 8192))
FP8_SHAPES = ((256, 256, 256), (264, 528, 208), (2300, 1928, 1040))
CALLS = 3


def main() -> int:
    bad = 0
    for dtype in ("bf16", "tf32"):
        gemm = course_lib.get_stage("triton_fast").gemm(dtype)
        for seed, (M, N, K) in enumerate(FAST_SHAPES):
            for call in range(CALLS):
                a, b = course_lib.random_inputs(M, N, K, dtype, seed=10 * seed + call)
                err = relative_error(gemm(a, b), a.double() @ b.double())
                bad += report(f"triton_fast {dtype}", (M, N, K), call, err, tolerance(dtype, K))
    gemm = course_lib.get_stage("triton_fp8").gemm("e4m3")
    for scaling in ("tensor", "row", "block"):
        for seed, (M, N, K) in enumerate(FP8_SHAPES):
            for call in range(CALLS):
                qa, qw = fp8.fp8_inputs(M, N, K, scaling, seed=10 * seed + call)
                err = relative_error(gemm(qa, qw), qa.dequantize().double() @ qw.dequantize().double().T)
                bad += report(f"triton_fp8 {scaling}", (M, N, K), call, err, tolerance("e4m3", K))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    print(f"{bad} wrong" if bad else "all right")
    return 1 if bad else 0


def report(name: str, shape: tuple, call: int, err: float, bound: float) -> int:
    wrong = not err <= bound
    print(f"{name:20s} {str(shape):20s} call {call}: relative error {err:.2e}{'  WRONG' if wrong else ''}", flush=True)
    return int(wrong)


if __name__ == "__main__":
    sys.exit(main())
