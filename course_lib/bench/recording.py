"""Recording every stage on this GPU into a results file, with its provenance, and merging a
re-recording of some stages into a recording.

:func:`record_plan` is what a recording measures: every GPU stage and dtype at the square sizes, the
size sweep for the fastest stage of each backend, and the GEMMs of real models for the final kernels,
minus what this GPU cannot run (:func:`not_recordable`) and the shapes a stage refuses
(:func:`refused_shapes`), which the provenance lists. :func:`record` measures the plan with
:func:`course_lib.bench.measure` (each stage beside cuBLAS) and writes ``results/<gpu>.json``;
:func:`replace_stages` puts a re-recording of some stages into a recording in place of their rows.
The command line is ``python -m course_lib.bench --record`` (:mod:`course_lib.bench.__main__`).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from course_lib import backend, bench, dtypes
from course_lib.bench import SQUARE_SIZES, SWEEP_SHAPES
from course_lib.model import layout
from course_lib.model.layout import Shape
from course_lib.model_shapes import MODEL_SHAPES
from course_lib.registry import get_stage, stages
from course_lib.results import RESULTS_DIR, Results, load, save, slug

# The GEMMs of real models (course_lib.model_shapes): recorded for the course's final kernels.
MODEL_TABLE: tuple[Shape, ...] = tuple(s.shape for s in MODEL_SHAPES)
FINAL_STAGES = ("triton_fast", "tc_6_tma_store", "triton_fp8", "tc_7_fp8")  # FP8 (e4m3): notebook 12's

VARIANT_SIZE = 4096  # parameter variants of a stage are recorded at this size only


class Planned(NamedTuple):
    """One measurement of a recording: a stage in a dtype at a shape (FP8: with its operands' scaling)."""

    stage: str
    dtype: str
    shape: Shape
    scaling: str | None = None


def record_plan(selected: Sequence[str] | None = None, sweep: bool = True,
                capability: backend.Capability | None = None, device: backend.Capability | None = None,
                ) -> list[Planned]:
    """What a recording run measures: every GPU stage and dtype (an FP8 stage in each scaling it
    takes) at the square sizes, the size sweep for the fastest stage of each backend, and the model
    shape table for the final kernels (minus the shapes a stage refuses: :func:`refused_shapes`). With
    ``capability`` (and the GPU's real ``device`` capability, if it is treated as an older one), only
    what such a GPU can run: :func:`not_recordable` lists the rest."""
    plan = []
    cublas = get_stage("cublas")
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
            if sweep and st.name in FINAL_STAGES:
                shapes += [s for s in MODEL_TABLE if s not in shapes]
            for shape in shapes:  # where the stage and cuBLAS beside it both take the shape
                plan += [Planned(st.name, dtype, shape, scaling) for scaling in st.scalings or (None,)
                         if layout.fits(shape, st.shape_rule(dtype, scaling))
                         and layout.fits(shape, cublas.shape_rule(dtype, scaling))]
    return plan


def refused_shapes(selected: Sequence[str] | None = None) -> list[str]:
    """One line per sweep or table shape a sweep stage refuses in one of its dtypes (its shape rule)."""
    out = []
    for st in stages():
        if (st.sweep or st.name in FINAL_STAGES) and (not selected or st.name in selected):
            for shape in list(SWEEP_SHAPES if st.sweep else ()) + list(MODEL_TABLE if st.name in FINAL_STAGES else ()):
                for rule in dict.fromkeys(st.shape_rule(d, s) for d in st.dtypes for s in st.scalings or (None,)):
                    if not layout.fits(shape, rule):
                        out.append(f"{st.name} at {shape[0]}x{shape[1]}x{shape[2]}: {layout.rule_text(rule)}")
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
    backend.require_gpu("record", "times kernels")
    b = backend.get()
    prov = bench.provenance(command)
    prov["fp8_cublas"] = FP8_CUBLAS
    suffix = f"_as_{backend.arch_name(b.capability).replace('_', '')}" if b.assumed else ""
    out = out or RESULTS_DIR / f"{slug(prov['gpu'])}{suffix}.json"
    ceilings: dict[str, Any] = {"copy_bandwidth_gbs": bench.copy_bandwidth_gbs()}
    records: list[dict[str, Any]] = []
    # cuBLAS against itself at every size of the plan: the reference rows of every chart.
    plan = record_plan(selected, sweep, b.capability, b.device_capability)
    cublas = get_stage("cublas")
    squares = {Planned("cublas", d, (n, n, n), s) for d in cublas.dtypes for n in SQUARE_SIZES
               if cublas.missing_feature(d, b.capability, b.device_capability) is None
               for s in (cublas.scalings if dtypes.get(d).operands == "fp8" else (None,))}
    # cuBLAS against itself at the square sizes and wherever a stage is measured (FP8: in the
    # scalings the stages are measured in, or in all of them at the square sizes).
    cublas_rows = squares | {Planned("cublas", p.dtype, p.shape, p.scaling) for p in plan}
    prov["not_recorded"] = not_recordable(b.capability, b.device_capability, selected) + refused_shapes(selected)
    full = sorted(cublas_rows, key=lambda p: (p.dtype, p.shape, p.scaling or "")) + plan
    bar = bench.Progress(len(full), "record")
    failures = []
    for name, dtype, shape, scaling in full:
        what = f"{name} {dtype}{f' per {scaling}' if scaling else ''} {shape}"
        try:
            records.append(bench.measure(name, dtype, shape, scaling=scaling, as_called=name in FINAL_STAGES))
            r = records[-1]
            bar.step(f"{what}: {r['tflops']:.1f} TF")
            # Written after every measurement, so a run cut short keeps what it measured.
            partial = dict(prov, partial=True)
            save(Results(out, partial, ceilings, tuple(records)), out.with_suffix(".partial.json"))
        except Exception as e:  # noqa: BLE001 - one failing stage must not lose the others; listed below
            failures.append(f"{what}: {type(e).__name__}: {e}")
            bar.step(f"{what}: FAILED")
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
    path = save(Results(out, prov, ceilings, pool_cublas_as_called(stamp_calls(records, prov))), out)
    out.with_suffix(".partial.json").unlink(missing_ok=True)
    for f in failures:
        print("FAILED:", f, file=sys.stderr)
    return path


# What the FP8 rows' cuBLAS is, in the provenance of a recording that times FP8 (``bench.measure``):
# recordings before it timed ``fp8.cublas_fp8``, which lays out the scales again in every call.
FP8_CUBLAS = "torch._scaled_mm with the scales laid out once (fp8.cublas_fp8_for)"


def replace_stages(recording: Path, update: Path, command: str = "", keep_cublas: bool = False) -> Path:
    """Put the records of ``update`` (a recording of some stages, ``--stages``) into ``recording`` in
    place of that recording's rows of the same stages, and of cuBLAS at the same (dtype, shape) in
    the dtypes those stages compute, unless ``keep_cublas`` (a stage added to a recording whose cuBLAS
    rows the notebooks quote: each new row still holds the cuBLAS time measured beside it). The
    update's cuBLAS rows of other dtypes (a recording always times cuBLAS at the square sizes of
    every dtype) are left out: re-recording the FP8 stages does not change what bf16's rows were
    measured beside. The provenance keeps every other row's origin and lists the re-recording
    (``rerecorded``)."""
    old, new = load(recording), load(update)
    stage_dtypes = {r["dtype"] for r in new.records if r["stage"] != "cublas"}
    fp8 = {d for d in stage_dtypes if dtypes.get(d).operands == "fp8"}
    if fp8 and keep_cublas and old.provenance.get("fp8_cublas") != new.provenance.get("fp8_cublas"):
        raise ValueError(f"{recording.name}'s {', '.join(sorted(fp8))} cuBLAS rows were timed as "
                         f"{old.provenance.get('fp8_cublas') or 'fp8.cublas_fp8, scales laid out in every call'}, "
                         f"{update.name}'s stages against {new.provenance.get('fp8_cublas')}: merge without "
                         "keep_cublas (--keep-cublas), so that the update's cuBLAS rows replace them")
    new = Results(new.path, new.provenance, new.ceilings, tuple(
        r for r in new.records if r["stage"] != "cublas" or (r["dtype"] in stage_dtypes and not keep_cublas)))
    if old.provenance["gpu"] != new.provenance["gpu"]:
        raise ValueError(f"{update.name} was recorded on {new.provenance['gpu']}, {recording.name} on "
                         f"{old.provenance['gpu']}: only recordings of the same GPU are merged")
    stages_new = sorted({r["stage"] for r in new.records} - {"cublas"})
    def key(r: dict) -> tuple:
        return r["dtype"], r.get("scaling"), r["M"], r["N"], r["K"]

    replaced = {key(r) for r in new.records if r["stage"] == "cublas"}
    keep = [r for r in old.records if r["stage"] not in stages_new
            and not (r["stage"] == "cublas" and key(r) in replaced)]
    prov = dict(old.provenance)
    if fp8 and not keep_cublas:
        prov["fp8_cublas"] = new.provenance.get("fp8_cublas")
    tuning = {f"{st}_tuning" for st in stages_new}
    for key in tuning:
        prov.pop(key, None)  # the re-recording's tuning replaces it (below)
    # Earlier re-recordings' tuning of these stages no longer describes any row (their raw logs keep it).
    earlier = [{k: v for k, v in e.items() if k not in tuning} for e in prov.get("rerecorded", [])]
    prov["rerecorded"] = earlier + [{
        "stages": stages_new, "date": new.provenance["date"], "command": command or new.provenance.get("command", ""),
        **({"cublas_rows": "kept from the recording"} if keep_cublas else {}),
        "failures": new.provenance.get("failures", []),
        **{key: new.provenance[key] for key in sorted(tuning) if key in new.provenance},
    }]
    merged = stamp_calls(keep, old.provenance) + stamp_calls(new.records, new.provenance)
    ceilings = dict(old.ceilings)
    ceilings["cublas_peak_tflops"] = {d: max(r["tflops"] for r in merged if r["stage"] == "cublas" and r["dtype"] == d)
                                      for d in sorted({r["dtype"] for r in merged if r["stage"] == "cublas"})}
    return save(Results(recording, prov, ceilings, pool_cublas_as_called(merged)), recording)


def stamp_calls(records: Sequence[dict[str, Any]], provenance: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Each row timed as called gets ``call``: the date of the ``bench`` call that measured it (the
    recording's, or that of the last re-recording of its stage listed in ``provenance``); a row
    that has one keeps it."""
    last = {st: e["date"] for e in provenance.get("rerecorded", []) for st in e["stages"]}
    return tuple(dict(r, call=last.get(r["stage"], provenance["date"])) if "ms_as_called" in r and "call" not in r
                 else r for r in records)


def pool_cublas_as_called(records: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """cuBLAS timed as called one way for every kernel of one call: at each (dtype, scaling, shape),
    the median of all of cuBLAS's as-called rounds there in that ``bench`` call (``call``, see
    :func:`stamp_calls`), beside whichever kernel each round alternated with.

    Each final stage's row times cuBLAS as called in its own alternating rounds, and those move with
    the partner (on the H200 beside tc_6 up to 7 us more at a decode row than beside triton_fast, and
    60 us more at 6144^3: experiments/gpu_as_called.py), so two kernels' as-called ratios were measured
    against two different cuBLAS times. They move with the call (the machine, the day) even more: at
    llama3 qkv M=1 cuBLAS took 63 us as called in one call beside stage 6 and 35 us in the next,
    beside triton_fast, so the median of the four rounds (49 us) read triton_fast's 61 us as 81 % of
    cuBLAS where its own call gives 57 %. So rounds are pooled only within one call. A row keeps
    its own rounds (``cublas_ms_as_called_rounds``) and their median (``cublas_ms_as_called_beside``);
    ``cublas_ms_as_called`` becomes the pooled median, ``cublas_ms_as_called_spread`` the lowest and
    highest round, and ``ratio_to_cublas_as_called`` is taken against the pooled time. Pooling again
    gives the same."""
    def key(r: dict) -> tuple:
        return r.get("call"), r["dtype"], r.get("scaling"), r["M"], r["N"], r["K"]

    def own_rounds(r: dict) -> list[float]:
        return list(r.get("cublas_ms_as_called_rounds") or [r.get("cublas_ms_as_called_beside", r["cublas_ms_as_called"])])

    pooled: dict[tuple, list[float]] = {}
    for r in records:
        if "ms_as_called" in r:
            pooled.setdefault(key(r), []).extend(own_rounds(r))
    out = []
    for r in records:
        if "ms_as_called" in r:
            mine, every = own_rounds(r), pooled[key(r)]
            cms = statistics.median(every)
            r = dict(r, cublas_ms_as_called_rounds=mine, cublas_ms_as_called_beside=statistics.median(mine),
                     cublas_ms_as_called=cms, cublas_ms_as_called_spread=[min(every), max(every)],
                     ratio_to_cublas_as_called=cms / r["ms_as_called"])
        out.append(r)
    return tuple(out)
