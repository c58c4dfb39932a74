"""Choosing ``triton_fast``'s configuration per shape: a heuristic names the candidates worth
timing, then autotuning times each on the real inputs and keeps the fastest, once per shape.

This is what ``triton.autotune`` does for a kernel's meta-parameters. It is written out because
three of the choices (B's layout, descriptors or not, split-K) are made by the wrapper, outside the
kernels, and because which candidates are worth timing depends on the shape:

* **large C** (many tiles per SM): the big tiles of :data:`FAST_CONFIGS`;
* **few tiles** (fewer than two per SM with the big tiles): also smaller tiles, and split-K, which
  gives each tile several programs (one per range of K);
* **small M** (M <= :data:`SMALL_M`, e.g. a decode step: a few tokens times a weight matrix): every
  element of B is used by only M rows, so the GEMM is bound by reading B from memory. Tiles of 16-64
  rows (the least ``tl.dot`` takes), narrow columns and long K-slices keep many bytes of B in flight
  on every SM; split-K where the column tiles are fewer than the SMs.
"""

from __future__ import annotations

import triton

from dataclasses import replace

from course_lib import backend
from course_lib import dtypes
from course_lib.gemm import Operands, new_output, planned, prepare
from course_lib.kernels.coalescing_and_triton.common import descriptor_problem, require_32bit_offsets
from course_lib.kernels.coalescing_and_triton.fast_configs import FAST_CONFIGS, PORTABLE_CONFIGS, FastConfig, candidates
from course_lib.kernels.coalescing_and_triton.fast_launch import FastPlan, as_stored, launch_fast, stored_n_by_k
from course_lib.model.layout import cdiv
from course_lib.timing import time_fn

SMALL_M = 64  # at most this many rows of A: the small-M candidates
SIXTEEN_BIT = ("fp16", "bf16")


def small_m_configs(dtype: str, M: int, N: int, K: int, sm_count: int) -> tuple[FastConfig, ...]:
    """Candidates for M <= SMALL_M: one tile row of 16, 32 or 64 rows and narrow columns, so that
    there are many programs, each with long K-slices of B in flight (256 16-bit or 128 32-bit
    elements, 3 deep; or half as long, 4 deep). Where the column tiles are fewer than the SMs,
    split-K gives each tile several programs: about one program per SM (``fill``) and a few
    multiples of it for 64-column tiles."""
    block_m = max(16, 1 << (M - 1).bit_length()) if M > 1 else 16
    long_k = 512 // dtypes.get(dtype).torch_dtype.itemsize  # 512 bytes of each row of B: 256 16-bit, 128 32-bit

    def fill(block_n: int, block_k: int) -> int:  # splits for about one program per SM, >= 4 slices each
        return max(1, min(cdiv(sm_count, cdiv(N, block_n)), cdiv(K, block_k) // 4))

    out = [FastConfig(block_m, 64, long_k, group_m=1, num_warps=4, num_stages=3, split_k=split)
           for split in (1, 2, 3, 4)
           if split <= max(1, cdiv(K, long_k) // 4) and (split == 1 or cdiv(N, 64) * split <= 2.5 * sm_count)]
    out += [FastConfig(block_m, 32, long_k, group_m=1, num_warps=4, num_stages=3, split_k=fill(32, long_k)),
            FastConfig(block_m, 64, long_k // 2, group_m=1, num_warps=8, num_stages=4, split_k=fill(64, long_k // 2)),
            FastConfig(block_m, 128, long_k // 2, group_m=1, num_warps=4, num_stages=4),
            FastConfig(block_m, 64, long_k // 2, group_m=1, num_warps=4, num_stages=4),
            FastConfig(block_m, 32, long_k // 2, group_m=1, num_warps=4, num_stages=4)]
    return tuple(dict.fromkeys(out))


def few_tile_configs(dtype: str, M: int, N: int, K: int, sm_count: int) -> tuple[FastConfig, ...]:
    """Extra candidates when the big tiles of FAST_CONFIGS give fewer than two tiles per SM:
    tiles of half the size, one program each (and of a quarter, where the big tiles fill at most a
    quarter of the SMs), and the big tile split along K into 2-4 ranges (only where each range keeps
    at least 8 K-slices)."""
    big = FAST_CONFIGS[dtype][0]
    tiles = cdiv(M, big.block_m) * cdiv(N, big.block_n)
    half = replace(big, block_n=big.block_n // 2, persistent=False, epilogue_split=1, num_stages=4)
    out = [half]
    if 4 * tiles <= sm_count:  # a quarter of a wave or less (1024^3: 32 tiles): quarter-size tiles too
        out.append(replace(big, block_m=big.block_m // 2, block_n=big.block_n // 2, num_warps=4, persistent=False,
                           epilogue_split=1, num_stages=4))
    for split in (2, 3, 4):
        if tiles * split <= 3 * sm_count and cdiv(K, big.block_k) >= 8 * split:
            out.append(replace(big, persistent=False, split_k=split, epilogue_split=1))
    if dtype in SIXTEEN_BIT:
        # Half tiles on 4 warps with 6 K-slices in flight, alone or with K split in two, and 64-row
        # tiles with 128-wide K-slices: the best of a grid of 132 bf16 configurations at the mid-size
        # squares and at M = 96-512 on the H200, 5-18 points above these candidates before
        # (experiments/gpu_triton_mid_sweep.py; not swept in fp32 or tf32).
        deep = replace(half, num_warps=4, num_stages=6)
        out += [deep, replace(deep, persistent=True)]
        if cdiv(K, big.block_k) >= 16:
            out.append(replace(deep, split_k=2))
        narrow = replace(half, block_m=big.block_m // 2, block_k=2 * big.block_k, num_warps=4)
        out += [narrow, replace(narrow, persistent=True)]
    return tuple(dict.fromkeys(out))


def shape_candidates(dtype: str, M: int, N: int, K: int, sm_count: int) -> tuple[FastConfig, ...]:
    """The candidates worth timing for an M x N x K product on a GPU with ``sm_count`` SMs (the
    heuristic of this module's docstring)."""
    if M <= SMALL_M:
        return small_m_configs(dtype, M, N, K, sm_count)
    big = FAST_CONFIGS[dtype][0]
    tiles = cdiv(M, big.block_m) * cdiv(N, big.block_n)
    if tiles < 2 * sm_count:
        return FAST_CONFIGS[dtype] + few_tile_configs(dtype, M, N, K, sm_count)
    return FAST_CONFIGS[dtype]


_TUNED: dict[tuple, FastConfig] = {}
_TIMES: dict[tuple, dict[str, float | None]] = {}  # per key: {candidate label: median ms, None = did not fit}


def autotuned_config(ops: Operands, dtype: str, c) -> FastConfig:
    """The fastest candidate for these operands (timed once per shape, strides and alignment), each
    reading B as it is stored (:func:`.fast_launch.as_stored`: B^T where B is stored N x K)."""
    if not backend.get().is_gpu:
        return as_stored(FAST_CONFIGS[dtype][0], ops.b)
    candidates = tuple(dict.fromkeys(as_stored(cfg, ops.b)
                                     for cfg in shape_candidates(dtype, ops.M, ops.N, ops.K, backend.sm_count())))
    b_rows = ops.b.T if stored_n_by_k(ops.b) else ops.b  # the matrix whose rows a descriptor of B reads
    aligned = all(descriptor_problem(t, "x") is None for t in (ops.a, b_rows, c))
    key = (dtype, ops.M, ops.N, ops.K, ops.a.stride(), ops.b.stride(), aligned)
    if key not in _TUNED:
        best, best_ms = candidates[0], float("inf")
        times: dict[str, float | None] = {}
        for cfg in candidates:
            try:
                # The course's own timer (CUDA events, L2 flushed, short runs queued behind flushes),
                # so the host's launch time does not decide between candidates at small shapes.
                ms = time_fn(lambda: launch_fast(ops, dtype, cfg, c), budget_ms=40).median_ms
            except triton.runtime.errors.OutOfResources:
                times[cfg.label] = None
                continue  # e.g. too much shared memory for this GPU: not a candidate here
            times[cfg.label] = ms
            if ms < best_ms:
                best, best_ms = cfg, ms
        _TIMES[key] = times
        _TUNED[key] = best if best_ms < float("inf") else PORTABLE_CONFIGS[dtype]
    return _TUNED[key]


def tuned_configs() -> dict[tuple, FastConfig]:
    """What autotuning chose so far in this process: {(dtype, M, N, K, strides..., aligned): config}."""
    return dict(_TUNED)


def tuning_log() -> list[dict]:
    """Every autotuning so far in this process: shape, dtype, the chosen config and each
    candidate's median time (ms; None where it did not fit this GPU)."""
    return [{"dtype": k[0], "M": k[1], "N": k[2], "K": k[3], "aligned": k[-1], "chosen": _TUNED[k].label,
             "candidates_ms": dict(times)} for k, times in _TIMES.items()]


def _checked(a: object, b: object, dtype: str) -> tuple[object, FastPlan]:
    """triton_fast's checked path: check the operands, pick the configuration, launch it as a plan."""
    stage = "triton_fast"
    ops = prepare(a, b, stage=stage, dtypes=(dtype,))
    candidates(dtype)  # a dtype without candidates is refused here, with where they go
    c = new_output(ops.M, ops.N, dtypes.get(dtype).torch_dtype, ops.a.device)
    require_32bit_offsets(stage, ops.a, ops.b, c)
    plan = FastPlan(ops, dtype, autotuned_config(ops, dtype, c), c)  # launches it
    return ops.give_back(c), plan


def _again(plan: FastPlan, a: object, b: object, dtype: str) -> object:
    """A later call with operands of a planned key: the plan launched into a new C."""
    candidates(dtype)  # the one check made again: it reads FAST_CONFIGS, which no key holds
    c = new_output(plan.M, plan.N, plan.c_dtype, a.device)
    if plan.as_given:  # the common case, one call fewer per launch (host time is what this path is for)
        plan.launch(a, b, c)
    else:
        plan(a, b, c)
    return c


# The dtype is part of the key: fp32 and tf32 operands are alike.
_PLANNED = planned(_checked, _again)


def fast_matmul_autotuned(a: object, b: object, dtype: str = "fp32") -> object:
    """Stage ``triton_fast``: on a GPU the fastest of :func:`shape_candidates` for this shape; on the
    CPU the first candidate of :data:`FAST_CONFIGS`.

    The first call with operands of a key (:func:`course_lib.gemm.plan_key`) checks them, picks the
    configuration and launches it as a :class:`.fast_launch.FastPlan`; later calls with the key launch that
    plan into a new C (:func:`course_lib.gemm.planned`)."""
    return _PLANNED(a, b, dtype)
