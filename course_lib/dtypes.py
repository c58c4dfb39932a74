"""The course's dtypes: one record each, which every other table of the library reads.

A course dtype names the arithmetic a GEMM does, not only what its tensors hold: "fp32" means exact
IEEE fp32 multiply-adds; "tf32" means fp32 inputs rounded to TensorFloat-32 (10-bit mantissa) inside
the tensor cores, accumulated in fp32. Both take and return torch.float32 tensors, so the record, not
the tensor, tells them apart. "e4m3" is the FP8 GEMM of notebook 12: its operands are quantized
(``course_lib.fp8.Quantized``, each with its scales), so its GEMMs have their own signature
(``operands``). Adding a dtype is one record here plus the kernels that compute it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib.features import BF16_TENSOR_CORES, FP8_TENSOR_CORES, TF32_TENSOR_CORES, Feature


OPERANDS = ("matrix", "fp8")


@dataclass(frozen=True)
class CourseDtype:
    """Everything the library knows about one course dtype."""

    name: str  # the course's name: "fp32", "tf32", "fp16", "bf16", "e4m3"
    torch_dtype: torch.dtype  # what the inputs hold (and the output, for "matrix" operands)
    arithmetic: str  # in words, for tables and errors
    # What a GPU needs to compute it (course_lib.features), beyond what every stage needs.
    needs: tuple[Feature, ...]
    # Unit roundoff of the stored type (2^-p for p mantissa bits plus the implicit one) and the
    # relative error of one product as the tensor cores form it; course_lib.check's element bound
    # reads both (its comment derives them).
    unit_roundoff: float
    product_error: float
    # check's relative-error tolerance (Frobenius norm) at K <= 1024; it grows with sqrt(K / 1024).
    tolerance: float
    # bench refuses to time a stage whose output differs from cuBLAS's by more than this (loose on
    # purpose: check is the strict test; this catches a broken build).
    sanity: float
    # tl.dot's input_precision. "ieee": exact fp32 multiply-adds (on NVIDIA GPUs the CUDA cores' FMA
    # units, no tensor cores); "tf32": inputs rounded to TensorFloat-32 inside the tensor cores. For
    # 16-bit inputs the argument has no effect (Triton's tl.dot docs), so "ieee" keeps one kernel
    # signature. The interpreter computes tl.dot with numpy.matmul in fp32 and does not round to TF32,
    # so on the CPU "tf32" results are as exact as "fp32" ones.
    triton_precision: str
    triton_type: str  # the element type of Triton's pointers to it ("fp32" for tf32 too)
    # What its GEMMs take and give (OPERANDS): "matrix", the course's one signature fn(a, b) -> c on
    # tensors of torch_dtype (course_lib.gemm); "fp8", fn(qa, qw) -> C = A W^T in bf16 on
    # course_lib.fp8.Quantized operands scaled one of the ways of course_lib.fp8.OPERAND_SCALING.
    operands: str = "matrix"
    # check's tolerance holds for K <= tolerance_k and grows with sqrt(K / tolerance_k) beyond.
    tolerance_k: int = 1024

    def __post_init__(self) -> None:
        if self.operands not in OPERANDS:
            raise ValueError(f"CourseDtype {self.name}: operands must be one of {OPERANDS}, not {self.operands!r}")

    def __str__(self) -> str:
        return self.name


# TF32 keeps 10 of fp32's 23 mantissa bits. Triton's tl.dot on Hopper drops the other 13 instead of
# rounding (triton-lang/triton#4574), so each operand may be off by up to 2^-10 relative and one
# product by up to 2 * 2^-10 = 1.95e-3: a 1 x 1 x 1 GEMM reached 1.13e-3 on the H200 (tolerance 2e-3).
# The 16-bit types' products are exact in fp32 (11 or 8 bits times 11 or 8 fit in 24).
FP32 = CourseDtype(
    name="fp32", torch_dtype=torch.float32, arithmetic="exact fp32 multiply-adds", needs=(),
    unit_roundoff=2.0**-24, product_error=2.0**-24, tolerance=1e-5, sanity=1e-3,
    triton_precision="ieee", triton_type="fp32")
TF32 = CourseDtype(
    name="tf32", torch_dtype=torch.float32, arithmetic="fp32 inputs rounded to TF32 in the tensor cores, fp32 sums",
    needs=(TF32_TENSOR_CORES,), unit_roundoff=2.0**-24, product_error=2.0**-9, tolerance=2e-3, sanity=2e-2,
    triton_precision="tf32", triton_type="fp32")
FP16 = CourseDtype(
    name="fp16", torch_dtype=torch.float16, arithmetic="fp16 inputs and output, fp32 sums", needs=(),
    unit_roundoff=2.0**-11, product_error=0.0, tolerance=1e-2, sanity=5e-2,
    triton_precision="ieee", triton_type="fp16")
BF16 = CourseDtype(
    name="bf16", torch_dtype=torch.bfloat16, arithmetic="bf16 inputs and output, fp32 sums",
    needs=(BF16_TENSOR_CORES,), unit_roundoff=2.0**-8, product_error=0.0, tolerance=1e-2, sanity=5e-2,
    triton_precision="ieee", triton_type="bf16")

# FP8 (notebook 12): e4m3 operands with fp32 scales, products exact in fp32, sums promoted into fp32
# every 128 of K (or kept in the tensor core's narrow adder: fast accumulation), C in bf16. The
# tolerance, a relative Frobenius error: rounding C to bf16 costs about 1.7e-3 on normal data; the
# sums of e4m3 products erred by 1.3e-4 with promotion (cuBLAS, every K up to 16,384 on the H200) and
# by 1.3e-3 at K = 4,096 without (cuBLAS's fast accumulation; course_lib.model.fp8_accumulator
# agrees), growing like sqrt(K) on normal data: 4e-3 holds both up to K = 4,096, growing beyond
# (experiments/JOURNAL.md, "cuBLAS in FP8"). Forgetting a scale, a transposed operand or a missing
# K-slice err by far more (tests/test_fp8.py). unit_roundoff is e4m3's (3 mantissa bits);
# product_error 0: a product of two e4m3 values is exact in fp32.
E4M3 = CourseDtype(
    name="e4m3", torch_dtype=torch.float8_e4m3fn,
    arithmetic="e4m3 inputs with fp32 scales, fp32 sums, bf16 output", needs=(FP8_TENSOR_CORES,),
    unit_roundoff=2.0**-4, product_error=0.0, tolerance=4e-3, sanity=2e-2,
    triton_precision="ieee", triton_type="fp8e4nv", operands="fp8", tolerance_k=4096)

# Every course dtype, in the order tables show them: a new record is added here too.
RECORDS: dict[str, CourseDtype] = {d.name: d for d in (FP32, TF32, FP16, BF16, E4M3)}
NAMES: tuple[str, ...] = tuple(RECORDS)
# The course dtype a tensor's element type means when no name is given: the first record of the
# course's one signature that holds it (float32 means exact fp32; tf32 must be asked for by name).
_BY_TORCH_DTYPE: dict[torch.dtype, CourseDtype] = {}
for _d in RECORDS.values():
    if _d.operands == "matrix":
        _BY_TORCH_DTYPE.setdefault(_d.torch_dtype, _d)


def torch_dtype_names() -> str:
    """The element types the course's GEMMs take, in words ("float32, float16 or bfloat16")."""
    names = [str(t).replace("torch.", "") for t in _BY_TORCH_DTYPE]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def get(dtype: str | CourseDtype) -> CourseDtype:
    """The record of a course dtype, by name (or the record itself); ValueError naming the choices."""
    if isinstance(dtype, CourseDtype):
        return dtype
    try:
        return RECORDS[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dtype {dtype!r}: the course uses one of {', '.join(NAMES)}") from None


def of_torch(torch_dtype: torch.dtype) -> CourseDtype | None:
    """The course dtype a tensor of ``torch_dtype`` means by default (None: not a course type)."""
    return _BY_TORCH_DTYPE.get(torch_dtype)
