"""Where triton_fast's excess of as-called time over GPU time goes at the decode rows.

    python experiments/gpu_as_called_excess.py --out $OUT/as_called_excess.json

On an H100 (the current tree) triton_fast fp16's as-called time exceeded its GPU time by 35-82 us at the
decode rows with M = 8, 16 and 32 and by 20-23 us at M = 1 and 64, against cuBLAS's 15-36 us; the H200
recording, whose triton_fast rows were timed before the launch plans made their descriptors on the host,
shows a larger excess than cuBLAS's at every fp16 row with M <= 64 (split K at M = 1-32, none at M = 64,
by its tuning log). This script splits the excess, for torch.matmul, triton_fast (fp16 and bf16) and
tc_6 (bf16) at the table's rows with M <= 64:

* ``gpu_us`` and ``called_us``: ``time_fn`` without and with ``host=True``, as ``bench`` times them;
* ``one_by_one``: 30 calls, each after an L2 flush on an idle GPU (what ``host=True`` does), with the
  host's own time inside the call (``host_in_call_us``, perf_counter from just before the start event to
  just after the call returns) beside the events' time (``event_us``); and the same with no flush;
* ``host_us``: the host's time per call back to back at that shape (``gpu_host_time.host_us_per_call``);
* triton_fast's chosen configuration at the shape (``autotune.tuning_log``).
If ``host_in_call_us`` plus a launch's latency accounts for the excess, the excess is the host's
work in the call; if not, the GPU starts or runs the kernel later or slower from idle than from a queue.
Medians in microseconds. Raw log, never edited.
"""

from __future__ import annotations

import torch

import course_lib
from course_lib import model_shapes
from course_lib import registry
from course_lib import timing
from course_lib.kernels.coalescing_and_triton import autotune
from gpu_as_called import one_by_one  # this folder is on sys.path
from gpu_host_time import host_us_per_call
import runlog  # this folder is on sys.path

BUDGET_MS = 40.0


def main() -> int:
    out, save = runlog.start(__doc__, 2, rows=[])
    course_lib.describe()
    rows = [s for s in model_shapes.MODEL_SHAPES if s.M <= 64]
    for dtype in ("fp16", "bf16"):
        stages = {"torch.matmul": lambda a, b: torch.matmul(a, b),
                  "triton_fast": registry.get_stage("triton_fast").gemm(dtype)}
        if dtype == "bf16":
            stages["tc_6"] = registry.get_stage("tc_6_tma_store").gemm(dtype)
        for shape in rows:
            M, N, K = shape.M, shape.N, shape.K
            a, b = course_lib.random_inputs(M, N, K, dtype, seed=0)
            for fn in stages.values():
                fn(a, b)  # tunes, builds, plans outside the timed runs
            torch.cuda.synchronize()
            chosen = [t["chosen"] for t in autotune.tuning_log() if (t["dtype"], t["M"], t["N"], t["K"]) == (dtype, M, N, K)]
            for label, f in stages.items():
                fn = lambda f=f: f(a, b)  # noqa: E731
                row = {"dtype": dtype, "shape": [M, N, K], "name": shape.label, "stage": label,
                       "config": chosen[0] if label == "triton_fast" and chosen else None,
                       "gpu_us": 1e3 * timing.time_fn(fn, budget_ms=BUDGET_MS).median_ms,
                       "called_us": 1e3 * timing.time_fn(fn, budget_ms=BUDGET_MS, host=True).median_ms,
                       "one_by_one": one_by_one(fn, flush=True), "one_by_one_no_flush": one_by_one(fn, flush=False),
                       "host_us": host_us_per_call(f, a, b, rounds=2)}
                out["rows"].append(row)
                save()
                o, n = row["one_by_one"], row["one_by_one_no_flush"]
                print(f"{dtype} {shape.label:<22} {label:<13} gpu {row['gpu_us']:6.1f} called {row['called_us']:6.1f} "
                      f"(excess {row['called_us'] - row['gpu_us']:5.1f}) | 1by1 {o['event_us']:6.1f} host-in-call "
                      f"{o['host_in_call_us']:5.1f} | no flush {n['event_us']:6.1f} host-in-call {n['host_in_call_us']:5.1f}"
                      f" | back to back {row['host_us']:5.1f} | {row['config'] or ''}", flush=True)
    return 0


if __name__ == "__main__":
    runlog.run(main)
