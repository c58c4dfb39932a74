"""Stage 02, shared-memory tiling (notebook ``02_shared_memory_tiling``).

A block of TILE x TILE threads computes a TILE x TILE tile of C. It walks K in steps of TILE: at
each step every thread copies one element of A's tile and one of B's tile from global memory into
shared memory, the block waits, and then every thread does TILE multiply-adds reading only shared
memory. Each element brought from global memory is used TILE times, so global loads drop by a
factor of TILE compared with the naive kernel.

Two barriers per step, each for its own reason:

1. after the copy: no thread may read the tiles before *all* threads have written their element;
2. after the multiply-adds: no thread may overwrite the tiles with the next step's data while a
   slower thread is still reading this step's.

The German article's version stores ``B_shared[tx][ty]`` but reads ``B_shared[k][tx]`` — the
tile of B lands transposed and the result is wrong — and it sums ``TILE`` elements of a tile declared
``T`` wide. Below both tiles are stored as they are read (row = ty, column = tx) and one constant,
``TILE``, is used throughout. Unlike the article, the loads are predicated: elements past the edge of A
or B are read as 0 (they add nothing), so any M, N, K works.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from numba import cuda, float32

from course_lib.gemm import new_output, prepare
from course_lib.kernels._numba_support import cdiv, check_launch, kernel_array
from course_lib.model.hardware import itemsize

TILE_SIZES = (8, 16, 32)
DEFAULT_TILE = 32
FLOAT32_BYTES = itemsize("fp32")


@lru_cache(maxsize=None)
def make_tiled_kernel(TILE: int):
    """The tiled kernel for one TILE; numba compiles TILE in as a constant (loops unroll)."""

    @cuda.jit(fastmath=True)
    def tiled_kernel(a, b, c):
        a_tile = cuda.shared.array((TILE, TILE), float32)
        b_tile = cuda.shared.array((TILE, TILE), float32)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        M, K = a.shape
        N = b.shape[1]
        acc = float32(0.0)
        for k0 in range(0, K, TILE):
            # ---- copy one element of each tile; past the edge, a zero that adds nothing
            if row < M and k0 + tx < K:
                a_tile[ty, tx] = a[row, k0 + tx]
            else:
                a_tile[ty, tx] = float32(0.0)
            if k0 + ty < K and col < N:
                b_tile[ty, tx] = b[k0 + ty, col]
            else:
                b_tile[ty, tx] = float32(0.0)
            cuda.syncthreads()  # (1) the tiles are complete before anyone reads them
            # ---- TILE multiply-adds from shared memory
            for k in range(TILE):
                acc += a_tile[ty, k] * b_tile[k, tx]
            cuda.syncthreads()  # (2) everyone is done reading before the next copy overwrites
        if row < M and col < N:
            c[row, col] = acc

    return tiled_kernel


def launch_tiled(kernel, a, b, *, tile: int, stage: str = "your kernel"):
    """Run a kernel ``kernel(a, b, c)`` that computes one tile x tile tile of C per block of tile x tile
    threads as ``fn(a, b) -> c``: the course's kernel, yours (``check(lambda a, b:
    launch_tiled(my_kernel, a, b, tile=16))``) or the article's."""
    ops = prepare(a, b, stage=stage, dtypes=("fp32",))
    check_launch(stage, (tile, tile), shared_bytes=2 * tile * tile * FLOAT32_BYTES)
    c = new_output(ops.M, ops.N, torch.float32, ops.a.device)
    grid = (cdiv(ops.N, tile), cdiv(ops.M, tile))
    kernel[grid, (tile, tile)](kernel_array(ops.a), kernel_array(ops.b), kernel_array(c))
    return ops.give_back(c)


def shared_memory_tiling(a, b, *, tile: int = DEFAULT_TILE):
    """C = A @ B with TILE x TILE tiles of A and B staged in shared memory."""
    return launch_tiled(make_tiled_kernel(tile), a, b, tile=tile, stage="shared_memory_tiling")


def tiled_global_loads(M: int, N: int, K: int, tile: int) -> int:
    """Element loads from global memory the tiled kernel issues (zero-padded edges included):
    every block loads a TILE x TILE tile of A and of B at each of ceil(K / TILE) steps.
    (The naive kernel's count is :func:`course_lib.kernels.naive.naive_global_loads`.)"""
    blocks = cdiv(M, tile) * cdiv(N, tile)
    return blocks * cdiv(K, tile) * 2 * tile * tile


# ---- the first source article's tiled kernel, ported as written --------------------------------
ARTICLE_TILE = 16


@cuda.jit
def article_tiled_kernel(a, b, c):
    """The German article's tiled kernel, ported as written (sizes must be multiples of 16,
    as the article assumes). Run it with ``launch_tiled(article_tiled_kernel, a, b, tile=ARTICLE_TILE)``."""
    a_tile = cuda.shared.array((ARTICLE_TILE, ARTICLE_TILE), float32)
    b_tile = cuda.shared.array((ARTICLE_TILE, ARTICLE_TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * ARTICLE_TILE + ty
    col = cuda.blockIdx.x * ARTICLE_TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], ARTICLE_TILE):
        a_tile[ty, tx] = a[row, t + tx]
        b_tile[tx, ty] = b[t + ty, col]
        cuda.syncthreads()
        for k in range(ARTICLE_TILE):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    c[row, col] = acc
