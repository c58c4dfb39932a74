"""cuBLAS's FP8 GEMM, the yardstick of the course's FP8 kernels (``torch._scaled_mm``)."""

from __future__ import annotations

import torch

from course_lib.fp8.formats import Quantized
from course_lib.fp8.operands import check_gemm_operands, scaling_of

# torch._scaled_mm takes N and K in multiples of 16 (it refuses "mat2 shape (16x8) must be divisible
# by 16" on the H200 with torch 2.11), any M: course_lib.model.layout's shape rule.
SCALED_MM_SHAPE_MULTIPLE = (1, 16, 16)
# With DeepSeek-V3's block scales cuBLAS wants M and the number of 128-wide K blocks in multiples of 4
# (it pads its scale tensors so). On the H200 with torch 2.11 (experiments/JOURNAL.md, "cuBLAS's
# block-scaled GEMM wrong at some K"): at K = 768 and 1600 (6 and 13 K blocks) it returned results a
# relative 0.39-1.0 away from two kernels that pass course_lib.check, without an error; at M = 1 it
# refused (CUBLAS_STATUS_NOT_SUPPORTED). So the course asks it only for M a multiple of 4, K of 512.
SCALED_MM_BLOCK_SHAPE_MULTIPLE = (4, 16, 512)


def scaled_mm_scales(qa: Quantized, qw: Quantized) -> tuple[torch.Tensor, torch.Tensor]:
    """``qa``'s and ``qw``'s scales laid out as ``torch._scaled_mm(A, W^T, scale_a, scale_b)`` takes
    them (PyTorch's ``_scaled_mm`` checks, aten/src/ATen/native/cuda/Blas.cpp): per tensor, two 0-d
    tensors; per row, A's M x 1 and W's rows as C's columns, 1 x N; in blocks, A's M x K/128 with M
    contiguous ("outer-dim-major") and W's 128 x 128 blocks as blocks of W^T, K/128 x N/128."""
    scaling = scaling_of(qa, qw)
    sa, sw = qa.scales, qw.scales
    if scaling == "tensor":
        return sa.reshape(()), sw.reshape(())
    if scaling == "row":
        return sa, sw.reshape(1, -1)
    return sa.t().contiguous().t(), sw.t()


def cublas_fp8(qa: Quantized, qw: Quantized, *, fast_accumulation: bool = False,
               out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """cuBLAS's FP8 GEMM (``torch._scaled_mm``): C = A W^T in ``out_dtype``, each operand's scales
    passed as cuBLAS wants them (:func:`scaled_mm_scales`); partial sums promoted into fp32 unless
    ``fast_accumulation``. Needs FP8 tensor cores (compute capability 8.9 or newer) and N and K in
    multiples of 16 (:data:`SCALED_MM_SHAPE_MULTIPLE`). Each call checks the operands and lays out
    their scales again (with block scales a copy of A's on the GPU); :func:`cublas_fp8_for` does
    that once."""
    return cublas_fp8_for(qa, qw, fast_accumulation=fast_accumulation, out_dtype=out_dtype)(qa, qw)


def cublas_fp8_for(qa: Quantized, qw: Quantized, *, fast_accumulation: bool = False,
                   out_dtype: torch.dtype = torch.bfloat16):
    """:func:`cublas_fp8` for these two operands, checked and their scales laid out once: a function
    of (qa, qw) that only calls ``torch._scaled_mm``, as a caller who keeps the scales in cuBLAS's
    layout gets it (the yardstick ``course_lib.bench`` times). It refuses any other operands."""
    blocks = scaling_of(qa, qw) == "block"
    M, N, K, _, _ = check_gemm_operands(qa, qw, "cublas_fp8", blocks=blocks)
    if N % SCALED_MM_SHAPE_MULTIPLE[1] or K % SCALED_MM_SHAPE_MULTIPLE[2]:
        raise ValueError(f"cublas_fp8: torch._scaled_mm takes N and K in multiples of 16, not N={N}, K={K}; "
                         "pad W and the operands' K with zeros (exact), or use one of the course's FP8 kernels")
    if blocks and (M % SCALED_MM_BLOCK_SHAPE_MULTIPLE[0] or K % SCALED_MM_BLOCK_SHAPE_MULTIPLE[2]):
        raise ValueError(f"cublas_fp8: with block scales cuBLAS takes M in multiples of 4 and K of 512 (it gave "
                         f"wrong results at other K on the H200), not M={M}, K={K}; pad A's rows and both "
                         "operands' K with zeros (exact), or use one of the course's FP8 kernels")
    sa, sw = scaled_mm_scales(qa, qw)
    a, wt = qa.values, qw.values.t()

    def scaled_mm(qa2: Quantized, qw2: Quantized) -> torch.Tensor:
        if qa2 is not qa or qw2 is not qw:
            raise ValueError("cublas_fp8_for: made for other operands; call cublas_fp8_for(qa, qw) for these, "
                             "or cublas_fp8(qa, qw)")
        return torch._scaled_mm(a, wt, scale_a=sa, scale_b=sw, out_dtype=out_dtype, use_fast_accum=fast_accumulation)
    return scaled_mm
