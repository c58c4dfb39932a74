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

Raw log, never edited.
"""

from __future__ import annotations

import time

import course_lib
from course_lib.bench import measure
import runlog  # this folder is on sys.path

SQUARES = [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)]
# FP8 rows of the model table's kinds: decode, a short K, a prefill layer with few tiles
FP8_SHAPES = SQUARES + [(16, 4096, 4096), (64, 14336, 4096), (2048, 2304, 768), (4096, 2112, 7168)]
RUNS = [("triton_fp8", "e4m3", scaling, FP8_SHAPES) for scaling in ("tensor", "row", "block")]
RUNS += [("triton_fast", "bf16", None, SQUARES)]


def main() -> int:
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
