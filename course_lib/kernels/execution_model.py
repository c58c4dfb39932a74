"""Notebook ``00_gpu_execution_model``: two tiny kernels that show what a bounds check is for.

Each thread writes the number of its block into the element it covers; the grid is rounded up to
whole blocks, so some threads fall outside the array. ``block_number_checked`` stops them with a
bounds check; ``block_number_unchecked`` does not, and on the CPU backend numba's simulator stops at
the first index outside the array with an ``IndexError`` (on a GPU it would write past the array).
No stage: these compute no GEMM.
"""

from __future__ import annotations

from numba import cuda


@cuda.jit
def block_number_checked(out):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:  # the bounds check
        out[row, col] = cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x


@cuda.jit
def block_number_unchecked(out):
    col, row = cuda.grid(2)
    out[row, col] = cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x  # no bounds check
