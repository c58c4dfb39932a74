"""Timing on the GPU, always side by side with cuBLAS; without a GPU, what was recorded.

On a GPU, :func:`bench` times a stage and cuBLAS *in the same call*: the two are measured in
alternating rounds with CUDA events, after a warm-up that also checks the stage's output against
cuBLAS's, with the L2 cache flushed before every timed run; it reports the median and the 20th/80th
percentiles, the TFLOP/s (2*M*N*K / t) and the ratio to cuBLAS. Only ratios measured side by side are
compared across runs: the GPU's clocks drift under sustained load.

On the CPU nothing is timed (the simulator and interpreter say nothing about GPU speed):
:func:`bench` returns the results recorded on the reference GPU and says so. On a GPU that lacks a
feature a stage needs (see :mod:`course_lib.features`), that stage is not called either: its recorded
results are shown, labelled as recorded, with one line saying what this GPU lacks.

Recording every stage into a results file is :mod:`course_lib.bench.recording`; both have a command
line, ``python -m course_lib.bench`` (:mod:`course_lib.bench.__main__`).
"""

from __future__ import annotations

import datetime
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Iterable, Sequence

import torch

from course_lib import backend
from course_lib.backend import NoGPUError
from course_lib.dtypes import CourseDtype
from course_lib.gemm import flops, relative_error
from course_lib.model.layout import Shape
from course_lib.registry import Stage
from course_lib.results import Results, course_recording, validate
from course_lib.target import Target, resolve
from course_lib.timing import Timing, time_fn

__all__ = ["SQUARE_SIZES", "SWEEP_SHAPES", "Progress", "bench", "compare", "copy_bandwidth_gbs", "measure", "provenance"]

SQUARE_SIZES = (1024, 2048, 4096, 8192)  # what bench times unless told, and every stage is recorded at
# The size sweep, recorded for the fastest stages: powers of two and sizes that are not, square and
# not (wave quantisation on 132 SMs shows between neighbouring sizes), plus the Russian article's
# Triton experiment shape.
SWEEP_SHAPES: tuple[Shape, ...] = (
    (256, 256, 256),
    (512, 512, 512),
    (768, 768, 768),
    (1000, 1000, 1000),
    (1536, 1536, 1536),
    (3000, 3000, 3000),
    (3072, 3072, 3072),
    (6144, 6144, 6144),
    (8192, 2048, 4096),
    (2048, 8192, 1024),
    (8192, 6144, 4096),
)


def _require_gpu(what: str) -> None:
    backend.require_gpu(what, "times kernels")


AS_CALLED_ROUNDS, AS_CALLED_BUDGET_MS = 2, 40.0


def measure(gemm: str | Stage | Callable | Target, dtype: str | CourseDtype, shape: Shape, *, scaling: str | None = None, rounds: int = 3, budget_ms: float = 100.0,
            as_called: bool = False) -> dict[str, Any]:
    """Time one stage and cuBLAS on the same inputs in alternating rounds; return one record.

    ``gemm`` in ``dtype`` (and, for FP8, ``scaling``: cuBLAS then scales its operands the same way)
    as :func:`course_lib.target.resolve` takes them; FP8's cuBLAS is ``torch._scaled_mm`` with the
    scales already in its layout, as a caller who stores them that way gets it (``Target.reference``;
    the course's ``cublas_fp8`` lays them out in every call, with block scales a copy on the GPU
    that GPU time would count). The record's ``ms`` is GPU time (the host's time
    to call kept out). With ``as_called``, both are also timed as a caller gets them - one call on an
    idle GPU, host time included (``time_fn(host=True)``) - in AS_CALLED_ROUNDS more alternating
    rounds: ``ms_as_called``, ``cublas_ms_as_called`` and ``ratio_to_cublas_as_called`` (and
    cuBLAS's rounds, which a recording pools: :func:`course_lib.bench.recording.pool_cublas_as_called`)."""
    _require_gpu("measure")
    t = gemm if isinstance(gemm, Target) else resolve(gemm, dtype, scaling)
    M, N, K = shape
    a, b = t.inputs(M, N, K)
    label, fn, cublas = t.label, t.fn, t.reference((a, b))
    if t.fp8 and t.stage is not None and t.stage.name == "cublas":
        fn = cublas  # cuBLAS's own FP8 row: the library call, as it is every FP8 stage's yardstick
    c, ref = fn(a, b), cublas(a, b)
    err = relative_error(c, ref)
    # Loose on purpose (check() is the strict test): a fast wrong kernel is not a result.
    if not err <= t.dtype.sanity:
        raise AssertionError(
            f"{label} ({t.arithmetic}) at {M}x{N}x{K} differs from cuBLAS by {err:.2e}; not timing a wrong kernel"
        )
    del c, ref
    mine: list[Timing] = []
    theirs: list[Timing] = []
    mine.append(time_fn(lambda: fn(a, b), budget_ms=budget_ms))
    theirs.append(time_fn(lambda: cublas(a, b), budget_ms=budget_ms))
    # A slow kernel (the naive ones at 8192 take a second a run) gets one round, not three: its
    # spread is small next to its time, and the recording must fit one 10-minute call.
    if mine[0].median_ms * mine[0].runs > 2 * budget_ms:
        rounds = 1
    for _ in range(rounds - 1):
        mine.append(time_fn(lambda: fn(a, b), budget_ms=budget_ms))
        theirs.append(time_fn(lambda: cublas(a, b), budget_ms=budget_ms))
    called: dict[str, float] = {}
    if as_called:
        mine_called, theirs_called = [], []
        for _ in range(AS_CALLED_ROUNDS):
            mine_called.append(time_fn(lambda: fn(a, b), budget_ms=AS_CALLED_BUDGET_MS, host=True).median_ms)
            theirs_called.append(time_fn(lambda: cublas(a, b), budget_ms=AS_CALLED_BUDGET_MS, host=True).median_ms)
        ms_called, cms_called = statistics.median(mine_called), statistics.median(theirs_called)
        called = {"ms_as_called": ms_called, "cublas_ms_as_called": cms_called,
                  "ratio_to_cublas_as_called": cms_called / ms_called,
                  "cublas_ms_as_called_rounds": theirs_called}
    ms = statistics.median(t.median_ms for t in mine)
    cms = statistics.median(t.median_ms for t in theirs)
    tf = flops(M, N, K) / (ms * 1e-3) / 1e12
    ctf = flops(M, N, K) / (cms * 1e-3) / 1e12
    return {
        "stage": label,
        "dtype": t.dtype.name,
        **({"scaling": t.scaling} if t.fp8 else {}),
        "M": M,
        "N": N,
        "K": K,
        "ms": ms,
        "ms_p20": min(t.p20_ms for t in mine),
        "ms_p80": max(t.p80_ms for t in mine),
        "tflops": tf,
        "cublas_ms": cms,
        "cublas_tflops": ctf,
        "ratio_to_cublas": tf / ctf,
        "runs": sum(t.runs for t in mine),
        "rel_error_vs_cublas": err,
        **called,
        # What a stage that plans per shape ran here (Stage.plan), so a table can print it beside the time.
        **({"plan": t.stage.plan(M, N, K)} if t.stage is not None and t.stage.plan is not None else {}),
    }


def copy_bandwidth_gbs(nbytes: int = 2 * 2**30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    _require_gpu("copy_bandwidth_gbs")
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    t = time_fn(lambda: dst.copy_(src), budget_ms=300)
    return 2 * nbytes / (t.median_ms * 1e-3) / 1e9


def _driver_version() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown (nvidia-smi not available)"


def provenance(command: str = "") -> dict[str, Any]:
    """Where and with what a measurement was made (a live result and a recording both carry it)."""
    _require_gpu("provenance")
    props = torch.cuda.get_device_properties(0)
    versions = backend.versions()
    b = backend.get()
    treated_as = {"treated_as": "{}.{}".format(*b.capability)} if b.assumed else {}
    return {
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "compute_capability": f"{props.major}.{props.minor}",
        **treated_as,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "driver": _driver_version(),
        "cuda": torch.version.cuda,
        "torch": versions["torch"],
        "triton": versions["triton"],
        "numba": versions["numba"],
        "numba_cuda": versions["numba-cuda"],
        "numpy": versions["numpy"],
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "method": "CUDA events, L2 flushed before each run, runs under 1 ms queued behind up to 256 extra "
                  "flushes (Python's launch time kept out), median of alternating rounds stage/cuBLAS; "
                  "'as called' (final stages): the host waits for each flush, so a run's time includes "
                  "the wrapper and the launch; cuBLAS's as-called time at a shape is the median of all its "
                  "as-called rounds there, beside every kernel it alternated with",
    }


class Progress:
    """A one-line text progress bar on stderr (works in a terminal and in a notebook)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.done, self.label, self.t0 = max(total, 1), 0, label, time.time()

    def step(self, what: str) -> None:
        self.done += 1
        width = 30
        fill = int(width * self.done / self.total)
        bar = "#" * fill + "." * (width - fill)
        sys.stderr.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {what[:48]:<48}")
        if self.done == self.total:
            sys.stderr.write(f" ({time.time() - self.t0:.0f} s)\n")
        sys.stderr.flush()


def bench(
    gemm: str | Stage | Callable,
    dtype: str | CourseDtype = "fp32",
    shapes: Iterable[Shape] | None = None,
    *,
    scaling: str | None = None,
    rounds: int = 3,
    progress: bool = True,
    ceilings: dict[str, Any] | None = None,
) -> Results:
    """Time a stage against cuBLAS on this GPU, or, without one, return what was recorded.

    ``gemm``, ``dtype`` and ``scaling`` (FP8 only) as :func:`course_lib.target.resolve` takes them.
    ``ceilings`` (the machine's measured limits) are measured here unless the caller already has them.

    The returned :class:`~course_lib.results.Results` says which it is in ``.label``.
    """
    t = resolve(gemm, dtype, scaling)
    shapes = [tuple(s) for s in (shapes if shapes is not None else [(n, n, n) for n in SQUARE_SIZES])]
    why = _not_timed_here(t)
    if why is not None:
        rec = course_recording()
        rows = _recorded_rows(rec, t, shapes)
        _say_recorded(why, rec)
        return Results(rec.path, rec.provenance, rec.ceilings, tuple(rows))
    bar = Progress(len(shapes), "bench") if progress else None
    records = []
    for shape in shapes:
        records.append(measure(t, t.dtype, shape, rounds=rounds))
        if bar:
            r = records[-1]
            bar.step(f"{shape}: {r['tflops']:.1f} TF, {100 * r['ratio_to_cublas']:.0f}% of cuBLAS")
    prov = provenance("course_lib.bench.bench")
    prov["live"] = True
    if ceilings is None:
        ceilings = {"copy_bandwidth_gbs": copy_bandwidth_gbs()}
    return validate({"provenance": prov, "ceilings": ceilings, "records": records})


def compare(stage_names: Sequence[str], dtype: str | CourseDtype = "fp32", shape: Shape = (4096, 4096, 4096), *,
            scaling: str | None = None, progress: bool = True) -> Results:
    """Several stages at one shape, each side by side with cuBLAS: measured live on a GPU, the
    recorded results without one; on a GPU, a stage this GPU cannot run shows its recorded row,
    marked as recorded, and one line says what the GPU lacks. ``.label`` says which is which. Feed it
    to course_lib.plots."""
    targets = [resolve(name, dtype, scaling) for name in stage_names]
    rec = course_recording()
    on_gpu = backend.get().is_gpu
    lacking = {t.label: t.why_not_here for t in targets if t.why_not_here is not None}
    for why in lacking.values() if on_gpu else ():
        print(f"not run here: {why}")
    if not on_gpu or len(lacking) == len(targets):  # nothing runs here: the recording, as it is
        rows = [r for t in targets for r in _recorded_rows(rec, t, [shape])]
        _say_recorded("No GPU here" if not on_gpu else "", rec)
        return Results(rec.path, rec.provenance, rec.ceilings, tuple(rows))
    ceilings = {"copy_bandwidth_gbs": copy_bandwidth_gbs()}  # once, not once per stage
    records: list[dict[str, Any]] = []
    for t in targets:
        if t.label in lacking:
            records += [dict(r, recorded_on=r.get("recorded_on") or rec.source) for r in _recorded_rows(rec, t, [shape])]
        else:
            live = bench(t.stage, t.dtype, [shape], scaling=t.scaling, progress=progress, ceilings=ceilings)
            records += live.records
    return Results(None, live.provenance, live.ceilings, tuple(records))


def _not_timed_here(t: Target) -> str | None:
    """Why :func:`bench` cannot time ``t`` here (None: it can)."""
    if t.why_not_here is not None:
        return t.why_not_here
    if t.stage is not None:
        return None if backend.get().is_gpu else "No GPU here"
    if not backend.get().is_gpu:
        raise NoGPUError(
            "without a GPU there is nothing recorded for your own function, and the CPU "
            "backend cannot time it; check it with course_lib.check instead"
        )
    return None


def _recorded_rows(rec: Results, t: Target, shapes: Sequence[Shape]) -> list[dict[str, Any]]:
    rows = rec.select(t.label, t.dtype.name, shapes, scaling=t.scaling)
    if not rows:
        recorded = sorted({(r["M"], r["N"], r["K"]) for r in rec.select(t.label, t.dtype.name, scaling=t.scaling)})
        raise LookupError(
            f"nothing recorded for {t.label} ({t.arithmetic}) at {list(shapes)} in "
            f"{rec.path.name if rec.path else 'the recording'}; recorded shapes: {recorded} "
            f"(a new stage is recorded on a GPU: STAGES={t.label} bash tools/gpu_run_all.sh record)"
        )
    return rows


def _say_recorded(why: str, rec: Results) -> None:
    """One line before recorded numbers: why they are not measured here (if not said already)."""
    if why == "No GPU here":
        print(f"No GPU here: these numbers were {rec.label},\nnot measured on this machine.")
    else:
        print((f"not run here: {why}\n" if why else "") + f"These numbers were {rec.label},\nnot measured on this machine.")
