"""GPU results recorded with their provenance, stored as JSON in ``course_lib/results/``.

A results file holds what one recording run measured on one GPU:

* ``provenance``: the GPU, its SM count, driver, CUDA, library versions, date and the command;
* ``ceilings``: what the same run measured as the machine's limits (copy bandwidth, and the best
  cuBLAS rate per dtype) — the roofline is drawn from these, never from a datasheet;
* ``records``: one entry per (stage, dtype, M, N, K) with the stage's time and TFLOP/s and cuBLAS's,
  measured in the same call, and their ratio.

Files are validated when loaded, so a corrupt or hand-edited file fails here with a clear message
instead of deep inside a plot.

What the notebooks show is :func:`course_recording`: the recording made on this GPU, if the learner
made one (``python -m course_lib.bench --record`` writes ``results/<gpu>.json``), with the reference
H200 recording filling in the stages this GPU cannot run; the H200 recording otherwise. Every record
that comes from another GPU than the rest carries ``recorded_on``, and every label says where the
numbers come from.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from course_lib import dtypes
from course_lib.dtypes import NAMES as DTYPES

RESULTS_DIR = Path(__file__).parent / "results"
DEFAULT_GPU_FILE = RESULTS_DIR / "nvidia_h200.json"

PROVENANCE_KEYS = ("gpu", "sm_count", "driver", "cuda", "torch", "triton", "numba", "date")
RECORD_KEYS = {
    "stage": str,
    "dtype": str,
    "M": int,
    "N": int,
    "K": int,
    "ms": float,
    "tflops": float,
    "cublas_ms": float,
    "cublas_tflops": float,
    "ratio_to_cublas": float,
}
# The final stages' records also hold their time as called (host included: course_lib.timing's
# time_fn(host=True)) beside cuBLAS's, timed the same way in the same call.
AS_CALLED_KEYS = ("ms_as_called", "cublas_ms_as_called", "ratio_to_cublas_as_called")


# What a recorded (or live) "ms" is, said under every table of records: the timer (course_lib.timing)
# queues enough GPU work ahead of the timed runs that the host's time to call is kept out.
TIMED = "ms: GPU time per call (L2 flushed, the CPU's time to call left out); ratio: cuBLAS ms / stage ms"


class ResultsFileError(ValueError):
    """A results file is missing, unreadable or not in the expected form."""


@dataclass(frozen=True)
class Results:
    """A validated results file."""

    path: Path | None
    provenance: dict[str, Any]
    ceilings: dict[str, Any]
    records: tuple[dict[str, Any], ...]

    @property
    def label(self) -> str:
        p = self.provenance
        gpu = p["gpu"] + (f" treated as sm_{p['treated_as'].replace('.', '')}" if p.get("treated_as") else "")
        own = f"measured live on {gpu} in this run" if p.get("live") else f"recorded on {gpu} on {str(p['date'])[:10]}"
        others = sorted({r["recorded_on"] for r in self.records if r.get("recorded_on")})
        if others:
            own += "; rows marked * recorded on " + " and ".join(others)
        return own

    @property
    def source(self) -> str:
        """Where and when these results were recorded, e.g. "NVIDIA H200 on <date>"."""
        return f"{self.provenance['gpu']} on {str(self.provenance['date'])[:10]}"

    def filled_from(self, other: "Results") -> "Results":
        """These results plus, for every (stage, dtype) they lack, the records of ``other``, each
        marked with ``recorded_on`` (which GPU, which day)."""
        have = {(r["stage"], r["dtype"]) for r in self.records}
        extra = tuple(dict(r, recorded_on=other.source) for r in other.records if (r["stage"], r["dtype"]) not in have)
        return Results(self.path, self.provenance, self.ceilings, self.records + extra)

    def select(
        self,
        stage: str | None = None,
        dtype: str | None = None,
        shapes: Iterable[tuple[int, int, int]] | None = None,
        scaling: str | None = None,
    ) -> list[dict[str, Any]]:
        """The records of ``stage``, ``dtype``, ``shapes`` and (FP8 records) ``scaling``; None: any."""
        wanted = None if shapes is None else {tuple(s) for s in shapes}
        out = []
        for r in self.records:
            if stage is not None and r["stage"] != stage:
                continue
            if dtype is not None and r["dtype"] != dtype:
                continue
            if scaling is not None and r.get("scaling") != scaling:
                continue
            if wanted is not None and (r["M"], r["N"], r["K"]) not in wanted:
                continue
            out.append(r)
        return out

    def table(self, stage: str | None = None, dtype: str | None = None) -> str:
        """The selected records as a text table, with where they come from and what was timed."""
        return self.label + "\n" + TIMED + "\n" + format_table(self.select(stage, dtype))

    def to_json(self) -> dict[str, Any]:
        return {
            "provenance": self.provenance,
            "ceilings": self.ceilings,
            "records": list(self.records),
        }


def format_table(rows: Iterable[dict[str, Any]]) -> str:
    """Records as a fixed-width text table (time, TFLOP/s, cuBLAS in the same call, ratio); a row
    recorded on another GPU than the rest is marked * and says where; an FP8 row names its scaling."""
    lines = [f"{'stage':<30}{'dtype':<6}{'M':>6}{'N':>6}{'K':>6}{'ms':>10}{'TFLOP/s':>9}{'cuBLAS':>9}{'ratio':>8}"]
    for r in rows:
        stage = f"{r['stage']} (per {r['scaling']})" if "scaling" in r else r["stage"]
        lines.append(
            f"{stage:<30}{r['dtype']:<6}{r['M']:>6}{r['N']:>6}{r['K']:>6}{r['ms']:>10.3f}"
            f"{r['tflops']:>9.1f}{r['cublas_tflops']:>9.1f}{100 * r['ratio_to_cublas']:>7.1f}%"
            + (f" *  recorded on {r['recorded_on']}" if r.get("recorded_on") else "")
        )
    return "\n".join(lines)


def ratio_table(runs: Sequence["Results"], stages: Sequence[str], size: int = 4096,
                dtypes: Sequence[str] | None = None) -> str:
    """Each stage as % of cuBLAS (and TFLOP/s) at ``size``³, one column per dtype (default: each
    dtype the runs hold for these stages, in the course's order), as text.

    ``runs``: results objects (``.select(stage, dtype, shapes)`` and ``.provenance``), e.g. one
    ``bench.compare`` per dtype, or the recording; the first says where the numbers come from."""
    shape = (size, size, size)
    if dtypes is None:
        held = {r["dtype"] for run in runs for stage in stages for r in run.select(stage, shapes=[shape])}
        dtypes = [d for d in DTYPES if d in held]
    rows: dict[tuple[str, str], dict] = {}
    for run in runs:
        for stage in stages:
            for dtype in dtypes:
                for r in run.select(stage, dtype, [shape]):
                    rows[(stage, dtype)] = r
    source = runs[0].provenance
    where = f"measured here on {source['gpu']}" if source.get("live") else f"recorded on {source['gpu']}"
    lines = [f"{where}, {size}³: % of cuBLAS (TFLOP/s); GPU time per call, L2 flushed,",
             "each stage timed in alternating rounds with cuBLAS",
             f"{'stage':<27}" + "".join(f"{d:>17}" for d in dtypes)]
    for stage in stages:
        cells = []
        for dtype in dtypes:
            r = rows.get((stage, dtype))
            cells.append(f"{100 * r['ratio_to_cublas']:7.1f} % ({r['tflops']:5.1f})" if r else f"{'-':>17}")
        lines.append(f"{stage:<27}" + "".join(f"{c:>17}" for c in cells))
    return "\n".join(lines)


def slug(gpu_name: str) -> str:
    """File stem for a GPU name: 'NVIDIA H200' -> 'nvidia_h200'."""
    return re.sub(r"[^a-z0-9]+", "_", gpu_name.lower()).strip("_") or "gpu"


def _bad(path: Path | None, what: str) -> ResultsFileError:
    where = str(path) if path else "results"
    return ResultsFileError(
        f"{where}: {what}. Restore the file from git (git checkout -- course_lib/results) or record "
        "it again on a GPU with `python -m course_lib.bench --record`."
    )


def validate(data: Any, path: Path | None = None) -> Results:
    """Check the structure and values of parsed results and return them as :class:`Results`."""
    if not isinstance(data, dict):
        raise _bad(path, "the top level is not a JSON object")
    for key in ("provenance", "ceilings", "records"):
        if key not in data:
            raise _bad(path, f"the key {key!r} is missing")
    prov = data["provenance"]
    if not isinstance(prov, dict):
        raise _bad(path, "'provenance' is not an object")
    missing = [k for k in PROVENANCE_KEYS if k not in prov]
    if missing:
        raise _bad(path, f"provenance lacks {', '.join(missing)}")
    ceilings = data["ceilings"]
    if not isinstance(ceilings, dict):
        raise _bad(path, "'ceilings' is not an object")
    bw = ceilings.get("copy_bandwidth_gbs")
    if not isinstance(bw, (int, float)) or not bw > 0:
        raise _bad(path, "ceilings.copy_bandwidth_gbs must be a positive number")
    records = data["records"]
    if not isinstance(records, list) or not records:
        raise _bad(path, "'records' must be a non-empty list")
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise _bad(path, f"record {i} is not an object")
        for key, typ in RECORD_KEYS.items():
            if key not in r:
                raise _bad(path, f"record {i} lacks {key!r}")
            value = r[key]
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) if typ is float else isinstance(value, typ) and not isinstance(value, bool)
            if not ok:
                raise _bad(path, f"record {i}: {key} = {value!r} is not a {typ.__name__}")
            if typ in (int, float) and not (value > 0 and math.isfinite(value)):
                raise _bad(path, f"record {i}: {key} = {value!r} must be positive and finite")
        if r["dtype"] not in DTYPES:
            raise _bad(path, f"record {i}: dtype {r['dtype']!r} is not one of {DTYPES}")
        if (dtypes.get(r["dtype"]).operands == "fp8") != ("scaling" in r):
            raise _bad(path, f"record {i}: an FP8 record (dtype e4m3), and only one, says how its operands "
                             f"were scaled ('scaling')")
        expect = r["tflops"] / r["cublas_tflops"]
        if abs(r["ratio_to_cublas"] - expect) > 1e-3 * max(1.0, expect):
            raise _bad(path, f"record {i}: ratio_to_cublas {r['ratio_to_cublas']} != tflops / cublas_tflops")
        if "plan" in r and not (isinstance(r["plan"], str) and r["plan"]):
            raise _bad(path, f"record {i}: plan = {r['plan']!r} must say in words what the stage ran")
        if "ratio_to_cublas_as_called" in r:  # the final stages' second timing (bench.measure, as_called=True)
            for key in AS_CALLED_KEYS:
                if not isinstance(r.get(key), (int, float)) or not (r[key] > 0 and math.isfinite(r[key])):
                    raise _bad(path, f"record {i}: {key} = {r.get(key)!r} must be a positive number")
            expect = r["cublas_ms_as_called"] / r["ms_as_called"]
            if abs(r["ratio_to_cublas_as_called"] - expect) > 1e-3 * max(1.0, expect):
                raise _bad(path, f"record {i}: ratio_to_cublas_as_called != cublas_ms_as_called / ms_as_called")
    return Results(path, prov, ceilings, tuple(records))


def summary(topic: str) -> dict[str, Any]:
    """What the notebooks show of the experiments about ``topic`` ("triton", "tensor_core"): a small
    summary of the raw logs, made by experiments/summarize.py, with the runs it comes from."""
    p = RESULTS_DIR / f"nvidia_h200_{topic}_summary.json"
    if not p.is_file():
        raise _bad(p, f"no summary of the {topic!r} experiments")
    data = json.loads(p.read_text())
    if "provenance" not in data:
        raise _bad(p, "the summary has no provenance")
    return data


def own_recording_path() -> Path | None:
    """The recording a learner made on this GPU (``results/<gpu>.json``), if there is one."""
    from course_lib import backend  # noqa: PLC0415 - results files are read without a backend too

    b = backend.get()
    if not b.is_gpu:
        return None
    p = RESULTS_DIR / f"{slug(b.device_name)}.json"
    return p if p.is_file() else None


def course_recording() -> Results:
    """What the notebooks show: this GPU's own recording, if one was made here, filled in from the
    reference H200 recording for every stage and dtype it lacks; the H200 recording otherwise."""
    reference = load(DEFAULT_GPU_FILE)
    own = own_recording_path()
    if own is None or own.resolve() == DEFAULT_GPU_FILE.resolve():
        return load(own) if own else reference
    return load(own).filled_from(reference)


def load(path: str | Path | None = None) -> Results:
    """Load and validate a results file (default: :func:`course_recording`)."""
    if path is None:
        return course_recording()
    p = Path(path)
    if not p.is_file():
        raise _bad(p, "no such file")
    try:
        data = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(p, f"cannot be read as JSON ({e})") from None
    return validate(data, p)


def save(results: Results, path: str | Path) -> Path:
    """Validate and write ``results`` as indented JSON (validation first: never write a bad file)."""
    validate(results.to_json(), Path(path))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(results.to_json(), indent=1) + "\n")
    return p
