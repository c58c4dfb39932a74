"""The raw log every GPU experiment of this folder writes: ``--out PATH``, where and with what it ran,
and the sections it fills, saved after each step so that a run cut short keeps what it measured.

    out, save = runlog.start(__doc__, part=2, speed=[], accumulation=[])
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import traceback
from pathlib import Path
from typing import Callable


def start(doc: str, part: int, flags: tuple[str, ...] = (), **sections) -> tuple[dict, Callable[[], None]]:
    """Parse ``--out`` (and the script's own on/off ``flags``, kept in the provenance as ``flags``);
    the log (provenance, then ``sections``) and the function that saves it.
    ``part``: which paragraph of the script's docstring says what it measures."""
    import torch
    import triton

    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    for flag in flags:
        p.add_argument(flag, action="store_true")
    args = p.parse_args()
    path = args.out
    out = {"provenance": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                          "cuda": torch.version.cuda, "python": platform.python_version(),
                          "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                          "command": f"python experiments/{Path(sys.argv[0]).name}", "what": doc.split("\n\n")[part],
                          "flags": [f for f in flags if getattr(args, f.lstrip("-").replace("-", "_"))]},
           **sections}

    def save() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1) + "\n")

    return out, save


def run(main: Callable[[], int]) -> None:
    """Exit with ``main()``'s status; a failure's traceback printed first (the log keeps what was saved)."""
    try:
        raise SystemExit(main())
    except Exception:
        traceback.print_exc()
        raise


def versus(fn: Callable[[], object], reference: Callable[[], object], rounds: int = 3) -> tuple[float, float]:
    """GPU time in microseconds of ``fn`` and of ``reference`` (e.g. cuBLAS on the same operands), each
    the median of ``rounds`` alternating rounds of ``course_lib.timing.time_fn`` (L2 flushed, host
    time kept out)."""
    import statistics

    from course_lib.timing import time_fn

    mine, theirs = [], []
    for _ in range(rounds):
        mine.append(time_fn(fn).median_ms)
        theirs.append(time_fn(reference).median_ms)
    return 1e3 * statistics.median(mine), 1e3 * statistics.median(theirs)
