"""The first Triton kernel of notebook 04: ``out = x + y`` for two vectors.

It shows the whole of Triton's model in six lines: one *program* per block of ``BLOCK`` elements,
``tl.program_id`` says which block, ``tl.arange`` names its elements, and a *mask* keeps the last
program, whose block hangs over the end of the vectors, from reading or writing past it. The
wrapper does what every wrapper of the course does, in the order of Triton's tutorials: check the
arguments, allocate the output, launch.
"""

from __future__ import annotations


import torch
import triton
import triton.language as tl

from course_lib import backend
from course_lib.gemm import new_array
from course_lib.kernels.coalescing_and_triton.common import check_tensor

VECTOR_BLOCK = 1024  # elements per program; tl.arange needs a power of two
VECTOR_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def vector_add_kernel(
    # Pointers to vectors
    x_ptr, y_ptr, out_ptr,
    # Length of the vectors
    n,
    # Meta-parameters
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)                       # which program: 0, 1, ..., ceil(n / BLOCK) - 1
    offsets = pid * BLOCK + tl.arange(0, BLOCK)  # the BLOCK elements this program owns
    mask = offsets < n                           # False where the last block runs past the end
    x = tl.load(x_ptr + offsets, mask=mask)      # masked-off elements are not read ...
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)  # ... and not written


def _check_vector(t: object, name: str) -> torch.Tensor:
    check_tensor("vector_add", name, t, ndim=1, what="1-D vector", reshape_hint=f"flatten it with {name}.reshape(-1)",
                 dtypes=VECTOR_DTYPES, verb="adds")
    if t.stride(0) != 1 and t.numel() > 1:
        raise ValueError(f"vector_add: {name} is not contiguous (stride {t.stride(0)}); the kernel reads "
                         f"neighbouring elements: pass {name}.contiguous()")
    return t


def vector_add(x: torch.Tensor, y: torch.Tensor, block: int = VECTOR_BLOCK, kernel=vector_add_kernel) -> torch.Tensor:
    """``x + y`` with ``kernel`` (by default :func:`vector_add_kernel`; notebook 04's puzzle passes
    yours): one program per ``block`` elements."""
    # ---- check ---------------------------------------------------------------------------------
    x, y = _check_vector(x, "x"), _check_vector(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"vector_add: x has {x.numel()} elements and y has {y.numel()}; they must be equal")
    if x.dtype != y.dtype:
        raise TypeError(f"vector_add: x is {x.dtype} but y is {y.dtype}; convert both to one type first")
    if block < 1 or block & (block - 1):
        raise ValueError(f"vector_add: block must be a power of two (tl.arange needs one), not {block}")
    if x.dtype == torch.bfloat16 and not backend.get().is_gpu:
        # Triton's interpreter has no bf16 arithmetic. Widening to fp32 is exact, and the GPU also
        # adds bf16 values in fp32 and rounds once: the same result.
        return vector_add(x.float(), y.float(), block, kernel).to(torch.bfloat16)

    # ---- allocate (NaN while course_lib.check runs, so an element never written cannot pass) -----
    n = x.numel()
    out = new_array(tuple(x.shape), x.dtype, x.device, name="out")

    # ---- launch: a 1-D grid of ceil(n / block) programs ----------------------------------------
    grid = (triton.cdiv(n, block),)
    if n:
        kernel[grid](x, y, out, n, BLOCK=block)
    return out
