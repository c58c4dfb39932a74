"""The command line of :mod:`course_lib.bench` (on a GPU)::

    python -m course_lib.bench --record            # every stage, every dtype, 1024..8192 + sweep + model shapes
    python -m course_lib.bench --record --stages triton_fast --replace-in course_lib/results/nvidia_h200.json
    python -m course_lib.bench naive --dtype fp32 --size 4096
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from course_lib.bench import SQUARE_SIZES, bench
from course_lib.bench.recording import record, replace_stages
from course_lib.results import format_table, load


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m course_lib.bench",
                                description="Time a stage against cuBLAS on this GPU, or record every stage.")
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
