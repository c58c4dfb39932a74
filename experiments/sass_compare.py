"""Compare the SASS of two builds kernel by kernel: opcodes and operands, ignoring addresses,
encodings and symbol names (and, as a stricter second check, the 128-bit encodings themselves,
which include the scheduling control bits).

    python experiments/sass_compare.py BEFORE.sass AFTER.sass [--map OLD=NEW ...]
    python experiments/sass_compare.py BEFORE_DIR AFTER_DIR [--map OLD=NEW ...]

Each file is a ``cuobjdump --dump-sass`` listing; each folder one that experiments/sass_snapshot.py
wrote, whose listings (``<set>.sass``) are paired by name. A kernel is named by its demangled name
(``tc::stage5::kernel<2>``); ``--map`` pairs kernels whose name changed. Prints one line per kernel
(for folders, a markdown table: set, kernel, result, instruction counts, first differing
instruction) and exits 1 unless every kernel is identical. Written for the comparison in
experiments/runs/2026-12-01_sass_restructure_cuda/comparison.md; folders since
experiments/runs/2026-12-04_sass_renovation/comparison.md.
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
TEMPLATE_ARGS = re.compile(r"I((?:L[ib]\d+E)+)E")  # integer and bool template arguments: ILi128ELb1EE


def name_of(symbol: str) -> str:
    """The demangled name, with bool template arguments too (``tc::stage7::kernel<128,true,false>``):
    ``compiler.demangle`` renders integer ones only, and stage 7's instances differ by bools."""
    name = demangle(symbol)
    args = TEMPLATE_ARGS.search(symbol)
    if "<" not in name and name != symbol and args:
        values = re.findall(r"L([ib])(\d+)E", args.group(1))
        name += "<" + ",".join(v if t == "i" else ("true" if v == "1" else "false") for t, v in values) + ">"
    return name


def kernels(text: str, encodings: bool = False) -> dict[str, list[str]]:
    """Demangled kernel name -> its instructions, each as "OPCODE operands" with the address and
    encoding comments removed (branch targets are offsets inside the kernel and are kept); with
    ``encodings``, the 64-bit halves of the instruction words instead."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = name_of(m.group(1))
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


def compare_listings(before: str, after: str, pairs: dict[str, str]) -> list[dict]:
    """:func:`compare` of two listings, each identical row marked with whether the encodings are too."""
    rows = compare(kernels(before), kernels(after), pairs)
    words = {r["before"]: r["result"] for r in compare(kernels(before, True), kernels(after, True), pairs)}
    for r in rows:
        if r["result"] == "identical":
            r["encodings"] = words.get(r["before"])
    return rows


def compare_folders(before: Path, after: Path, pairs: dict[str, str]) -> list[dict]:
    """Every set of two snapshots, kernel by kernel; a set on one side only is one row."""
    old = {p.stem: p for p in before.glob("*.sass")}
    new = {p.stem: p for p in after.glob("*.sass")}
    rows = []
    for name in sorted(old.keys() | new.keys()):
        if name not in new or name not in old:
            rows.append({"set": name, "before": None, "after": None,
                         "result": "absent after" if name not in new else "new"})
            continue
        rows += [{"set": name} | r for r in compare_listings(old[name].read_text(), new[name].read_text(), pairs)]
    return rows


def line(r: dict) -> str:
    text = (f"{r['result']:<13} {r['before']!s:<28} -> {r['after']!s:<28} "
            f"{r.get('n_before', '-')!s:>6} / {r.get('n_after', '-')!s:>6} instructions")
    if r["result"] == "differs":
        text += f"; first at #{r['first_difference']}: {r['was']!r} -> {r['now']!r}"
    elif r["result"] == "identical":
        text += f"; encodings {r['encodings']}"
    return text


def table(rows: list[dict]) -> str:
    out = ["| set | kernel | result | instructions before / after | first difference |", "|---|---|---|---|---|"]
    for r in rows:
        kernel = r["before"] if r["before"] == r["after"] else f"{r['before']} -> {r['after']}"
        result = r["result"] + (f" (encodings {r['encodings']})" if r["result"] == "identical" else "")
        first = (f"#{r['first_difference']}: `{r['was']}` -> `{r['now']}`" if r["result"] == "differs" else "")
        out.append(f"| {r['set']} | `{kernel}` | {result} | {r.get('n_before', '-')} / {r.get('n_after', '-')} | {first} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--map", nargs="*", default=[], help="OLD=NEW kernel names")
    args = p.parse_args(argv)
    pairs = dict(m.split("=", 1) for m in args.map)
    if args.before.is_dir() and args.after.is_dir():
        rows = compare_folders(args.before, args.after, pairs)
        print(table(rows))
    else:
        rows = compare_listings(args.before.read_text(), args.after.read_text(), pairs)
        print("\n".join(line(r) for r in rows))
    return 0 if all(r["result"] == "identical" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
