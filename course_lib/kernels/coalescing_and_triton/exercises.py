"""Exercise 1 of notebook 04 (the K tail): the reference solution, and the wrapper that lets ``course_lib.check``
test a learner's kernel."""

from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from course_lib.gemm import new_output, prepare


@triton.jit
def exercise_tail_solution_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """The K-tail exercise, reference solution: the K loop must also cover the last, partial K-block."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # ceil(K / BLOCK_K) blocks, not K // BLOCK_K
        k = kb * BLOCK_K + ks
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def exercise_gemm(kernel: Any, block: int = 32) -> Callable[[object, object], object]:
    """The K-tail exercise: wrap a learner's kernel (signature of :func:`exercise_tail_solution_kernel`) as
    an fp32 GEMM ``fn(a, b) -> c`` that ``course_lib.check`` can test."""
    def gemm(a: object, b: object) -> object:
        ops = prepare(a, b, stage="exercise", dtypes=("fp32",))
        c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
        grid = (triton.cdiv(ops.M, block), triton.cdiv(ops.N, block))
        kernel[grid](ops.a, ops.b, c, ops.M, ops.N, ops.K, *ops.a.stride(), *ops.b.stride(), *c.stride(),
                     BLOCK_M=block, BLOCK_N=block, BLOCK_K=block)
        return ops.give_back(c)

    gemm.__name__ = getattr(kernel, "__name__", "kernel")  # what check's messages call it
    return gemm
