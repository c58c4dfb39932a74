"""The README's headline table, generated from the results file (never typed by hand).

    python -m course_lib.report            # rewrite the table between the markers in README.md
    python -m course_lib.report --check    # exit 1 if README.md's table is not what the file gives
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_lib import dtypes
from course_lib.registry import stages
from course_lib.results import DEFAULT_GPU_FILE, Results, load

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- results-table:start -->", "<!-- results-table:end -->"
SIZES = (4096, 8192)


def headline_table(res: Results) -> str:
    """Markdown: every main stage (variants left out) at 4096³ and 8192³, TFLOP/s and % of cuBLAS."""
    p = res.provenance
    lines = [
        f"Recorded on {p['gpu']} ({p['sm_count']} SMs), {str(p['date'])[:10]}, driver {p['driver']}, "
        f"CUDA {p['cuda']}, torch {p['torch']}, Triton {p['triton']}, numba {p['numba']}; "
        "% of cuBLAS measured in the same call.",
        "",
        "| stage | notebook | dtype | " + " | ".join(f"{n}³ TFLOP/s (% of cuBLAS)" for n in SIZES) + " |",
        "|---|---|---|" + "---|" * len(SIZES),
    ]
    for st in stages():
        if st.variant_of:
            continue
        pairs = [(d, s) for d in st.dtypes for s in (st.scalings if dtypes.get(d).operands == "fp8" else (None,))]
        for dtype, scaling in pairs:
            cells = []
            for n in SIZES:
                rows = res.select(st.name, dtype, [(n, n, n)], scaling=scaling)
                if not rows:
                    cells.append("—")
                elif st.name == "cublas":
                    cells.append(f"{rows[0]['tflops']:.1f}")
                else:
                    cells.append(f"{rows[0]['tflops']:.1f} ({100 * rows[0]['ratio_to_cublas']:.0f} %)")
            if all(c == "—" for c in cells):
                continue
            what = f"{dtype}, per {scaling}" if scaling else dtype
            lines.append(f"| {st.name} | {st.notebook or '—'} | {what} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(readme_text: str, table: str) -> str:
    if START not in readme_text or END not in readme_text:
        raise ValueError(f"README.md has no {START} ... {END} markers")
    head, rest = readme_text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_lib.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only check that README.md is up to date")
    args = p.parse_args(argv)
    text = README.read_text()
    new = render(text, headline_table(load(DEFAULT_GPU_FILE)))
    if args.check:
        if new != text:
            print("README.md's results table differs from the results file: run python -m course_lib.report")
            return 1
        return 0
    README.write_text(new)
    print(f"updated {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
