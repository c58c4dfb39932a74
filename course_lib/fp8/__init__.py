"""Eight-bit floating point for GEMMs, one home per job:

* :mod:`.formats`: e4m3 and e5m2, :func:`quantize` with one scale per tensor, row, column or block,
  :class:`Quantized`;
* :mod:`.operands`: an FP8 GEMM's operands (``fn(qa, qw) -> C = A W^T`` in bf16), how each scaling
  scales them (:data:`OPERAND_SCALING`), random ones (:func:`fp8_inputs`) and the check every FP8
  kernel's wrapper runs (:func:`check_gemm_operands`) and what it decides once per kind of operands
  (:func:`fp8_plan_key`);
* :mod:`.cublas`: cuBLAS's FP8 GEMM, the yardstick (:func:`cublas_fp8`);
* :mod:`.outliers`: notebook 12's activations with outlier channels.

The FP8 kernels are in ``course_lib.kernels`` (Triton's ``fast_fp8``, CUDA's ``tc_7_fp8``), the model
of the tensor core's narrow adder in :mod:`course_lib.model.fp8_accumulator`, and ``course_lib.check``
checks any FP8 GEMM with ``dtype="e4m3"`` and a ``scaling``.
"""

from course_lib.fp8.cublas import SCALED_MM_BLOCK_SHAPE_MULTIPLE, SCALED_MM_SHAPE_MULTIPLE, cublas_fp8, cublas_fp8_for, scaled_mm_scales
from course_lib.fp8.formats import FORMATS, SCALINGS, Fp8Format, Quantized, get_format, quantize, round_to, scaling_block
from course_lib.fp8.operands import BLOCK_SCALES, OPERAND_SCALING, check_gemm_operands, fp8_inputs, fp8_plan_key, scaling_of
from course_lib.fp8.outliers import OUTLIER_CHANNELS, outlier_activations, outlier_error

__all__ = [
    "BLOCK_SCALES", "FORMATS", "SCALED_MM_BLOCK_SHAPE_MULTIPLE", "SCALED_MM_SHAPE_MULTIPLE", "OPERAND_SCALING", "OUTLIER_CHANNELS", "SCALINGS", "Fp8Format", "Quantized",
    "check_gemm_operands", "cublas_fp8", "cublas_fp8_for", "fp8_inputs", "fp8_plan_key", "get_format", "outlier_activations", "outlier_error",
    "quantize", "round_to", "scaled_mm_scales", "scaling_block", "scaling_of",
]
