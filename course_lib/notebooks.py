"""Execute the course's notebooks top to bottom (the outputs CI compares come from here).

    python -m course_lib.notebooks                       # CPU backend, outputs stored in place
    python -m course_lib.notebooks 04 deep_dives/triton   # only these (name prefixes)
    python -m course_lib.notebooks --backend gpu --out DIR   # live on a GPU, executed copies to DIR

On the CPU backend the notebooks are executed in place, so their stored outputs are exactly what
a CPU run prints; nbval then re-runs them in CI and compares. On a GPU the committed notebooks are
left alone and the executed copies go to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
DEEP_DIVE_DIR = NOTEBOOK_DIR / "deep_dives"
# What every notebook says it runs on: the kernel JupyterLab starts for it. A notebook whose
# kernelspec or language_info differs from what the installed kernel reports is marked as modified
# the moment it opens (and asks to be saved when closed untouched), so both are written as the
# installed ipykernel reports them, without the Python version (learners run 3.11 to 3.13).
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def relative(path: Path) -> Path:
    """Where a notebook lies under ``notebooks/`` ("deep_dives/triton_lab.ipynb"), or its name."""
    return path.relative_to(NOTEBOOK_DIR) if path.is_relative_to(NOTEBOOK_DIR) else Path(path.name)


def path_notebooks() -> list[Path]:
    """The learner's path, in course order: ``notebooks/NN_name.ipynb``."""
    return sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


def deep_dives() -> list[Path]:
    """The deep dives beside the path: ``notebooks/deep_dives/*.ipynb``."""
    return sorted(DEEP_DIVE_DIR.glob("*.ipynb"))


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """Every notebook (the path, then the deep dives), or those whose path relative to
    ``notebooks/`` starts with one of ``names`` ("04", "deep_dives/triton")."""
    paths = path_notebooks() + deep_dives()
    if names:
        paths = [p for p in paths if any(relative(p).as_posix().startswith(n) or p.name == n for n in names)]
        if not paths:
            raise SystemExit(f"no notebook matches {names} in {NOTEBOOK_DIR}")
    return paths


def _tidy(nb) -> None:
    """Drop metadata that changes on every run (timings) or differs between machines, so re-running
    gives a small diff and opening a notebook does not mark it modified.

    No widget state is kept: it would hold every widget model and every picture a second time,
    and JupyterLab does not use it for a notebook it does not trust (a notebook someone else ran,
    like these). What a reader sees before running a cell is the widget's picture, stored in the
    cell's output next to the widget (``course_lib.viz._figure.figure_box``)."""
    nb.metadata.pop("widgets", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata.pop("language_info", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def execute(path: Path, backend: str, out: Path | None, timeout: int) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    os.environ["COURSE_BACKEND"] = backend
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=False,  # see _tidy
    )
    t0 = time.time()
    client.execute()
    _tidy(nb)
    target = (out / relative(path)) if out else path
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return time.time() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_lib.notebooks", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="notebook name prefixes (default: all)")
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--out", type=Path, help="write executed copies here instead of in place")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = p.parse_args(argv)
    if args.backend == "gpu" and args.out is None:
        p.error("--backend gpu needs --out: the committed notebooks keep their CPU outputs")
    failed = []
    for path in notebook_paths(args.names):
        try:
            seconds = execute(path, args.backend, args.out, args.timeout)
            print(f"{relative(path)}: executed on the {args.backend} backend in {seconds:.0f} s", flush=True)
        except Exception as e:  # noqa: BLE001 - report every notebook, then fail
            failed.append(path.name)
            print(f"{path.name}: FAILED: {type(e).__name__}: {str(e)[-2000:]}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
