"""Timing on the GPU with CUDA events: the one timer of the course.

It lives below the kernels (which use it to autotune) and below :mod:`course_lib.bench` (which times
every stage against cuBLAS with it). Two habits make short kernels time honestly:

* the L2 cache is flushed before every run (a 256 MB memset, larger than the H200's 60 MB L2, as
  ``triton.testing.do_bench`` does), so no run finds its inputs already in L2;
* runs shorter than a millisecond are queued behind extra flushes (unless the host's time is what is
  being measured: ``time_fn(..., host=True)``), so the CPU is far ahead of the
  GPU when the first timed run starts. Otherwise a Python wrapper that takes longer to launch than
  a flush and a run take on the GPU leaves the GPU idle inside the timed interval, and that idle
  time is counted as the kernel's. At least 256 flushes (about 20 ms of GPU work); more when the
  host's time to queue one run (measured) exceeds the GPU's, so that the lead lasts for every run.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from course_lib import backend

_FLUSH_BYTES = 256 * 2**20
_LEAD_FLUSHES = 256
_LEAD_MAX_FLUSHES = 4096  # about 0.3 s of GPU work on the H200
_LEAD_BELOW_MS = 1.0  # a run this long already gives the CPU time to enqueue the next one


@dataclass(frozen=True)
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    runs: int


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


# How a flush empties L2 of the timed function's data. "write" (what triton.testing.do_bench does) sets
# a 256 MB buffer to zero, which leaves L2 full of dirty lines: a kernel that reads more than it
# writes first makes room by writing them back to DRAM. "read" sums the buffer instead, which leaves
# L2 full of clean lines that can simply be dropped.
FLUSHES = ("write", "read")


def _flusher(buffer: torch.Tensor, how: str) -> Callable[[], object]:
    if how == "write":
        return buffer.zero_
    if how == "read":
        return lambda: buffer.sum(dtype=torch.int64)
    raise ValueError(f"flush is one of {FLUSHES}, not {how!r}")


def lead_flushes(fn: Callable[[], object], flush: Callable[[], object], runs: int) -> int:
    """How many flushes to queue before ``runs`` timed runs of ``fn`` (each after a flush) so that
    the GPU never waits for the host: the host's time to queue one run beyond the GPU's time for it
    (a flush and the run), times the runs, covered 1.5 times over; 256 to 4096 flushes."""
    f0, f1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    f0.record()
    for _ in range(32):  # ~2 ms of GPU work: the three runs below are queued, not waited for
        flush()
    f1.record()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(3)]
    t0 = time.perf_counter()
    for s, e in pairs:
        flush()
        s.record()
        fn()
        e.record()
    host_ms = (time.perf_counter() - t0) * 1e3 / len(pairs)
    torch.cuda.synchronize()
    flush_ms = max(f0.elapsed_time(f1) / 32, 1e-3)
    run_ms = min(s.elapsed_time(e) for s, e in pairs)
    deficit_ms = max(0.0, host_ms - (flush_ms + run_ms))
    wanted = math.ceil(1.5 * runs * deficit_ms / flush_ms)
    return min(_LEAD_MAX_FLUSHES, max(min(runs, _LEAD_FLUSHES), wanted))


def time_fn(fn: Callable[[], object], *, budget_ms: float = 150.0, min_runs: int = 3, max_runs: int = 300,
            flush: str = "write", host: bool = False) -> Timing:
    """Time ``fn`` on the GPU with CUDA events: one warm-up, then as many runs as fit the budget,
    each after an L2 flush (``flush``: one of :data:`FLUSHES`); the median and the 20th/80th
    percentiles of the runs.

    ``host=False`` (GPU time): short runs are queued behind extra flushes (the module's docstring), so
    the host's time to launch is kept out. ``host=True`` (as called): the host waits for the flush to
    finish before each run, so the run starts on an idle GPU and its time is the call's whole latency -
    the wrapper's Python, the launch, the kernel - what a caller who waits for the result gets.
    (``triton.testing.do_bench`` queues the run right behind its flush, which hides up to one flush of
    host time, about 80 us on the H200.)"""
    backend.require_gpu("time_fn", "times kernels")
    fn()
    torch.cuda.synchronize()
    empty_l2 = _flusher(torch.zeros(_FLUSH_BYTES, dtype=torch.uint8, device="cuda"), flush)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    estimate = max(start.elapsed_time(end), 1e-3)
    runs = int(min(max_runs, max(min_runs, budget_ms // estimate)))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    if estimate < _LEAD_BELOW_MS and not host:
        for _ in range(lead_flushes(fn, empty_l2, runs)):
            empty_l2()
    for s, e in events:
        empty_l2()
        if host:
            torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in events)
    return Timing(statistics.median(times), _quantile(times, 0.2), _quantile(times, 0.8), runs)
