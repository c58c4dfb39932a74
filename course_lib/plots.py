"""Charts of results: stages against cuBLAS, size sweeps, the roofline.

Every chart takes a :class:`~course_lib.results.Results` (recorded or measured live) and puts its
label ("recorded on NVIDIA H200 on <date>" or "measured live on ...") in the title, so a number
is never shown without where it came from. Ceilings come from the results file (measured on the GPU),
not from a datasheet.
"""

from __future__ import annotations

from typing import Any, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from course_lib.model.layout import Shape
from course_lib.registry import get_stage
from course_lib.results import Results


def _title(stage_name: str) -> str:
    try:
        return get_stage(stage_name).title
    except KeyError:
        return stage_name


def _by_stage(records: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["stage"], []).append(r)
    return out


def plot_stages(results: Results, dtype: str, shape: Shape, stages: Sequence[str] | None = None) -> Figure:
    """Bars of TFLOP/s and of % of cuBLAS (measured in the same call) for each stage at one shape."""
    rows = [r for r in results.select(dtype=dtype, shapes=[shape]) if r["stage"] != "cublas"]
    if stages is not None:
        rows = [r for r in rows if r["stage"] in stages]
        rows.sort(key=lambda r: list(stages).index(r["stage"]))
    if not rows:
        raise LookupError(f"no {dtype} results at {shape} for {stages or 'any stage'} ({results.label})")
    # A row recorded on another GPU than the rest (a stage this GPU cannot run) is hatched and starred;
    # the title's label says where it comes from. Rows are named as the prose names them (tc_6_tma_store).
    names = [r["stage"] + (" *" if r.get("recorded_on") else "") for r in rows]
    hatch = ["//" if r.get("recorded_on") else "" for r in rows]
    own = [r for r in rows if not r.get("recorded_on")] or rows  # the cuBLAS line is this GPU's
    cublas = sorted(r["cublas_tflops"] for r in own)[len(own) // 2]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.5, 0.55 * len(rows) + 2.1), sharey=True)
    y = range(len(rows))
    tflops = [r["tflops"] for r in rows]
    percent = [100 * r["ratio_to_cublas"] for r in rows]
    ax1.barh(y, tflops, color="tab:blue", hatch=hatch, edgecolor="white")
    ax1.axvline(cublas, color="black", ls="--", lw=1, label=f"cuBLAS ≈ {cublas:.0f} TFLOP/s (left), 100 % (right)")
    ax1.set_xlabel("TFLOP/s")
    ax2.barh(y, percent, color="tab:orange", hatch=hatch, edgecolor="white")
    ax2.axvline(100, color="black", ls="--", lw=1)
    ax2.set_xlabel("% of cuBLAS (measured in the same call)")
    # Each value at the start of its bar where the bar is long (clear of the cuBLAS line near its end),
    # after it where the bar is short (far from the line).
    for ax, values, fmt in ((ax1, tflops, "{:.1f}"), (ax2, percent, "{:.0f}%")):
        right = max(max(values), cublas if ax is ax1 else 100) * 1.08
        ax.set_xlim(0, right)
        for i, v in enumerate(values):
            inside = v > 0.3 * right
            ax.text(0 if inside else v, i, f" {fmt.format(v)}", va="center", ha="left", fontsize=8,
                    color="white" if inside else "black")
    # The legend below the charts, where no bar lies.
    fig.legend(*ax1.get_legend_handles_labels(), loc="lower center", fontsize=8, frameon=False)
    ax1.set_yticks(list(y), names)
    ax1.invert_yaxis()
    M, N, K = shape
    fig.suptitle(f"{dtype}, M={M}, N={N}, K={K} — {results.label}", fontsize=10)
    fig.tight_layout(rect=(0, 0.3 / fig.get_figheight(), 1, 1))  # room for the legend below
    return fig


def plot_sweep(results: Results, dtype: str, stages: Sequence[str] | None = None, *, ratio: bool = False,
               shapes: Sequence[Shape] | None = None) -> Figure:
    """TFLOP/s (or % of cuBLAS) of each stage over every recorded shape (or over ``shapes``), smallest
    work first."""
    rows = results.select(dtype=dtype, shapes=shapes)
    groups = _by_stage([r for r in rows if stages is None or r["stage"] in stages or r["stage"] == "cublas"])
    if not groups:
        raise LookupError(f"no {dtype} results for {stages or 'any stage'} ({results.label})")
    shapes = sorted({(r["M"], r["N"], r["K"]) for g in groups.values() for r in g}, key=lambda s: (s[0] * s[1] * s[2], s))
    x = {s: i for i, s in enumerate(shapes)}
    fig, ax = plt.subplots(figsize=(9.5, 4))
    for name, g in groups.items():
        if ratio and name == "cublas":
            continue
        g = sorted(g, key=lambda r: x[(r["M"], r["N"], r["K"])])
        ys = [100 * r["ratio_to_cublas"] if ratio else r["tflops"] for r in g]
        style = dict(color="black", ls="--") if name == "cublas" else {}
        starred = " *" if any(r.get("recorded_on") for r in g) else ""  # recorded on another GPU: see the title
        # Named as the prose names it (tc_6_tma_store), not by its title: the legend and the text agree.
        ax.plot([x[(r["M"], r["N"], r["K"])] for r in g], ys, marker="o", label=name + starred, **style)
    ax.set_xticks(range(len(shapes)), [f"{m}×{n}×{k}" for m, n, k in shapes], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("M×N×K")
    ax.set_ylabel("% of cuBLAS" if ratio else "TFLOP/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{dtype} size sweep — {results.label}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_shape_table(results: Results, kernels: Sequence[tuple[str, str]], shapes: Sequence[tuple[str, Shape]]) -> Figure:
    """% of cuBLAS (measured in the same call) of each (stage, dtype) in ``kernels`` at each labelled
    shape of ``shapes``: one row per shape, one marker per kernel, a line at cuBLAS. A kernel with no
    row at a shape (a shape it refuses) has no marker there."""
    fig, ax = plt.subplots(figsize=(9.5, 0.32 * len(shapes) + 1.6))
    markers = "osD^vP*X"
    found = 0
    for i, (stage, dtype) in enumerate(kernels):
        xs, ys = [], []
        for row, (_, shape) in enumerate(shapes):
            hit = results.select(stage, dtype, [shape])
            if hit:
                xs.append(100 * hit[0]["ratio_to_cublas"])
                ys.append(row)
        found += len(xs)
        ax.plot(xs, ys, markers[i % len(markers)], label=f"{stage}, {dtype}", alpha=0.85, ls="none")
    if not found:
        raise LookupError(f"nothing recorded for {list(kernels)} at these shapes ({results.label})")
    ax.axvline(100, color="black", ls="--", lw=1)
    ax.set_yticks(range(len(shapes)), [f"{label}  ({m}×{n}×{k})" for label, (m, n, k) in shapes], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("% of cuBLAS (measured in the same call)")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(f"Model shapes — {results.label}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_roofline(results: Results, dtype: str, points: Sequence[tuple], *,
                  intensity_of: str = "FLOP per byte moved from memory") -> Figure:
    """The roofline of the recording GPU for ``dtype`` with ``points`` (label, FLOP/byte, TFLOP/s), or
    (label, FLOP/byte, TFLOP/s, kernel): points of one kernel share a colour, a marker and one legend
    entry, and each shape's label is written once, beside the first kernel's point there.

    The slanted roof is the measured copy bandwidth; the flat roof the best cuBLAS rate measured for
    ``dtype`` in the same recording (a measured ceiling, lower than the datasheet's peak).
    ``intensity_of`` says what the x axis counts (e.g. what a tile reads, from L2 or DRAM).
    """
    for p in points:
        if len(p) not in (3, 4):
            raise ValueError(f"a roofline point is (label, FLOP/byte, TFLOP/s) or (label, FLOP/byte, TFLOP/s, "
                             f"kernel), got {p!r}")
    bw = float(results.ceilings["copy_bandwidth_gbs"]) * 1e9  # bytes/s
    peaks = results.ceilings.get("cublas_peak_tflops", {})
    if dtype not in peaks:
        raise LookupError(f"the results file has no cuBLAS peak for {dtype}")
    peak = float(peaks[dtype]) * 1e12
    ridge = peak / bw
    lo = min([ridge / 64] + [p[1] / 2 for p in points])
    xs = [lo, ridge, ridge * 64]
    fig, ax = plt.subplots(figsize=(9.5, 4.5))
    ax.plot(xs, [min(peak, x * bw) / 1e12 for x in xs], color="black")
    ax.annotate(f"memory: {bw / 1e12:.2f} TB/s (measured copy)", (xs[0], xs[0] * bw / 1e12), fontsize=8, rotation=20, va="bottom")
    ax.annotate(f"{dtype} peak: {peak / 1e12:.0f} TFLOP/s (best cuBLAS)", (ridge, peak / 1e12), fontsize=8, va="bottom")
    markers = "osD^vP*Xh<>p"
    if points and all(len(p) == 4 for p in points):
        # Grouped: one colour, marker and legend entry per kernel; a shape is labelled once.
        kernels = list(dict.fromkeys(p[3] for p in points))
        labelled: set[str] = set()
        for i, kernel in enumerate(kernels):
            mine = [p for p in points if p[3] == kernel]
            ax.plot([p[1] for p in mine], [p[2] for p in mine], markers[i % len(markers)], color=f"C{i}",
                    label=kernel, alpha=0.85, ls="none")
            for label, intensity, tflops, _ in mine:
                if label not in labelled:  # by the shape's label: two shapes may share an intensity
                    labelled.add(label)
                    ax.annotate(label, (intensity, tflops), xytext=(4, -10), textcoords="offset points", fontsize=7)
    else:
        # Points are named in a legend, not next to the dot: stages with the same tile share an x.
        for i, (label, intensity, tflops, *_) in enumerate(points):
            ax.plot([intensity], [tflops], markers[i % len(markers)], label=f"{label} ({intensity:.3g} FLOP/B, {tflops:.3g} TF)",
                    alpha=0.85)
    if points:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"arithmetic intensity ({intensity_of})")
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"Roofline, {dtype} — {results.label}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_timeline(consumers: Sequence[dict[str, Any]], label: str, rows: int = 8) -> Figure:
    """Stage 6's per-tile timeline, recorded from inside the kernel: one row per consumer warpgroup,
    its cycles from its own start: waiting for data, mainloop (tensor cores busy; it also carries
    the previous tile's stores), staging the result.

    ``consumers`` are clock64 stamps of one SM each (so every row has its own zero), as in the
    ``timeline`` of ``nvidia_h200_tensor_core_summary.json``; ``label`` says where they were recorded."""
    if not consumers:
        raise ValueError("no consumers to draw: pass the 'raw' list of a timeline recording")
    shown = list(consumers)[:rows]
    fig, ax = plt.subplots(figsize=(9.5, 0.35 * len(shown) + 1.6))
    colours = {"waiting for the first slice / next tile": "0.8", "mainloop (wgmma)": "tab:blue",
               "epilogue (convert to bf16, stage)": "tab:orange"}
    for y, c in enumerate(shown):
        start, previous = c["start"], c["start"]
        for t0, t1, t2 in c["tiles"]:
            for (a, b), colour in zip(((previous, t0), (t0, t1), (t1, t2)), colours.values()):
                ax.barh(y, (b - a) / 1e3, left=(a - start) / 1e3, color=colour, height=0.7)
            previous = t2
    ax.set_yticks(range(len(shown)), [f"CTA {c['cta']} consumer {c['consumer']}" for c in shown])
    ax.invert_yaxis()
    ax.set_xlabel("thousands of SM cycles since the consumer started")
    ax.legend([plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()], list(colours), loc="upper center",
              bbox_to_anchor=(0.5, -0.22 if len(shown) > 4 else -0.4), ncol=3, frameon=False)
    ax.set_title(f"tc_6_tma_store, per tile ({label})")
    fig.tight_layout()
    return fig
