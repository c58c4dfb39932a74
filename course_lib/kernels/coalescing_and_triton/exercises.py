"""The last of notebook 04's puzzles, the masked GEMM with its K tail: the reference solution, and
the wrapper that launches a learner's kernel as a GEMM ``fn(a, b) -> c`` for ``course_lib.check``
(``course_lib.exercises.coalescing_and_triton.masked_gemm`` checks it)."""

from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

from course_lib.gemm import new_output, prepare

# BLOCK_M = BLOCK_N = BLOCK_K of the puzzle's launch: the smallest tile tl.dot takes is 16, and 32
# leaves K tails and edges of C at every awkward shape the check runs.
EXERCISE_BLOCK = 32


@triton.jit
def exercise_tail_solution_kernel(
    # Pointers to matrices
    a_ptr, b_ptr, c_ptr,
    # Matrix dimensions: A is M x K, B is K x N, C is M x N
    M, N, K,
    # Strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    # Meta-parameters
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """The masked GEMM, reference solution: masks at every edge, and a K loop that also covers the
    last, partial K-slice (the K tail)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, tl.cdiv(K, BLOCK_K)):  # ceil(K / BLOCK_K) blocks, not K // BLOCK_K
        k = kb * BLOCK_K + ks
        # Every edge a block can cross is masked: rows past M, columns past N, and k past K in the
        # last slice; masked-off elements read as 0.0, which adds nothing to the sums.
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # exact fp32: checked against fp32's tolerance
    # Rows past M and columns past N of the last tiles are not written: they are outside C.
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def exercise_gemm(kernel: Any, block: int = EXERCISE_BLOCK) -> Callable[[object, object], object]:
    """The masked-GEMM puzzle: wrap a learner's kernel (signature of :func:`exercise_tail_solution_kernel`) as
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
