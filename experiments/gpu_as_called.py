"""What the course's "as called" time contains, and whether cuBLAS's depends on the kernel it alternates with.

    python experiments/gpu_as_called.py --out $OUT/as_called.json

``course_lib.timing.time_fn(host=True)`` times a call from an idle GPU: after each L2 flush the host
waits for the GPU, records the start event, calls, records the end event. In the recording cuBLAS's
own as-called time moved with its partner (next to tc_6 about 13 us above its GPU time at the decode
rows, next to triton_fast 13-27 us), and at 6144^3 it was 118 us above its GPU time. This script
times ``torch.matmul`` (bf16) at a host-bound size, two decode rows, 1024^3 and 6144^3, each way:

* ``gpu``: GPU time (runs queued behind flushes, the host kept out);
* ``called``: as called, in three blocks of rounds - alone, alternating with tc_6, alternating with
  triton_fast - to see whether the partner moves it;
* ``called_one_by_one``: as called, the runs timed one by one in this script (the same steps as
  ``time_fn(host=True)``), then the same with no L2 flush (``called_no_flush``: the flush's own
  effect), and with the host asleep 1 ms more before each call (``called_idle``: the GPU idle longer);
* ``host_us``: the host's time per call back to back (``gpu_host_time.host_us_per_call``), on the
  same shape.
Medians of the rounds, in microseconds; each row also gives every round's median (the spread).

Raw log, never edited.
"""

from __future__ import annotations

import statistics
import time

import torch

import course_lib
from course_lib import registry
from course_lib import timing
from gpu_host_time import host_us_per_call  # this folder is on sys.path
import runlog  # this folder is on sys.path

SHAPES = [("64^3", (64, 64, 64)), ("llama3 qkv M=1", (1, 6144, 4096)), ("qwen2.5 qkv M=8", (8, 4608, 3584)),
          ("1024^3", (1024, 1024, 1024)), ("6144^3", (6144, 6144, 6144))]
ROUNDS, BUDGET_MS = 4, 40.0


def called_ms(fn, **kw) -> float:
    return timing.time_fn(fn, budget_ms=BUDGET_MS, host=True, **kw).median_ms


def one_by_one(fn, flush: bool, sleep_s: float = 0.0) -> dict:
    """As called, runs timed one by one: an L2 flush (or none), the host waits for the GPU and sleeps
    ``sleep_s`` more, then the call between two events. The medians of 30 runs of the events' time
    (``event_us``) and of the host's own time in the call (``host_in_call_us``: from just before the
    start event is recorded to just after the call returns)."""
    events, host = [], []
    buffer = torch.zeros(timing._FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for _ in range(30):
        if flush:
            buffer.zero_()
        torch.cuda.synchronize()
        if sleep_s:
            time.sleep(sleep_s)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        fn()
        t1 = time.perf_counter()
        e.record()
        e.synchronize()
        events.append(1e3 * s.elapsed_time(e))
        host.append(1e6 * (t1 - t0))
    return {"event_us": statistics.median(events), "host_in_call_us": statistics.median(host)}


def main() -> int:
    out, save = runlog.start(__doc__, 1, rows=[])
    course_lib.describe()
    partners = {"tc_6": registry.get_stage("tc_6_tma_store").gemm("bf16"),
                "triton_fast": registry.get_stage("triton_fast").gemm("bf16")}
    for label, (M, N, K) in SHAPES:
        a, b = course_lib.random_inputs(M, N, K, "bf16", seed=0)
        cublas = lambda: torch.matmul(a, b)  # noqa: E731
        for p in partners.values():
            p(a, b)  # tunes, builds, plans outside the timed runs
        row = {"label": label, "shape": [M, N, K], "called_rounds": {}}
        row["gpu_us"] = 1e3 * statistics.median(timing.time_fn(cublas, budget_ms=BUDGET_MS).median_ms
                                                for _ in range(ROUNDS))
        for block in ("alone", *partners):
            rounds = []
            for _ in range(ROUNDS):
                if block != "alone":
                    called_ms(lambda: partners[block](a, b))
                rounds.append(round(1e3 * called_ms(cublas), 2))
            row["called_rounds"][block] = rounds
        row["called_us"] = {k: statistics.median(v) for k, v in row["called_rounds"].items()}
        row["called_one_by_one_us"] = one_by_one(cublas, flush=True)["event_us"]
        row["called_no_flush_us"] = one_by_one(cublas, flush=False)["event_us"]
        row["called_idle_us"] = one_by_one(cublas, flush=True, sleep_s=1e-3)["event_us"]
        row["host_us"] = host_us_per_call(lambda x, y: torch.matmul(x, y), a, b, rounds=3) if M * N * K <= 2**28 else None
        out["rows"].append(row)
        save()
        print(f"{label:<16} gpu {row['gpu_us']:8.1f} us | as called: " +
              " ".join(f"{k} {v:8.1f}" for k, v in row["called_us"].items()) +
              f" | 1 by 1 {row['called_one_by_one_us']:8.1f} no flush {row['called_no_flush_us']:8.1f}"
              f" idle {row['called_idle_us']:8.1f}" +
              (f" | host/call {row['host_us']:6.1f}" if row["host_us"] else ""), flush=True)
        print("   rounds: " + "; ".join(f"{k} {v}" for k, v in row["called_rounds"].items()), flush=True)
    return 0


if __name__ == "__main__":
    runlog.run(main)
