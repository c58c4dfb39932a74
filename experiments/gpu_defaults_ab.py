"""Two versions of the library compared on one machine: a stage as a user calls it (its default
configuration, chosen per shape), against cuBLAS in GPU time, at the shapes below.

    source tools/gpu_env.sh
    PYTHONPATH=/tmp/site:$OLD_TREE python3 experiments/gpu_defaults_ab.py --out $OUT/before.json
    python3 experiments/gpu_defaults_ab.py --out $OUT/after.json

Each process imports the ``course_lib`` its ``PYTHONPATH`` finds first (``$OLD_TREE``: a copy of an
earlier commit, e.g. ``git archive``), so the two runs differ only in the library's code. Timed:
``triton_fp8`` (e4m3 in, bf16 out) with one scale per tensor, per row and in DeepSeek-V3's blocks, and
``triton_fast`` in bf16, each beside cuBLAS with the same scaling (``course_lib.bench.measure``: the
sanity check against cuBLAS first, alternating rounds, L2 flushed, host time kept out). The ratio to
cuBLAS is what to compare between the runs: each run's cuBLAS is timed in its own process.

``--weights``: ``triton_fast`` bf16 called as ``x @ w.T`` with ``w`` an N x K row-major weight (as
``torch.nn.Linear`` stores it), against ``torch.matmul(x, w.T)``, alternating, GPU time
(``course_lib.timing.time_fn``, the middle of three rounds), after a check against float64.

Raw log, never edited.
"""

from __future__ import annotations

import sys
import time

import course_lib
from course_lib.bench import measure
import runlog  # this folder is on sys.path

SQUARES = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)]
# FP8 rows of the model table's kinds: decode, a short K, a prefill layer with few tiles
FP8_SHAPES = SQUARES + [(16, 4096, 4096), (64, 14336, 4096), (2048, 2304, 768), (4096, 2112, 7168)]
RUNS = [("triton_fp8", "e4m3", scaling, FP8_SHAPES) for scaling in ("tensor", "row", "block")]
RUNS += [("triton_fast", "bf16", None, SQUARES)]


WEIGHT_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (3072, 3000, 3072), (128, 14336, 4096), (2048, 2560, 10240)]


def weights() -> int:
    """The ``--weights`` section."""
    import torch

    from course_lib.gemm import relative_error

    out, save = runlog.start(__doc__, 3, tree=course_lib.__file__, rows=[])
    gemm = course_lib.get_stage("triton_fast").gemm("bf16")
    for M, N, K in WEIGHT_SHAPES:
        x, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
        w = b.T.contiguous()
        err = relative_error(gemm(x, w.T), x.double() @ b.double())
        us, cublas_us = runlog.versus(lambda: gemm(x, w.T), lambda: torch.matmul(x, w.T))
        out["rows"].append({"shape": [M, N, K], "us": us, "cublas_us": cublas_us, "pct": 100 * cublas_us / us,
                            "rel_error_vs_float64": err})
        save()
        print(f"x @ w.T {str((M, N, K)):22s} {us:9.1f} us  {100 * cublas_us / us:6.1f} % of cuBLAS  (error {err:.1e})",
              flush=True)
    return 0


def main() -> int:
    if "--weights" in sys.argv:
        sys.argv.remove("--weights")
        return weights()
    out, save = runlog.start(__doc__, 0, tree=course_lib.__file__, records=[], errors=[])
    for stage, dtype, scaling, shapes in RUNS:
        for shape in shapes:
            t0 = time.perf_counter()
            try:
                r = measure(stage, dtype, shape, scaling=scaling)
            except Exception as e:  # noqa: BLE001 - a failure is a result: logged, the rest goes on
                out["errors"].append({"stage": stage, "scaling": scaling, "shape": shape, "error": repr(e)})
                print(f"{stage} {scaling} {shape}: {e!r}", flush=True)
                continue
            out["records"].append(r)
            print(f"{stage:12s} {scaling or dtype:6s} {str(shape):22s} {1e3 * r['ms']:9.1f} us  "
                  f"{100 * r['ratio_to_cublas']:6.1f} % of cuBLAS  ({time.perf_counter() - t0:.1f} s)", flush=True)
            save()
    save()
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
