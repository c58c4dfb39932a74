"""Reading the tensor-core stages without a GPU: their sources, as the notebooks print them (marked
excerpts, a helper by its name, a piece of a kernel by a line of it), and what the compiler makes of
them - ptxas's report and the SASS of every stage, as tables.

Compiling needs ``nvcc`` (:mod:`course_lib.compiler` finds it); reading the SASS needs the
``cuobjdump`` that ships in Triton's wheel.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import re
from pathlib import Path
from typing import Iterable, Sequence

from course_lib import compiler
from course_lib.kernels.tensor_cores.csrc import CSRC
from course_lib.kernels.tensor_cores.stages import ALL_DESIGNS, DESIGN


# ---- compiling without a GPU: ptxas's report and the SASS per stage ------------------------------
def compile_stage(stage: str, arch: str | None = None, *, nvcc: Path | None = None,
                  use_cache: bool = True) -> compiler.CompileResult:
    """Compile one stage's .cu file to a cubin with ``nvcc -Xptxas -v`` (no GPU needed).

    ``arch`` defaults to sm_90a (stages 0 and 1 also take e.g. "sm_80"). Raises RuntimeError with the
    compiler's messages if it fails, or if nvcc is missing.
    """
    design = DESIGN[stage]
    arch = arch or "sm_90a"
    if design.hopper and arch != "sm_90a":
        raise ValueError(f"{stage} uses wgmma and setmaxnreg: it compiles only for sm_90a, not {arch}")
    return compiler.compile_cubin(CSRC / design.source, arch, compiler.NVCC_FLAGS, include_dirs=[CSRC], name=stage,
                                  nvcc=nvcc, use_cache=use_cache)


def compile_all(arch: str = "sm_90a", *, stages: Sequence[str] | None = None, jobs: int | None = None,
                use_cache: bool = True) -> dict[str, compiler.CompileResult]:
    """Compile every stage (or ``stages``) in parallel (nvcc processes), for ``arch``; for an
    architecture without wgmma (sm_80, ...) only the stages that run there."""
    nvcc = compiler.require_nvcc()
    names = list(stages) if stages is not None else [d.stage for d in ALL_DESIGNS if arch == "sm_90a" or not d.hopper]
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2) as pool:
        futures = {name: pool.submit(compile_stage, name, arch, nvcc=nvcc, use_cache=use_cache) for name in names}
        return {stage: f.result() for stage, f in futures.items()}


# What the course points at in the SASS: tensor-core instructions, their feeders, barriers, and
# local memory (which must be absent).
SASS_HIGHLIGHTS = {
    "HMMA": "warp-level tensor-core MMA (mma.sync)",
    "HGMMA": "warpgroup tensor-core MMA (wgmma)",
    "LDSM": "ldmatrix",
    "STSM": "stmatrix",
    "UTMALDG": "TMA load (global -> shared)",
    "UTMASTG": "TMA store (shared -> global)",
    "SYNCS": "mbarrier operations",
    "USETMAXREG": "setmaxnreg",
    "STG": "ordinary global stores",
    "LDL": "local-memory load (spill)",
    "STL": "local-memory store (spill)",
}


# Stage 6's file also holds its decode path (the operands swapped, one kernel per token tile), which
# notebook 11 teaches; the tables of the staircase show each stage's own kernel.
DECODE_KERNEL = "decode_kernel"


def staircase_kernel(name: str) -> bool:
    """Whether a kernel of a stage's file is the stage's kernel (not stage 6's decode path)."""
    return DECODE_KERNEL not in name


def table_kernel(stage: str, name: str) -> bool:
    """Whether the staircase's tables list this kernel of a stage's file: the stage's own kernel
    (:func:`staircase_kernel`) and, where the file has one per tile width (stage 6: 128 x 256, and
    128 x 128 for few tiles with short K, which notebook 10 teaches), only the design's own width."""
    width = re.search(r"<(\d+)>$", name)
    return staircase_kernel(name) and (width is None or int(width.group(1)) == DESIGN[stage].block[1])


def staircase_mix(cubin: Path, stage: str) -> collections.Counter:
    """The SASS opcode counts of ``stage``'s kernel in its cubin, as the staircase's tables list it
    (:func:`table_kernel`: stage 6's 128 x 256 kernel, not its 128 x 128 one nor its decode path)."""
    return sum((mix for name, mix in sass_mix_by_kernel(cubin).items() if table_kernel(stage, name)),
               collections.Counter())


def resource_table(results: dict[str, compiler.CompileResult]) -> str:
    """ptxas's report for every stage's kernel, one line each, as text (at most 100 characters wide)."""
    rows = [f"{'stage':<23}{'kernel':<24}{'threads':>8}{'regs':>6}{'spills':>7}{'stack':>6}{'smem/CTA':>10}  tile, slots"]
    for stage, r in results.items():
        d = DESIGN[stage]
        for k in (k for k in r.kernels if table_kernel(stage, k.name)):
            smem = k.static_smem_bytes or d.smem_bytes
            rows.append(
                f"{stage:<23}{k.name:<24}{d.threads:>8}{k.registers:>6}{k.spill_store_bytes + k.spill_load_bytes:>7}"
                f"{k.stack_bytes:>6}{smem / 1024:>8.1f}KB  {d.block[0]}x{d.block[1]}x{d.block[2]}, {d.stages}"
            )
    return "\n".join(rows)


def sass_by_kernel(cubin: Path) -> dict[str, str]:
    """Each kernel's SASS in a cubin, by its demangled name (compiler.demangle drops bool template
    arguments: kernels that differ only in those share a name, and the last one is kept)."""
    return {compiler.demangle(part.split()[0]): part
            for part in re.split(r"\n\s*Function : ", compiler.sass(cubin))[1:]}


def sass_mix_by_kernel(cubin: Path) -> dict[str, collections.Counter]:
    """How often each SASS opcode occurs in each kernel of a cubin (demangled name -> counts): a file
    with several kernels (primer_fp32.cu) counted kernel by kernel."""
    return {name: collections.Counter(compiler.SASS_LINE.findall(sass)) for name, sass in sass_by_kernel(cubin).items()}


def mainloop_slice_path(sass: str, wgmmas: int = 4) -> list[str]:
    """The SASS instructions a consumer warp runs for one K slice of a whole-tile kernel (stages 6
    and 7) in a slice that stores nothing: the innermost loop that holds `wgmmas` wgmmas (HGMMA /
    QGMMA; 4 a slice; stage 7's promoted groups hold 4 per slice of the group), less the blocks a
    forward branch skips that hold the staged tile's store (STSM, TMA store) or the wait's slow path
    (clock reads). Each of them runs once per pass of the loop per consumer warp."""
    code = [(int(a, 16), text) for a, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", sass)]
    mmas = [a for a, text in code if "GMMA" in text]
    loops = [(int(m.group(1), 16), a) for a, text in code
             if (m := re.search(r"BRA\S*\s.*?(0x[0-9a-f]+)", text)) and int(m.group(1), 16) <= a]
    loops = [(lo, hi) for lo, hi in loops if sum(lo <= x <= hi for x in mmas) == wgmmas]
    if not loops:
        raise ValueError(f"no loop holds exactly {wgmmas} wgmmas")
    start, end = min(loops, key=lambda loop: loop[1] - loop[0])
    body = [(a, text) for a, text in code if start <= a <= end]
    skipped = set()
    for a, text in body:
        m = re.match(r"@!?U?P\d BRA (0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) > a:
            block = [x for x, t in body if a < x < int(m.group(1), 16)]
            if any(key in t for x, t in body if x in block for key in ("STSM", "UTMASTG", "CLOCK", "DEPBAR.LE SB0")):
                skipped.update(block)
    return [text for a, text in body if a not in skipped]


def instruction_table(results: dict[str, compiler.CompileResult],
                      opcodes: Iterable[str] = tuple(SASS_HIGHLIGHTS)) -> str:
    """How many of each highlighted SASS opcode every stage's kernel holds (in its compiled code, not
    how often they run), as text (each column as wide as its opcode: pick the opcodes to keep a table
    narrow). Stage 6 counts its 128 x 256 kernel, as :func:`resource_table` lists it."""
    opcodes = list(opcodes)
    widths = [max(len(op) + 2, 6) for op in opcodes]
    rows = [f"{'stage':<23}" + "".join(f"{op:>{w}}" for op, w in zip(opcodes, widths))]
    for stage, r in results.items():
        mix = staircase_mix(r.cubin, stage)
        rows.append(f"{stage:<23}" + "".join(f"{mix[op]:>{w}}" for op, w in zip(opcodes, widths)))
    return "\n".join(rows)


# ---- excerpts the notebooks print ---------------------------------------------------------------
# Notebooks 06 to 12 print parts of the sources, each between two marker lines that name it:
#     // [excerpt ring-k-loop]
#     ...
#     // [/excerpt ring-k-loop]
EXCERPT_BEGIN = re.compile(r"^\s*// \[excerpt ([a-z0-9-]+)\]\s*$")
EXCERPT_END = re.compile(r"^\s*// \[/excerpt ([a-z0-9-]+)\]\s*$")


def source_path(stage_or_file: str | Path) -> Path:
    """A stage's .cu file, or a file in csrc/ by name (a Path is taken as it is); ValueError naming
    what exists otherwise."""
    if isinstance(stage_or_file, Path):
        return stage_or_file
    path = CSRC / (DESIGN[stage_or_file].source if stage_or_file in DESIGN else stage_or_file)
    if path.parent != CSRC or not path.is_file():
        names = sorted(DESIGN) + sorted(p.name for p in CSRC.iterdir() if p.suffix in (".cu", ".cuh", ".h"))
        raise ValueError(f"{stage_or_file!r} is neither a stage nor a file in {CSRC}: one of {', '.join(names)}")
    return path


def excerpts(stage_or_file: str | Path) -> dict[str, tuple[int, int]]:
    """The excerpts marked in a source file: name -> (first, last) line index of its content.
    Raises ValueError naming the file, the marker and its line if a marker is unbalanced, a name
    is used twice, or two excerpts overlap without one holding the other."""
    path = source_path(stage_or_file)
    spans: dict[str, tuple[int, int]] = {}
    open_: list[tuple[str, int]] = []  # (name, line of its begin marker), innermost last
    for n, line in enumerate(path.read_text().splitlines()):
        begin, end = EXCERPT_BEGIN.match(line), EXCERPT_END.match(line)
        if begin:
            name = begin.group(1)
            if name in spans or any(name == o for o, _ in open_):
                raise ValueError(f"{path.name}:{n + 1}: excerpt {name!r} is marked twice")
            open_.append((name, n))
        elif end:
            name = end.group(1)
            if not open_ or open_[-1][0] != name:
                expected = f"close // [/excerpt {open_[-1][0]}] first" if open_ else "no excerpt is open"
                raise ValueError(f"{path.name}:{n + 1}: // [/excerpt {name}] does not close an open "
                                 f"// [excerpt {name}] ({expected})")
            _, first = open_.pop()
            spans[name] = (first + 1, n - 1)
    if open_:
        name, first = open_[-1]
        raise ValueError(f"{path.name}:{first + 1}: // [excerpt {name}] is never closed by // [/excerpt {name}]")
    return spans


def source_excerpt(stage_or_file: str | Path, name: str) -> str:
    """The lines of a stage's .cu file (or of a file in csrc/) between ``// [excerpt name]`` and
    ``// [/excerpt name]``, without the marker lines (nor those of excerpts inside it), indented as
    in the file."""
    spans = excerpts(stage_or_file)
    if name not in spans:
        path = source_path(stage_or_file)
        raise ValueError(f"{path.name} has no excerpt {name!r} (a line // [excerpt {name}] and, below it, "
                         f"// [/excerpt {name}]); it has {', '.join(sorted(spans)) or 'none'}")
    first, last = spans[name]
    lines = source_path(stage_or_file).read_text().splitlines()[first:last + 1]
    return "\n".join(line for line in lines if not (EXCERPT_BEGIN.match(line) or EXCERPT_END.match(line)))


# ---- reading the kernels: a helper function, or a piece of a kernel, printed from its source -------
# Notebooks 08 and 09 print each synchronisation helper where a stage first uses it, and stage 2 top
# to bottom, straight from csrc/ (no copy of the C++ lives in Python). The excerpt markers above are
# for longer passages; these find a helper by its name and a piece of a kernel by a line of it, so
# the sources need no markers for them.
_BANNER = re.compile(r"^\s*// (----|\[/?excerpt )")


def _strip_code(line: str) -> str:
    """The line with its // comment, string and character literals blanked (braces in asm strings,
    such as "{\\n", are not code)."""
    out, i = [], 0
    while i < len(line):
        ch = line[i]
        if ch in "\"'":
            j = i + 1
            while j < len(line) and line[j] != ch:
                j += 2 if line[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        elif line.startswith("//", i):
            break
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def cuda_function(name: str, file: str | Path = "tc_hopper.cuh") -> str:
    """The definition of the C++ function ``name`` in ``file`` (a stage or a file in csrc/, as
    :func:`source_path` takes it), with its template line and the comment right above it.
    ValueError if ``file`` defines no such function, or more than one."""
    path = source_path(file)
    lines = path.read_text().splitlines()
    found = [i for i, line in enumerate(lines)
             if line[:1] not in ("", " ", "/", "#", "}") and re.search(rf"\b{re.escape(name)}\s*\(", line)
             and not _strip_code(line).rstrip().endswith(";")]
    if len(found) != 1:
        raise ValueError(f"{path.name} defines {len(found)} functions named {name!r} at the start of a line "
                         f"(lines {[i + 1 for i in found]}): give the name of exactly one")
    first = found[0]
    while first > 0 and lines[first - 1].startswith("template"):
        first -= 1
    while first > 0 and lines[first - 1].startswith("//") and not _BANNER.match(lines[first - 1]):
        first -= 1
    depth, opened = 0, False
    for last in range(found[0], len(lines)):
        code = _strip_code(lines[last])
        depth += code.count("{") - code.count("}")
        opened = opened or "{" in code
        if opened and depth == 0:
            return "\n".join(lines[first:last + 1])
    raise ValueError(f"{path.name}: the body of {name} never closes")


def cuda_functions(*names: str, file: str | Path = "tc_hopper.cuh") -> str:
    """Several helpers of ``file``, in the order given, a blank line between them."""
    return "\n\n".join(cuda_function(n, file) for n in names)


def kernel_piece(stage: str, line: str) -> str:
    """The paragraph (lines between two blank lines) of a stage's source that holds the text
    ``line``, without excerpt markers: a kernel read piece by piece. ValueError if no paragraph, or
    more than one, holds it."""
    path = source_path(stage)
    paragraphs, current = [], []
    for text in path.read_text().splitlines() + [""]:
        if text.strip():
            if not re.match(r"^\s*// \[/?excerpt ", text):
                current.append(text)
        elif current:
            paragraphs.append(current)
            current = []
    found = [p for p in paragraphs if any(line in t for t in p)]
    if len(found) != 1:
        raise ValueError(f"{len(found)} paragraphs of {path.name} hold {line!r}: give a line of exactly one")
    return "\n".join(found[0])
