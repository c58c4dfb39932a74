"""A loop over tiles with a tail mask: the sum of every row of a matrix (notebook 04).

One program per block of ``BLOCK_R`` rows walks along the columns in tiles of ``BLOCK_C``, adds each
tile's rows with ``tl.sum`` and stores one sum per row. The last tile of a row usually hangs over
its end, so its mask cuts the columns at ``C`` as well as the rows at ``R``. It is the tiled GEMM's
K loop with the multiplication taken out: a loop over K-slices whose last slice is masked.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from course_lib import backend
from course_lib.gemm import new_array
from course_lib.kernels.coalescing_and_triton.common import check_tensor

ROW_BLOCK = 16  # rows per program
COL_BLOCK = 32  # columns per tile: the loop takes ceil(C / COL_BLOCK) steps along a row
ROW_SUMS_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def row_sums_kernel(
    # Pointers: x is the R x C matrix, out the R sums
    x_ptr, out_ptr,
    # Matrix dimensions
    R, C,
    # Strides of x: elements to step to the next row (first) or the next column (second)
    stride_xr, stride_xc,
    # Meta-parameters
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # the rows this program sums
    acc = tl.zeros((BLOCK_R,), dtype=tl.float32)                # fp32 sums, whatever x's type
    for c0 in range(0, C, BLOCK_C):                            # ceil(C / BLOCK_C) tiles, the last partial
        cols = c0 + tl.arange(0, BLOCK_C)
        # The tail mask: the last tile's columns past C are not read; other=0.0 adds nothing.
        mask = (rows[:, None] < R) & (cols[None, :] < C)
        tile = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask, other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=1)             # one partial sum per row
    # out's element type (out_ptr.dtype.element_ty): the fp32 sums are rounded to it as they are stored
    tl.store(out_ptr + rows, acc.to(out_ptr.dtype.element_ty), mask=rows < R)


def _check_matrix(x: object) -> torch.Tensor:
    check_tensor("row_sums", "x", x, ndim=2, what="2-D matrix", reshape_hint="for a vector use x.reshape(1, -1)",
                 dtypes=ROW_SUMS_DTYPES, verb="sums")
    if 0 in x.shape:
        raise ValueError(f"row_sums: x is empty (shape {tuple(x.shape)}); it needs a row and a column")
    return x


def row_sums(x: torch.Tensor, kernel=row_sums_kernel, block_r: int = ROW_BLOCK, block_c: int = COL_BLOCK) -> torch.Tensor:
    """The sum of each row of ``x`` (R x C, any strides) with ``kernel`` (by default
    :func:`row_sums_kernel`): one program per ``block_r`` rows, tiles of ``block_c`` columns."""
    # ---- check ---------------------------------------------------------------------------------
    x = _check_matrix(x)
    for name, v in (("block_r", block_r), ("block_c", block_c)):
        if v < 1 or v & (v - 1):
            raise ValueError(f"row_sums: {name} must be a power of two (tl.arange needs one), not {v}")
    if x.dtype == torch.bfloat16 and not backend.get().is_gpu:
        # Triton's interpreter has no bf16 arithmetic; widening to fp32 is exact, and the kernel
        # sums in fp32 on a GPU too: the same result.
        return row_sums(x.float(), kernel, block_r, block_c).to(torch.bfloat16)

    # ---- allocate (NaN while a check runs, so a sum never written cannot pass) -----------------
    R, C = x.shape
    out = new_array((R,), x.dtype, x.device, name="out")

    # ---- launch: a 1-D grid of ceil(R / block_r) programs --------------------------------------
    kernel[(triton.cdiv(R, block_r),)](x, out, R, C, x.stride(0), x.stride(1), BLOCK_R=block_r, BLOCK_C=block_c)
    return out
