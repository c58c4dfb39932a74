"""The notebooks' table of Triton stages against cuBLAS, formatted from results a notebook passes in
(``course_lib.bench.compare`` live on a GPU, ``course_lib.results.course_recording()`` without one).
"""

from __future__ import annotations

from typing import Any, Sequence

from course_lib.kernels.coalescing_and_triton.common import COURSE_DTYPES


def ratio_table(runs: Sequence[Any], stages: Sequence[str], size: int = 4096,
                dtypes: Sequence[str] = COURSE_DTYPES) -> str:
    """Each stage as % of cuBLAS (and TFLOP/s) at ``size``³, one column per dtype, as text.

    ``runs``: results objects (``.select(stage, dtype, shapes)`` and ``.provenance``), e.g. one
    ``bench.compare`` per dtype, or the recording; the first says where the numbers come from."""
    shape = (size, size, size)
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
