"""Run every tensor-core stage once at small shapes, for compute-sanitizer.

    PYTHONPATH=. COURSE_BACKEND=gpu compute-sanitizer --tool memcheck  python3 tools/gpu_sanitize_tensor_cores.py
    PYTHONPATH=. COURSE_BACKEND=gpu compute-sanitizer --tool racecheck python3 tools/gpu_sanitize_tensor_cores.py
    PYTHONPATH=. COURSE_BACKEND=gpu compute-sanitizer --tool synccheck python3 tools/gpu_sanitize_tensor_cores.py

Build the extension first without the sanitizer (``tc.extension()``, as tools/gpu_run_all.sh's
``sanitize`` section does; a build under the sanitizer is slow). Optional arguments name stages.
Shapes: 256^3 (whole tiles) and 264 x 520 x 200 (partial tiles, an odd number of tile rows, a
partial K slice). Exits non-zero if an output differs from the float64 reference. Stage 6 runs once
more on a single cluster (``max_ctas=2``), so that each CTA stores several tiles - each during the
next tile's first slices - through the same staging boxes.

``--small`` runs stage 6 alone on small shapes that still take each of its paths (racecheck, which
tracks every shared-memory access, does not finish the full set within the section's time):
whole tiles (by the shape 128 x 128 at 264 x 520 x 200; 128 x 256 forced), stream-K (264 x 520 x 2048:
6 cluster tiles, 32 K slices; 128 x 128 stream-K forced), the swapped path with K split into ranges
(100 x 520 x 4096 and 90 x 520 x 4096: token tiles of 128 and 96) and not (3 x 8 x 8), and swapped with two token tiles (136 x 264 x 1032, forced).

``--fp8`` runs stage 7 (tc_7_fp8) alone, every variant (per tensor promoted and with fast
accumulation, per row, per block) at 256^3 and 264 x 520 x 208 (partial tiles, a partial K block),
and on a single cluster at 300 x 1000 x 1296 (several tiles per CTA, each stored during the next;
11 K slices, so the promoted loop's groups run in both kinds of tile).
Then every variant on its decode path (the operands swapped): 7 x 1000 x 1040, 90 and 100 x 264 x 1536
(K split into ranges, tokens past M in tiles of 16 and 128, partial column tiles and K slices),
33 x 136 x 208 (one range), and the swapped schedule forced at 300 x 1000 x 1040 (three token tiles).
"""

from __future__ import annotations

import sys

import torch

import course_lib
from course_lib import correctness
from course_lib.gemm import relative_error
from course_lib.kernels import tensor_cores as tc

# For stage 6, (16, 4096, 4096) is its decode path (operands swapped, K split into ranges whose sums
# the last CTA of a tile adds) and (768, 2304, 4096) its stream-K path (partial sums between clusters).
SHAPES = ((256, 256, 256), (264, 520, 200), (16, 4096, 4096), (768, 2304, 4096))
# Stage 6 alone takes any M: the decode path with M no multiple of 8 (token tiles of 64 and 128, split
# and not), and stream-K with a partial tile row.
STAGE6_SHAPES = ((37, 1000, 1032), (100, 520, 4096), (90, 520, 4096), (3, 8, 8), (200, 4096, 4096))
SMALL_STAGE6 = ((264, 520, 200), (264, 520, 2048), (100, 520, 4096), (90, 520, 4096), (3, 8, 8), (37, 1000, 1032))


def main(names: list[str]) -> int:
    tc.extension()
    stage6 = course_lib.get_stage("tc_6_tma_store").shape_multiple  # its shape rule, for its variants
    if names == ["--small"]:
        runs = [("tc_6_tma_store", course_lib.get_stage("tc_6_tma_store")),
                ("tc_6_tma_store swapped", tc.make_gemm("tc_6_tma_store", shape_multiple=stage6, group_m=8, max_ctas=0, schedule=2)),
                ("tc_6_tma_store 128x256", tc.make_gemm("tc_6_tma_store", shape_multiple=stage6, group_m=8, max_ctas=0,
                                                        schedule=0, block_n=256)),
                ("tc_6_tma_store 128x128 stream-K", tc.make_gemm("tc_6_tma_store", shape_multiple=stage6, group_m=8,
                                                                 max_ctas=0, schedule=1, block_n=128)),
                ("tc_6_tma_store 128x64", tc.make_gemm("tc_6_tma_store", shape_multiple=stage6, group_m=8, max_ctas=0,
                                                       schedule=0, block_n=64)),
                ("tc_6_tma_store 128x64 stream-K", tc.make_gemm("tc_6_tma_store", shape_multiple=stage6, group_m=8,
                                                                max_ctas=0, schedule=1, block_n=64))]
        return check_runs(runs, lambda name: SMALL_STAGE6 + (((136, 264, 1032),) if "swapped" in name else ()))
    if names == ["--fp8"]:
        return check_fp8_runs()
    runs = [(name, course_lib.get_stage(name)) for name in names or [d.stage for d in tc.ALL_DESIGNS]]
    if not names or "tc_6_tma_store" in names:
        runs.append(("tc_6_tma_store max_ctas=2", tc.make_gemm("tc_6_tma_store", shape_multiple=stage6, group_m=8, max_ctas=2)))
    return check_runs(runs, lambda name: SHAPES + (STAGE6_SHAPES if name.startswith("tc_6") else ()))


def check_runs(runs, shapes_of) -> int:
    bad = 0
    for name, fn in runs:
        for M, N, K in shapes_of(name):
            a, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
            c = fn(a, b)
            torch.cuda.synchronize()
            ref = (a.double() @ b.double())
            err = relative_error(c, ref)
            ok = err < 1e-2
            bad += not ok
            print(f"{name} {M}x{N}x{K}: relative error {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
    return 1 if bad else 0


FP8_SHAPES = ((256, 256, 256), (264, 520, 208))
FP8_DECODE_SHAPES = ((7, 1000, 1040), (90, 264, 1536), (100, 264, 1536), (33, 136, 208))  # swapped by the shape
FP8_SWAPPED_FORCED = ((300, 1000, 1040),)
SCHEDULE_SWAPPED = 2  # tc_launch.h


def _tc7(fast: bool, max_ctas: int | None, swapped: bool):
    if not swapped:
        return lambda qa, qw: tc.tc_7_fp8(qa, qw, fast_accumulation=fast, max_ctas=max_ctas)

    def call(qa, qw):
        args = tc.tc_7_fp8_arguments(qa, qw, fast)
        tc.extension().tc_7_fp8(*args, 8, 0, SCHEDULE_SWAPPED)
        return args[4]
    return call


def check_fp8_runs() -> int:
    """Stage 7 through check in e4m3 (guard regions around every operand, C poisoned), every variant."""
    bad = 0
    variants = (("tensor", False), ("tensor", True), ("row", False), ("block", False))
    runs = [(scaling, fast, None, False, FP8_SHAPES) for scaling, fast in variants]
    # one cluster: several tiles per CTA, each stored during the next; 11 slices a tile, so that the
    # promoted loop's groups run both in a CTA's first tile and behind the stores of later ones
    runs += [("tensor", False, 2, False, ((300, 1000, 1296),)), ("block", False, 2, False, ((300, 1000, 1296),))]
    runs += [(scaling, fast, None, False, FP8_DECODE_SHAPES) for scaling, fast in variants]
    runs += [(scaling, fast, None, True, FP8_SWAPPED_FORCED) for scaling, fast in variants]
    for scaling, fast, max_ctas, swapped, shapes in runs:
        label = (f"tc_7_fp8 {scaling}{' fast' if fast else ''}{f' max_ctas={max_ctas}' if max_ctas else ''}"
                 f"{' swapped' if swapped else ''}")
        try:
            report = correctness.check(_tc7(fast, max_ctas, swapped), "e4m3", shapes, scaling=scaling, seed=0,
                                       label=label)
            print(f"{label}: worst relative error {max(r.rel_error for r in report.results):.2e} ok", flush=True)
        except correctness.CheckFailure as e:
            bad += 1
            print(f"{label}: WRONG\n{e}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
