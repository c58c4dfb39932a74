"""Stage 01, naive: one thread per output element (notebook ``01_naive``).

Thread (row, col) walks the whole K dimension: it reads row ``row`` of A and column ``col`` of B
from global memory and writes C[row, col]. Nothing is reused on chip, so every multiply-add needs
two loads from global memory (or from the caches).

Two index orders are taught:

* ``naive_kernel``: threadIdx.x runs along the *columns* of C. The 32 threads of a warp share one
  row and take consecutive columns, so their loads of B[k, col] and their stores of C[row, col] are
  consecutive addresses (coalesced), and A[row, k] is one address for the whole warp (a broadcast).
* ``naive_x_along_rows_kernel``: threadIdx.x runs along the *rows*. Now consecutive threads read
  A[row, k] a whole row (K elements) apart and store C a row apart: every thread of the warp touches
  a different 32-byte sector.

The German article's CUDA kernel indexes ``A[row * N + k]``; for an M x K matrix A the row
stride is K (the number of columns), so that kernel is wrong whenever the matrices are not square.
Here numba indexes 2-D arrays by (row, col) and the strides come from the array itself.
"""

from __future__ import annotations

import torch
from numba import cuda, float32

from course_lib.gemm import new_output, prepare
from course_lib.kernels._numba_support import cdiv, check_launch, kernel_array

# Threads per block along x and along y. 16 x 16 = 256 threads, the German article's configuration.
BLOCK_X = 16
BLOCK_Y = 16


@cuda.jit(fastmath=True)
def naive_kernel(a, b, c):
    # cuda.grid(2) returns (x, y) = (blockIdx.x * blockDim.x + threadIdx.x, ... .y): x is the column
    col, row = cuda.grid(2)
    M, K = a.shape
    N = b.shape[1]
    if row < M and col < N:  # the grid is rounded up to whole blocks: stop the threads past the edge
        acc = float32(0.0)  # float32, not 0.0: a Python float would make the sum float64
        for k in range(K):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


@cuda.jit(fastmath=True)
def naive_x_along_rows_kernel(a, b, c):
    # The same computation with the roles of x and y swapped: x is now the row.
    row, col = cuda.grid(2)
    M, K = a.shape
    N = b.shape[1]
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


def launch(kernel, a, b, *, block: tuple[int, int] = (BLOCK_X, BLOCK_Y), x_is_column: bool = True, stage: str = "your kernel"):
    """Run a one-thread-per-element kernel ``kernel(a, b, c)`` with the course's GEMM signature.

    Use it to turn a kernel of your own into ``fn(a, b) -> c`` for ``course_lib.check``:
    ``check(lambda a, b: launch(my_kernel, a, b))``. ``x_is_column`` says whether the kernel
    reads threadIdx.x as the column (the grid is then laid out to match).
    """
    ops = prepare(a, b, stage=stage, dtypes=("fp32",))
    check_launch(stage, block)
    c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
    along_x, along_y = (ops.N, ops.M) if x_is_column else (ops.M, ops.N)
    grid = (cdiv(along_x, block[0]), cdiv(along_y, block[1]))
    kernel[grid, block](kernel_array(ops.a), kernel_array(ops.b), kernel_array(c))
    return ops.give_back(c)


def naive(a, b, *, block: tuple[int, int] = (BLOCK_X, BLOCK_Y)):
    """C = A @ B with one thread per element, threadIdx.x along the columns of C (coalesced)."""
    return launch(naive_kernel, a, b, x_is_column=True, block=block, stage="naive")


def naive_x_along_rows(a, b, *, block: tuple[int, int] = (BLOCK_X, BLOCK_Y)):
    """C = A @ B with one thread per element, threadIdx.x along the rows of C (strided)."""
    return launch(naive_x_along_rows_kernel, a, b, x_is_column=False, block=block, stage="naive_x_along_rows")


def naive_global_loads(M: int, N: int, K: int) -> int:
    """Element loads the naive kernel issues: each of the M*N threads reads K of A and K of B.
    (The tiled kernel's count is :func:`course_lib.kernels.shared_memory_tiling.tiled_global_loads`.)"""
    return 2 * M * N * K


# ---- the first source article's kernel, ported as written --------------------------------------
@cuda.jit
def article_port_kernel(A, B, C, M, N, K):
    """The first source article's kernel, ported as written, with flat row-major arrays. (Exercise 1
    of notebook 01: for which shapes is it right? Find out with course_lib.check.)"""
    col, row = cuda.grid(2)
    if row < M and col < N:
        acc = float32(0.0)
        for k in range(K):
            acc += A[row * N + k] * B[k * N + col]
        C[row * N + col] = acc


def run_flat(kernel, a, b, *, block: tuple[int, int] = (BLOCK_X, BLOCK_Y)):
    """Run a flat-indexed kernel ``kernel(A, B, C, M, N, K)`` (1-D arrays, row-major) as fn(a, b)."""
    ops = prepare(a, b, stage="flat kernel", dtypes=("fp32",), contiguous=True)
    c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
    grid = (cdiv(ops.N, block[0]), cdiv(ops.M, block[1]))
    flat = [kernel_array(t.reshape(-1)) for t in (ops.a, ops.b, c)]
    kernel[grid, block](*flat, ops.M, ops.N, ops.K)
    return ops.give_back(c)
