"""The tables of experiments/runs/2026-12-01_sass_restructure_cuda/comparison.md (which it produced),
from the raw SASS listings of the two builds.

    PYTHONPATH=. python experiments/sass_restructure_cuda_report.py RAW_BEFORE RAW_AFTER

RAW_* are the folders experiments/sass_restructure_cuda_snapshot.py wrote (cuobjdump --dump-sass of
every cubin). Writes the normalised SASS (one "OPCODE operands" line per instruction, a "== kernel"
line before each kernel) of the course's kernels into before/ and after/ of that run's folder, and
prints, as markdown: one row
per kernel (identical or not, instruction counts, sha256 of the normalised instruction stream), and
for stage 6 the comparison of its K loop.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

from sass_compare import compare, digest, kernels

RUN = Path(__file__).resolve().parent / "runs" / "2026-12-01_sass_restructure_cuda"  # the run's folder
# (file before, file after, {kernel before: kernel after}) for every kernel the course launches,
# then the experiment variant against the stage 6 it was before.
PAIRS = [
    ("tc_1_mma_sync.sm_90a", "tc_1_mma_sync.sm_90a", {}),
    ("tc_1_mma_sync.sm_80", "tc_1_mma_sync.sm_80", {}),
    ("tc_2_wgmma_tma.sm_90a", "tc_2_wgmma_tma.sm_90a", {}),
    ("tc_3_pipeline.sm_90a", "tc_3_pipeline.sm_90a", {}),
    ("tc_4_warp_spec.sm_90a", "tc_4_warp_specialized.sm_90a", {}),
    ("tc_5_persistent.sm_90a", "tc_5_persistent.sm_90a", {"tc::stage5::kernel<2>": "tc::stage5::kernel"}),
    ("tc_6_tma_store.sm_90a", "tc_6_tma_store.sm_90a", {"tc::stage6::kernel<2>": "tc::stage6::kernel"}),
    ("tc_6_tma_store.sm_90a", "tc_6_stream_k.sm_90a", {"tc::stage6::kernel<1>": "tc::stage6_stream_k::kernel<1>",
                                                       "tc::stage6::kernel<2>": "tc::stage6_stream_k::kernel<2>"}),
    ("tc_6_tma_store.timeline.sm_90a", "tc_6_stream_k.timeline.sm_90a",
     {"tc::stage6::kernel<1>": "tc::stage6_stream_k::kernel<1>", "tc::stage6::kernel<2>": "tc::stage6_stream_k::kernel<2>"}),
]
COURSE_AFTER = [p[1] for p in PAIRS[:7]]
SYNC = re.compile(r"HGMMA|STSM|UTMA|SYNCS|BAR\.|WARPGROUP|FENCE|DEPBAR|MEMBAR|CCTL|ERRBAR")


def write_normalised(raw: Path, names: list[str], out: Path) -> None:
    out.mkdir(exist_ok=True)
    for name in names:
        ks = kernels((raw / f"{name}.sass").read_text())
        (out / f"{name}.sass.txt").write_text("".join(f"== {k}\n" + "\n".join(v) + "\n" for k, v in ks.items()))


def k_loop(raw_text: str, kernel: str) -> list[str]:
    """The instructions of the innermost backward-branch loop that holds the HGMMAs (the K loop)."""
    code, current = [], None
    for line in raw_text.splitlines():
        m = re.match(r"^\s*Function : (\S+)", line)
        if m:
            from course_lib.compiler import demangle

            current = demangle(m.group(1))
            continue
        m = re.match(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and current == kernel:
            code.append((int(m.group(1), 16), re.sub(r"\s+", " ", m.group(2))))
    best = None
    for addr, ins in code:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)$", ins)
        if m and int(m.group(1), 16) < addr:
            body = [i for a, i in code if int(m.group(1), 16) <= a <= addr]
            if any("HGMMA" in i for i in body) and (best is None or len(body) < len(best)):
                best = body
    return best or []


def opcode(ins: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", ins).split(" ")[0]


def main(before: Path, after: Path) -> int:
    write_normalised(before, sorted({p[0] for p in PAIRS[:7]} | {"tc_6_tma_store.timeline.sm_90a"}), RUN / "before")
    write_normalised(after, COURSE_AFTER, RUN / "after")
    print("| before (file: kernel) | after (file: kernel) | result | instructions before / after | sha256 of normalised SASS before / after |")
    print("| --- | --- | --- | --- | --- |")
    for old_file, new_file, pairs in PAIRS:
        old_text, new_text = (before / f"{old_file}.sass").read_text(), (after / f"{new_file}.sass").read_text()
        words = {r["before"]: r["result"] for r in compare(kernels(old_text, True), kernels(new_text, True), pairs)}
        for r in compare(kernels(old_text), kernels(new_text), pairs):
            result = r["result"] + (f" (encodings {words.get(r['before'])})" if r["result"] == "identical" else "")
            print(f"| {old_file}: `{r['before']}` | {new_file}: `{r['after']}` | {result} | "
                  f"{r.get('n_before', '-')} / {r.get('n_after', '-')} | {r.get('sha_before', '-')} / {r.get('sha_after', '-')} |")
    old_text = (before / "tc_6_tma_store.sm_90a.sass").read_text()
    new_text = (after / "tc_6_tma_store.sm_90a.sass").read_text()
    old_loop, new_loop = k_loop(old_text, "tc::stage6::kernel<2>"), k_loop(new_text, "tc::stage6::kernel")
    old_sync = [opcode(i) for i in old_loop if SYNC.search(i)]
    new_sync = [opcode(i) for i in new_loop if SYNC.search(i)]
    print(f"\nstage 6 K loop: {len(old_loop)} instructions before, {len(new_loop)} after; tensor-core, stmatrix, TMA, "
          f"barrier and fence instructions: {len(old_sync)} before, {len(new_sync)} after, same sequence: {old_sync == new_sync}")
    print("  " + " ".join(old_sync))
    co = collections.Counter(opcode(i) for i in old_loop)
    cn = collections.Counter(opcode(i) for i in new_loop)
    print("  opcodes whose count differs in the K loop (before -> after): " + ", ".join(
        f"{k} {co[k]}->{cn[k]}" for k in sorted(set(co) | set(cn)) if co[k] != cn[k]))
    whole_old = collections.Counter(opcode(i) for i in kernels(old_text)["tc::stage6::kernel<2>"])
    whole_new = collections.Counter(opcode(i) for i in kernels(new_text)["tc::stage6::kernel"])
    print("  whole kernel, opcodes gone (count before -> after), top 20: " + ", ".join(
        f"{k} {whole_old[k]}->{whole_new[k]}" for k, _ in (whole_old - whole_new).most_common(20)))
    print("  whole kernel, opcodes more frequent after: " + ", ".join(
        f"{k} {whole_old[k]}->{whole_new[k]}" for k, _ in (whole_new - whole_old).most_common(20)))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
