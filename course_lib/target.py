"""What ``check``, ``bench`` and ``compare`` are asked about, resolved once: :func:`resolve`.

Each of them takes a GEMM (a stage's name, a :class:`~course_lib.registry.Stage` or any callable),
a dtype (a name or a :class:`~course_lib.dtypes.CourseDtype` record) and, for FP8, the operands'
scaling. :func:`resolve` turns the three into one :class:`Target`: the label, the dtype's record, the
callable, the stage (if any), why it cannot run here (if it cannot), and everything that depends on
what the dtype's GEMMs take (``CourseDtype.operands``): fresh random inputs, the guard placement of
the operands, the float64 product to compare with, cuBLAS's GEMM on the same inputs, the output's
element type and the call that makes the inputs again. Nothing downstream looks at the dtype or the
stage again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import torch

from course_lib import dtypes, fp8
from course_lib.dtypes import CourseDtype
from course_lib.gemm import random_inputs
from course_lib.registry import Stage, get_stage

__all__ = ["Target", "resolve"]

DEFAULT_SCALING = "tensor"  # an FP8 check or bench that names no scaling: one scale per tensor


@dataclass(frozen=True)
class Target:
    """One GEMM in one dtype (and, for FP8, one scaling), as check and bench use it."""

    label: str
    dtype: CourseDtype
    fn: Callable = dataclasses.field(repr=False)
    stage: Stage | None = None
    scaling: str | None = None  # FP8 only: a key of course_lib.fp8.OPERAND_SCALING
    why_not_here: str | None = None  # None: it runs on this backend

    @property
    def fp8(self) -> bool:
        return self.dtype.operands == "fp8"

    @property
    def arithmetic(self) -> str:
        """The dtype as reports name it: "bf16", or "e4m3, scaled per row"."""
        return f"{self.dtype.name}, scaled per {self.scaling}" if self.fp8 else self.dtype.name

    @property
    def shape_rule(self) -> int | tuple[int, int, int]:
        return self.stage.shape_rule(self.dtype.name, self.scaling) if self.stage else 1

    @property
    def rounds_partial_sums(self) -> bool:
        return bool(self.stage and self.stage.rounds_partial_sums)

    @property
    def output_dtype(self) -> torch.dtype:
        return torch.bfloat16 if self.fp8 else self.dtype.torch_dtype

    def inputs(self, M: int, N: int, K: int, seed: int | None = None) -> tuple[Any, Any]:
        """Fresh random operands of an M x N x K product (a seed gives the same ones again)."""
        if self.fp8:
            return fp8.fp8_inputs(M, N, K, self.scaling, seed=seed)
        return random_inputs(M, N, K, self.dtype.name, seed=seed)

    def reproduce(self, M: int, N: int, K: int, seed: int) -> str:
        """The call that makes the inputs of :meth:`inputs` again."""
        if self.fp8:
            return f"course_lib.fp8.fp8_inputs({M}, {N}, {K}, {self.scaling!r}, seed={seed})"
        return f"course_lib.random_inputs({M}, {N}, {K}, {self.dtype.name!r}, seed={seed})"

    def placed(self, guard, operands: tuple[Any, Any]) -> tuple[Any, Any]:
        """The operands copied into ``guard``'s regions (:mod:`course_lib.instruments.guard`): A and B,
        or A, W and their scales."""
        a, b = operands
        if self.fp8:
            return tuple(dataclasses.replace(q, values=guard.place(q.values, name),
                                             scales=guard.place(q.scales, f"{name}'s scales"))
                         for q, name in ((a, "A"), (b, "W")))
        return guard.place(a, "A"), guard.place(b, "B")

    def exact_operands(self, operands: tuple[Any, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The float64 matrices A (M x K) and B (K x N) the operands stand for (FP8: dequantized,
        W transposed)."""
        a, b = operands
        if self.fp8:
            return a.dequantize(), b.dequantize().t()
        return a.double(), b.double()

    def reference(self, operands: tuple[Any, Any] | None = None) -> Callable:
        """cuBLAS's GEMM of the same dtype, taking the same operands (FP8: the same scaling). FP8 with
        ``operands``: ``torch._scaled_mm`` for those operands with their scales laid out once
        (:func:`course_lib.fp8.cublas_fp8_for`), not again in every call."""
        if self.fp8 and operands is not None:
            return fp8.cublas_fp8_for(*operands)
        return get_stage("cublas").gemm(self.dtype.name)


def resolve(gemm: str | Stage | Callable, dtype: str | CourseDtype = "fp32", scaling: str | None = None) -> Target:
    """The one :class:`Target` for ``gemm`` in ``dtype`` (and ``scaling``, FP8 only)."""
    record = dtypes.get(dtype)
    if record.operands == "fp8":
        scaling = DEFAULT_SCALING if scaling is None else scaling
        if scaling not in fp8.OPERAND_SCALING:
            raise ValueError(f"unknown FP8 scaling {scaling!r}: use one of {sorted(fp8.OPERAND_SCALING)}")
    elif scaling is not None:
        raise ValueError(f"scaling is for FP8 GEMMs (dtype 'e4m3'); {record.name} operands are not scaled")
    if isinstance(gemm, str):
        gemm = get_stage(gemm)
    if isinstance(gemm, Stage):
        if record.name not in gemm.gemms:
            raise ValueError(f"stage {gemm.name!r} supports {', '.join(gemm.dtypes)}, not {record.name}")
        if scaling is not None and scaling not in gemm.scalings:
            raise ValueError(f"stage {gemm.name!r} takes FP8 operands scaled per {', '.join(gemm.scalings)}, "
                             f"not per {scaling}")
        return Target(gemm.name, record, gemm.gemm(record.name), gemm, scaling, gemm.why_not_here(record.name))
    if callable(gemm):
        return Target(getattr(gemm, "__name__", repr(gemm)), record, gemm, None, scaling)
    raise TypeError(f"expected a stage name, a Stage or a callable fn(a, b) -> c, not {gemm!r}")
