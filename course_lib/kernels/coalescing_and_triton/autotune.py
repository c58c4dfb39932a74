"""Autotuning ``triton_fast``: try every candidate on the real inputs, time it, keep the fastest.

This is what ``triton.autotune`` does for a kernel's meta-parameters. It is written out because two
of the choices (B's layout, descriptors or not) are made by the wrapper, outside the kernels.
"""

from __future__ import annotations

import triton

from course_lib import backend
from course_lib.gemm import TORCH_DTYPES, Operands, new_output, prepare
from course_lib.kernels.coalescing_and_triton.common import descriptor_problem, require_32bit_offsets
from course_lib.kernels.coalescing_and_triton.fast import FAST_CONFIGS, PORTABLE_CONFIGS, FastConfig, launch_fast
from course_lib.timing import time_fn

_TUNED: dict[tuple, FastConfig] = {}


def autotuned_config(ops: Operands, dtype: str, c) -> FastConfig:
    """The fastest candidate for these operands (timed once per shape, strides and alignment)."""
    candidates = FAST_CONFIGS[dtype]
    if not backend.get().is_gpu or len(candidates) == 1:
        return candidates[0]
    aligned = all(descriptor_problem(t, "x") is None for t in (ops.a, ops.b, c))
    key = (dtype, ops.M, ops.N, ops.K, ops.a.stride(), ops.b.stride(), aligned)
    if key not in _TUNED:
        best, best_ms = candidates[0], float("inf")
        for cfg in candidates:
            try:
                # The course's own timer (CUDA events, L2 flushed, short runs queued behind flushes),
                # so the host's launch time does not decide between candidates at small shapes.
                ms = time_fn(lambda: launch_fast(ops, dtype, cfg, c), budget_ms=40).median_ms
            except triton.runtime.errors.OutOfResources:
                continue  # e.g. too much shared memory for this GPU: not a candidate here
            if ms < best_ms:
                best, best_ms = cfg, ms
        _TUNED[key] = best if best_ms < float("inf") else PORTABLE_CONFIGS[dtype]
    return _TUNED[key]


def tuned_configs() -> dict[tuple, FastConfig]:
    """What autotuning chose so far in this process: {(dtype, M, N, K, strides..., aligned): config}."""
    return dict(_TUNED)


def fast_matmul_autotuned(a: object, b: object, dtype: str = "fp32") -> object:
    """Stage ``triton_fast``: on a GPU the fastest of :data:`FAST_CONFIGS` for this shape; on the
    CPU the first candidate."""
    stage = "triton_fast"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    c = new_output(ops.M, ops.N, TORCH_DTYPES[dtype], ops.a.device)
    require_32bit_offsets(stage, ops.a, ops.b, c)
    launch_fast(ops, dtype, autotuned_config(ops, dtype, c), c)
    return ops.give_back(c)
