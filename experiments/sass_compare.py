"""Compare the SASS of two builds kernel by kernel: opcodes and operands, ignoring addresses,
encodings and symbol names (and, as a stricter second check, the 128-bit encodings themselves,
which include the scheduling control bits).

    python experiments/sass_compare.py BEFORE.sass AFTER.sass [--map OLD=NEW ...]

Each argument is a ``cuobjdump --dump-sass`` listing. A kernel is named by its demangled name
(``tc::stage5::kernel<2>``); ``--map`` pairs kernels whose name changed. Prints one line per kernel:
identical or not, the instruction count on each side, and the first differing instruction.
Written for (and used by experiments/sass_restructure_cuda_report.py in) the comparison in
experiments/runs/2026-12-01_sass_restructure_cuda/comparison.md.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from course_lib.compiler import demangle  # noqa: E402

FUNCTION = re.compile(r"^\s*Function : (\S+)")
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
ENCODING = re.compile(r"/\* (0x[0-9a-f]{16}) \*/")


def kernels(text: str, encodings: bool = False) -> dict[str, list[str]]:
    """Demangled kernel name -> its instructions, each as "OPCODE operands" with the address and
    encoding comments removed (branch targets are offsets inside the kernel and are kept); with
    ``encodings``, the 64-bit halves of the instruction words instead."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = demangle(m.group(1))
            out[current] = []
            continue
        if current is None:
            continue
        if encodings:
            out[current] += ENCODING.findall(line)
            continue
        m = INSTRUCTION.match(line)
        if m:
            out[current].append(re.sub(r"\s+", " ", m.group(2)))
    return out


def digest(instructions: list[str]) -> str:
    return hashlib.sha256("\n".join(instructions).encode()).hexdigest()[:16]


def compare(before: dict[str, list[str]], after: dict[str, list[str]], pairs: dict[str, str]) -> list[dict]:
    rows = []
    for old, code in before.items():
        new = pairs.get(old, old)
        row = {"before": old, "after": new, "n_before": len(code), "sha_before": digest(code)}
        if new not in after:
            row.update(result="absent after")
        else:
            other = after[new]
            row.update(n_after=len(other), sha_after=digest(other))
            if code == other:
                row.update(result="identical")
            else:
                first = next((i for i, (x, y) in enumerate(zip(code, other)) if x != y), min(len(code), len(other)))
                row.update(result="differs", first_difference=first,
                           was=code[first] if first < len(code) else "(end)",
                           now=other[first] if first < len(other) else "(end)")
        rows.append(row)
    for new in after:
        if new not in {pairs.get(o, o) for o in before}:
            rows.append({"before": None, "after": new, "n_after": len(after[new]), "sha_after": digest(after[new]),
                         "result": "new"})
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--map", nargs="*", default=[], help="OLD=NEW kernel names")
    args = p.parse_args(argv)
    pairs = dict(m.split("=", 1) for m in args.map)
    before, after = args.before.read_text(), args.after.read_text()
    rows = compare(kernels(before), kernels(after), pairs)
    words = {r["before"]: r["result"] for r in compare(kernels(before, True), kernels(after, True), pairs)}
    for r in rows:
        line = f"{r['result']:<13} {r['before']!s:<28} -> {r['after']!s:<28} {r.get('n_before', '-')!s:>6} / {r.get('n_after', '-')!s:>6} instructions"
        if r["result"] == "differs":
            line += f"; first at #{r['first_difference']}: {r['was']!r} -> {r['now']!r}"
        elif r["result"] == "identical":
            line += f"; encodings {words.get(r['before'])}"
        print(line)
    return 0 if all(r["result"] == "identical" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
