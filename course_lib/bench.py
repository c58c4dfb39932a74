"""Timing on the GPU, always side by side with cuBLAS, and recording with provenance.

On a GPU, :func:`bench` times a stage and cuBLAS *in the same call*: the two are measured in
alternating rounds with CUDA events, after a warm-up that also checks the stage's output against
cuBLAS's, with the L2 cache flushed before every timed run; it reports the median and the 20th/80th
percentiles, the TFLOP/s (2*M*N*K / t) and the ratio to cuBLAS. Only ratios measured side by side are
compared across runs: the GPU's clocks drift under sustained load.

On the CPU nothing is timed (the simulator and interpreter say nothing about GPU speed):
:func:`bench` returns the results recorded on the reference GPU and says so. On a GPU that lacks a
feature a stage needs (see :mod:`course_lib.features`), that stage is not called either: its recorded
results are shown, labelled as recorded, with one line saying what this GPU lacks.

Command line (on a GPU)::

    python -m course_lib.bench --record            # every stage, every dtype, 1024..8192 + sweep + model shapes
    python -m course_lib.bench naive --dtype fp32 --size 4096
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import torch

from course_lib import backend
from course_lib.backend import NoGPUError
from course_lib.gemm import flops, random_inputs
from course_lib.model_shapes import MODEL_SHAPES
from course_lib.registry import Stage, get_stage, stage_or_callable, stages
from course_lib.timing import Timing, time_fn
from course_lib.results import RESULTS_DIR, Results, course_recording, format_table, load, save, slug, validate

Shape = tuple[int, int, int]

SQUARE_SIZES = (1024, 2048, 4096, 8192)
# The size sweep: powers of two and sizes that are not, square and not (wave quantisation on 132
# SMs shows between neighbouring sizes), plus the Russian article's Triton experiment shape.
SWEEP_SHAPES: tuple[Shape, ...] = (
    (256, 256, 256),
    (512, 512, 512),
    (768, 768, 768),
    (1000, 1000, 1000),
    (1536, 1536, 1536),
    (3000, 3000, 3000),
    (6144, 6144, 6144),
    (8192, 2048, 4096),
    (2048, 8192, 1024),
    (8192, 6144, 4096),
)

# The GEMMs of real models (course_lib.model_shapes): recorded for the course's final kernels.
MODEL_TABLE: tuple[Shape, ...] = tuple(s.shape for s in MODEL_SHAPES)
FINAL_STAGES = ("triton_fast", "tc_6_tma_store")

VARIANT_SIZE = 4096  # parameter variants of a stage are recorded at this size only

def _require_gpu(what: str) -> None:
    backend.require_gpu(what, "times kernels")


def _rel_error(c: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.double()
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref).clamp_min(1e-30))


# A stage whose output differs from cuBLAS's by more than this is not timed: a fast wrong kernel is
# not a result. (Loose on purpose: check() is the strict test; this catches a broken build.)
_SANITY = {"fp32": 1e-3, "tf32": 2e-2, "fp16": 5e-2, "bf16": 5e-2}


def measure(gemm: str | Stage | Callable, dtype: str, shape: Shape, *, rounds: int = 3, budget_ms: float = 100.0) -> dict[str, Any]:
    """Time one stage and cuBLAS on the same inputs in alternating rounds; return one record."""
    _require_gpu("measure")
    label, fn = stage_or_callable(gemm, dtype)
    cublas = get_stage("cublas").gemm(dtype)
    M, N, K = shape
    a, b = random_inputs(M, N, K, dtype)
    c, ref = fn(a, b), cublas(a, b)
    err = _rel_error(c, ref)
    if not err <= _SANITY[dtype]:
        raise AssertionError(
            f"{label} ({dtype}) at {M}x{N}x{K} differs from cuBLAS by {err:.2e}; not timing a wrong kernel"
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
    ms = statistics.median(t.median_ms for t in mine)
    cms = statistics.median(t.median_ms for t in theirs)
    tf = flops(M, N, K) / (ms * 1e-3) / 1e12
    ctf = flops(M, N, K) / (cms * 1e-3) / 1e12
    return {
        "stage": label,
        "dtype": dtype,
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
    """Where and with what a measurement was made."""
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
                  "flushes (Python's launch time kept out), median of alternating rounds stage/cuBLAS",
    }


class _Progress:
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
    dtype: str = "fp32",
    shapes: Iterable[Shape] | None = None,
    *,
    rounds: int = 3,
    progress: bool = True,
    ceilings: dict[str, Any] | None = None,
) -> Results:
    """Time a stage against cuBLAS on this GPU, or, without one, return what was recorded.

    ``ceilings`` (the machine's measured limits) are measured here unless the caller already has them.

    The returned :class:`~course_lib.results.Results` says which it is in ``.label``.
    """
    shapes = [tuple(s) for s in (shapes if shapes is not None else [(n, n, n) for n in SQUARE_SIZES])]
    why = _not_timed_here(gemm, dtype)
    if why is not None:
        name = gemm if isinstance(gemm, str) else gemm.name
        rec = course_recording()
        rows = _recorded_rows(rec, name, dtype, shapes)
        _say_recorded(why, rec)
        return Results(rec.path, rec.provenance, rec.ceilings, tuple(rows))
    bar = _Progress(len(shapes), "bench") if progress else None
    records = []
    for shape in shapes:
        records.append(measure(gemm, dtype, shape, rounds=rounds))
        if bar:
            r = records[-1]
            bar.step(f"{shape}: {r['tflops']:.1f} TF, {100 * r['ratio_to_cublas']:.0f}% of cuBLAS")
    prov = provenance("course_lib.bench.bench")
    prov["live"] = True
    if ceilings is None:
        ceilings = {"copy_bandwidth_gbs": copy_bandwidth_gbs()}
    return validate({"provenance": prov, "ceilings": ceilings, "records": records})


def compare(stage_names: Sequence[str], dtype: str = "fp32", shape: Shape = (4096, 4096, 4096), *, progress: bool = True) -> Results:
    """Several stages at one shape, each side by side with cuBLAS: measured live on a GPU, the
    recorded results without one; on a GPU, a stage this GPU cannot run shows its recorded row,
    marked as recorded, and one line says what the GPU lacks. ``.label`` says which is which. Feed it
    to course_lib.plots."""
    rec = course_recording()
    on_gpu = backend.get().is_gpu
    lacking = {name: why for name in stage_names if (why := get_stage(name).why_not_here(dtype)) is not None}
    for why in lacking.values() if on_gpu else ():
        print(f"not run here: {why}")
    if not on_gpu or len(lacking) == len(stage_names):  # nothing runs here: the recording, as it is
        rows = [r for name in stage_names for r in _recorded_rows(rec, name, dtype, [shape])]
        _say_recorded("No GPU here" if not on_gpu else "", rec)
        return Results(rec.path, rec.provenance, rec.ceilings, tuple(rows))
    ceilings = {"copy_bandwidth_gbs": copy_bandwidth_gbs()}  # once, not once per stage
    records: list[dict[str, Any]] = []
    for name in stage_names:
        if name in lacking:
            records += [dict(r, recorded_on=r.get("recorded_on") or rec.source)
                        for r in _recorded_rows(rec, name, dtype, [shape])]
        else:
            live = bench(name, dtype, [shape], progress=progress, ceilings=ceilings)
            records += live.records
    return Results(None, live.provenance, live.ceilings, tuple(records))


def _not_timed_here(gemm: str | Stage | Callable, dtype: str) -> str | None:
    """Why :func:`bench` cannot time ``gemm`` in ``dtype`` here (None: it can)."""
    if isinstance(gemm, (str, Stage)):
        stage = get_stage(gemm) if isinstance(gemm, str) else gemm
        if dtype in stage.gemms and (why := stage.why_not_here(dtype)) is not None:
            return why
        if not backend.get().is_gpu:
            return "No GPU here"
        return None
    if not backend.get().is_gpu:
        raise NoGPUError(
            "without a GPU there is nothing recorded for your own function, and the CPU "
            "backend cannot time it; check it with course_lib.check instead"
        )
    return None


def _recorded_rows(rec: Results, name: str, dtype: str, shapes: Sequence[Shape]) -> list[dict[str, Any]]:
    rows = rec.select(name, dtype, shapes)
    if not rows:
        raise LookupError(
            f"nothing recorded for {name} ({dtype}) at {list(shapes)} in {rec.path.name if rec.path else 'the recording'}; "
            f"recorded shapes: {sorted({(r['M'], r['N'], r['K']) for r in rec.select(name, dtype)})}"
        )
    return rows


def _say_recorded(why: str, rec: Results) -> None:
    """One line before recorded numbers: why they are not measured here (if not said already)."""
    if why == "No GPU here":
        print(f"No GPU here: these numbers were {rec.label},\nnot measured on this machine.")
    else:
        print((f"not run here: {why}\n" if why else "") + f"These numbers were {rec.label},\nnot measured on this machine.")


# ---- recording ---------------------------------------------------------------------------------
def record_plan(selected: Sequence[str] | None = None, sweep: bool = True,
                capability: backend.Capability | None = None, device: backend.Capability | None = None,
                ) -> list[tuple[str, str, Shape]]:
    """(stage, dtype, shape) triples a recording run measures: every GPU stage and dtype at the
    square sizes, the size sweep for the fastest stage of each backend, and the model shape table
    for the final kernels (minus the shapes a stage refuses: :func:`refused_shapes`). With ``capability``
    (and the GPU's real ``device`` capability, if it is treated as an older one), only what such a
    GPU can run: :func:`not_recordable` lists the rest."""
    plan = []
    for st in stages():
        if st.name == "cublas" or (selected and st.name not in selected):
            continue
        for dtype in st.dtypes:
            if capability is not None and st.missing_feature(dtype, capability, device) is not None:
                continue
            shapes = [(n, n, n) for n in SQUARE_SIZES]
            if st.variant_of:  # a parameter variant: one size, for the notebook's sweep
                shapes = [(VARIANT_SIZE,) * 3]
            elif sweep and st.sweep:
                shapes += list(SWEEP_SHAPES)
                if st.name in FINAL_STAGES:
                    shapes += [s for s in MODEL_TABLE if s not in shapes]
            for shape in shapes:
                if all(d % st.shape_multiple == 0 for d in shape):
                    plan.append((st.name, dtype, shape))
    return plan


def refused_shapes(selected: Sequence[str] | None = None) -> list[str]:
    """One line per sweep or table shape a sweep stage refuses (its shape_multiple)."""
    out = []
    for st in stages():
        if st.sweep and (not selected or st.name in selected):
            for shape in list(SWEEP_SHAPES) + list(MODEL_TABLE if st.name in FINAL_STAGES else ()):
                if any(d % st.shape_multiple for d in shape):
                    out.append(f"{st.name} at {shape[0]}x{shape[1]}x{shape[2]}: M, N and K must be multiples "
                               f"of {st.shape_multiple}")
    return out


def not_recordable(capability: backend.Capability, device: backend.Capability | None = None,
                   selected: Sequence[str] | None = None) -> list[str]:
    """One line per (stage, dtype) a GPU of ``capability`` cannot run, saying what it lacks."""
    out = []
    for st in stages():
        for dtype in st.dtypes:
            feature = st.missing_feature(dtype, capability, device)
            if feature is not None and (not selected or st.name in selected or st.name == "cublas"):
                out.append(f"{st.name} {dtype}: needs {feature.name} (compute capability {feature.where})")
    return out


def record(out: Path | None = None, selected: Sequence[str] | None = None, *, sweep: bool = True, command: str = "") -> Path:
    """Measure the plan and write a results file with provenance; returns its path.

    Only what this GPU can run is measured; the provenance lists the rest (``not_recorded``). A GPU
    treated as an older one (COURSE_ASSUME_CAPABILITY) records to ``<gpu>_as_sm<XY>.json`` by
    default, so the GPU's own recording is never replaced by a partial one."""
    _require_gpu("record")
    b = backend.get()
    prov = provenance(command)
    suffix = f"_as_{backend.arch_name(b.capability).replace('_', '')}" if b.assumed else ""
    out = out or RESULTS_DIR / f"{slug(prov['gpu'])}{suffix}.json"
    ceilings: dict[str, Any] = {"copy_bandwidth_gbs": copy_bandwidth_gbs()}
    records: list[dict[str, Any]] = []
    # cuBLAS against itself at every size of the plan: the reference rows of every chart.
    plan = record_plan(selected, sweep, b.capability, b.device_capability)
    cublas = get_stage("cublas")
    cublas_shapes = sorted({(d, s) for _, d, s in plan} | {
        (d, (n, n, n)) for d in cublas.dtypes for n in SQUARE_SIZES
        if cublas.missing_feature(d, b.capability, b.device_capability) is None})
    prov["not_recorded"] = not_recordable(b.capability, b.device_capability, selected) + refused_shapes(selected)
    full = [("cublas", d, s) for d, s in cublas_shapes] + plan
    bar = _Progress(len(full), "record")
    failures = []
    for name, dtype, shape in full:
        try:
            records.append(measure(name, dtype, shape))
            r = records[-1]
            bar.step(f"{name} {dtype} {shape}: {r['tflops']:.1f} TF")
            # Written after every measurement, so a run cut short keeps what it measured.
            partial = dict(prov, partial=True)
            save(Results(out, partial, ceilings, tuple(records)), out.with_suffix(".partial.json"))
        except Exception as e:  # noqa: BLE001 - one failing stage must not lose the others; listed below
            failures.append(f"{name} {dtype} {shape}: {type(e).__name__}: {e}")
            bar.step(f"{name} {dtype} {shape}: FAILED")
    peaks: dict[str, float] = {}
    for r in records:
        if r["stage"] == "cublas":
            peaks[r["dtype"]] = max(peaks.get(r["dtype"], 0.0), r["tflops"])
    ceilings["cublas_peak_tflops"] = peaks
    prov["failures"] = failures
    # How the stages that tune per shape chose (Stage.tuning_log): the choices in the provenance,
    # every candidate's time beside the results file (a raw log, not into the package).
    log_dir = Path.cwd() if out.parent.resolve() == RESULTS_DIR.resolve() else out.parent
    for st in stages():
        if st.tuning_log is not None and (not selected or st.name in selected):
            log = st.tuning_log()
            prov[f"{st.name}_tuning"] = [{k: v for k, v in t.items() if k != "candidates_ms"} for t in log]
            (log_dir / f"{out.stem}_{st.name}_tuning_log.json").write_text(json.dumps(log, indent=1))
    path = save(Results(out, prov, ceilings, tuple(records)), out)
    out.with_suffix(".partial.json").unlink(missing_ok=True)
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    return path


def replace_stages(recording: Path, update: Path, command: str = "", keep_cublas: bool = False) -> Path:
    """Put the records of ``update`` (a recording of some stages, ``--stages``) into ``recording`` in
    place of that recording's rows of the same stages, and of cuBLAS at the same (dtype, shape)
    unless ``keep_cublas`` (a stage added to a recording whose cuBLAS rows the notebooks quote: each
    new row still holds the cuBLAS time measured beside it); the provenance keeps every other row's
    origin and lists the re-recording (``rerecorded``)."""
    old, new = load(recording), load(update)
    if keep_cublas:
        new = Results(new.path, new.provenance, new.ceilings, tuple(r for r in new.records if r["stage"] != "cublas"))
    if old.provenance["gpu"] != new.provenance["gpu"]:
        raise ValueError(f"{update.name} was recorded on {new.provenance['gpu']}, {recording.name} on "
                         f"{old.provenance['gpu']}: only recordings of the same GPU are merged")
    stages_new = sorted({r["stage"] for r in new.records} - {"cublas"})
    replaced = {(r["dtype"], r["M"], r["N"], r["K"]) for r in new.records if r["stage"] == "cublas"}
    keep = [r for r in old.records if r["stage"] not in stages_new
            and not (r["stage"] == "cublas" and (r["dtype"], r["M"], r["N"], r["K"]) in replaced)]
    prov = dict(old.provenance)
    tuning = {f"{st}_tuning" for st in stages_new}
    for key in tuning:
        prov.pop(key, None)  # the re-recording's tuning replaces it (below)
    prov["rerecorded"] = list(prov.get("rerecorded", [])) + [{
        "stages": stages_new, "date": new.provenance["date"], "command": command or new.provenance.get("command", ""),
        **({"cublas_rows": "kept from the recording"} if keep_cublas else {}),
        "failures": new.provenance.get("failures", []),
        **{key: new.provenance[key] for key in sorted(tuning) if key in new.provenance},
    }]
    merged = tuple(keep) + tuple(new.records)
    ceilings = dict(old.ceilings)
    ceilings["cublas_peak_tflops"] = {d: max(r["tflops"] for r in merged if r["stage"] == "cublas" and r["dtype"] == d)
                                      for d in sorted({r["dtype"] for r in merged if r["stage"] == "cublas"})}
    return save(Results(recording, prov, ceilings, merged), recording)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_lib.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("stage", nargs="?", help="a registered stage (omit with --record)")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--size", type=int, nargs="*", help="square sizes (default 1024 2048 4096 8192)")
    p.add_argument("--record", action="store_true", help="record every stage into course_lib/results/<gpu>.json")
    p.add_argument("--stages", help="with --record: comma-separated stages only")
    p.add_argument("--no-sweep", action="store_true", help="with --record: square sizes only")
    p.add_argument("--out", type=Path, help="with --record: where to write (default course_lib/results/<gpu>.json)")
    p.add_argument("--replace-in", type=Path, help="with --record --stages: put the new rows into this recording "
                   "in place of its rows of those stages (provenance lists the re-recording)")
    p.add_argument("--keep-cublas", action="store_true", help="with --replace-in: keep the recording's cuBLAS rows "
                   "(each new row still has the cuBLAS time measured in its own call)")
    args = p.parse_args(argv)
    if args.record:
        selected = args.stages.split(",") if args.stages else None
        command = "python -m course_lib.bench " + " ".join(argv or sys.argv[1:])
        if args.replace_in and not selected:
            p.error("--replace-in needs --stages")
        path = record(args.out, selected, sweep=not args.no_sweep, command=command)
        if args.replace_in:
            path = replace_stages(args.replace_in, path, command, keep_cublas=args.keep_cublas)
        res = load(path)
        print(f"wrote {path} ({len(res.records)} records, {res.label})")
        print(format_table(res.records))
        return 0
    if not args.stage:
        p.error("name a stage, or pass --record")
    sizes = args.size or list(SQUARE_SIZES)
    res = bench(args.stage, args.dtype, [(n, n, n) for n in sizes])
    print(res.label if not res.provenance.get("live") else f"measured live on {res.provenance['gpu']}")
    print(format_table(res.records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
