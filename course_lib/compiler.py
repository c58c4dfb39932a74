"""What the compiler makes of CUDA code, on a machine without a GPU.

``nvcc`` compiles a ``.cu`` file to a cubin for a named architecture (:func:`compile_cubin`), with
ptxas's report of registers, spills and shared memory per kernel (:func:`parse_ptxas`); the
``cuobjdump`` that ships in Triton's wheel disassembles the cubin into SASS, the machine code the
GPU runs (:func:`sass`, :func:`sass_instruction_mix`). Compiled cubins are cached outside the
repository, keyed by the sources, the flags and the nvcc version.

Nothing here knows the course's kernels: :mod:`course_lib.kernels.tensor_cores` compiles its stages
with these helpers.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterable, Sequence

HEADER_SUFFIXES = (".h", ".cuh")


# ---- the tools ----------------------------------------------------------------------------------
def find_nvcc() -> Path | None:
    """nvcc: under $CUDA_HOME (or $CUDA_PATH) if set, else from PyPI's CUDA packages (``make lab
    GPU=1`` installs cuda-toolkit[nvcc,cccl]: the CUDA 13.0 of PyPI's torch), else on PATH, else in
    /usr/local/cuda."""
    candidates = [Path(os.environ[var]) / "bin" / "nvcc" for var in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(var)]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        # CUDA 13's wheels share one prefix (nvidia/cu13/{bin,include,lib}); CUDA 12's had one per part.
        candidates += [Path(root) / "cu13" / "bin" / "nvcc", Path(root) / "cuda_nvcc" / "bin" / "nvcc"]
    on_path = shutil.which("nvcc")
    candidates += [Path(on_path)] if on_path else []
    candidates.append(Path("/usr/local/cuda/bin/nvcc"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    return None


def require_nvcc(nvcc: Path | None = None) -> Path:
    """``nvcc`` if given, else :func:`find_nvcc`'s; RuntimeError saying what to install if there is none."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise RuntimeError("nvcc not found: install the CUDA toolkit or `pip install nvidia-cuda-nvcc`")
    return nvcc


def find_cuobjdump() -> Path | None:
    """The cuobjdump that ships inside Triton's wheel (or one on PATH)."""
    try:
        import triton  # noqa: PLC0415 - only needed here

        p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if p.is_file():
            return p
    except ImportError:
        pass
    found = shutil.which("cuobjdump")
    return Path(found) if found else None


def nvcc_version(nvcc: Path) -> str:
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release ([\d.]+), V([\d.]+)", out)
    return m.group(2) if m else out.strip().splitlines()[-1]


# ---- where compiled code is cached ----------------------------------------------------------------
def extensions_dir() -> Path:
    """Where built extensions are cached: never inside the repository."""
    if os.environ.get("COURSE_EXTENSIONS_DIR"):
        return Path(os.environ["COURSE_EXTENSIONS_DIR"])
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        return Path(os.environ["TORCH_EXTENSIONS_DIR"]) / "course_lib"
    return Path.home() / ".cache" / "course_lib" / "extensions"


def cubin_cache_dir() -> Path:
    """Where :func:`compile_cubin` keeps its cubins and ptxas logs (next to the extensions)."""
    return extensions_dir().parent / "cubins"


def _digest(paths: Iterable[Path], flags: Iterable[str], nvcc: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    h.update(" ".join(flags).encode())
    h.update(nvcc_version(nvcc).encode())
    return h.hexdigest()[:16]


# ---- ptxas's report ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class KernelReport:
    """ptxas's resource report for one kernel."""

    name: str  # demangled-ish, e.g. "tc::stage5::kernel"
    arch: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    static_smem_bytes: int
    barriers: int

    @property
    def spills(self) -> bool:
        return self.spill_store_bytes > 0 or self.spill_load_bytes > 0 or self.stack_bytes > 0


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """One .cu file compiled for one architecture."""

    name: str  # what was compiled (the caller's name for it, e.g. a stage)
    arch: str
    cubin: Path
    kernels: tuple[KernelReport, ...]
    warnings: tuple[str, ...]
    ptxas_log: str
    seconds: float  # 0 when the cubin came from the cache


def demangle(symbol: str) -> str:
    """Enough of the Itanium demangler for names in namespaces with integer template arguments:
    ``_ZN2tc6stage56kernelILi2EEE...`` becomes ``tc::stage5::kernel<2>``; anything else comes back
    unchanged."""
    if not symbol.startswith("_ZN"):
        return symbol
    parts, pos = [], 3
    while pos < len(symbol) and symbol[pos].isdigit():
        digits = re.match(r"\d+", symbol[pos:]).group(0)
        pos += len(digits)
        parts.append(symbol[pos:pos + int(digits)])
        pos += int(digits)
    if not parts:
        return symbol
    name = "::".join(parts)
    args = re.match(r"I((?:Li\d+E)+)E", symbol[pos:])
    if args:
        name += "<" + ",".join(re.findall(r"Li(\d+)E", args.group(1))) + ">"
    return name


def parse_ptxas(log: str) -> tuple[tuple[KernelReport, ...], tuple[str, ...]]:
    """Kernels and warnings from ``nvcc -Xptxas -v`` output."""
    kernels = []
    blocks = re.split(r"ptxas info\s+: Compiling entry function ", log)[1:]
    for block in blocks:
        name = re.match(r"'([^']+)' for '([^']+)'", block)
        props = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
        used = re.search(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?", block)
        if not (name and props and used):
            continue
        kernels.append(
            KernelReport(
                name=demangle(name.group(1)),
                arch=name.group(2),
                registers=int(used.group(1)),
                stack_bytes=int(props.group(1)),
                spill_store_bytes=int(props.group(2)),
                spill_load_bytes=int(props.group(3)),
                static_smem_bytes=int(used.group(3) or 0),
                barriers=int(used.group(2) or 0),
            )
        )
    warnings = tuple(line.strip() for line in log.splitlines() if "warning" in line.lower())
    return tuple(sorted(kernels, key=lambda k: k.name)), warnings


# ---- compiling -------------------------------------------------------------------------------------
def gencode(arch: str) -> str:
    """nvcc's -gencode flag for a real architecture ("sm_90a", "sm_80"): SASS for it, no PTX."""
    number = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def compile_cubin(source: Path, arch: str, flags: Sequence[str] = (), *, include_dirs: Sequence[Path] = (),
                  name: str | None = None, nvcc: Path | None = None, use_cache: bool = True) -> CompileResult:
    """Compile ``source`` to a cubin for ``arch`` with ``nvcc -Xptxas -v`` and ``flags`` (no GPU needed).

    The cache key covers the source, every header (.h, .cuh) in ``include_dirs``, the flags and the
    nvcc version. Raises RuntimeError with the compiler's messages if it fails, or if nvcc is missing.
    """
    nvcc = require_nvcc(nvcc)
    source = Path(source)
    args = [*flags, gencode(arch), "-Xptxas", "-v", "-cubin"]
    for d in include_dirs:
        args += ["-I", str(d)]
    headers = [p for d in include_dirs for p in Path(d).iterdir() if p.suffix in HEADER_SUFFIXES]
    out_dir = cubin_cache_dir() / _digest([source, *headers], args, nvcc)
    cubin, log_path = out_dir / f"{source.stem}.{arch}.cubin", out_dir / f"{source.stem}.{arch}.log"
    seconds = 0.0
    if not (use_cache and cubin.is_file() and log_path.is_file()):
        out_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        proc = subprocess.run([str(nvcc), *args, "-o", str(cubin), str(source)], capture_output=True, text=True)
        seconds = time.time() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed on {source.name} for {arch}:\n{proc.stdout}{proc.stderr}")
        log_path.write_text(proc.stdout + proc.stderr)
    log = log_path.read_text()
    kernels, warnings = parse_ptxas(log)
    return CompileResult(name or source.stem, arch, cubin, kernels, warnings, log, seconds)


# ---- the machine code --------------------------------------------------------------------------------
# One SASS instruction as cuobjdump prints it: "/*0a40*/  @!P0 HGMMA.64x256x16.F32.BF16 ..." -> "HGMMA"
SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)")


def sass(cubin: Path, cuobjdump: Path | None = None) -> str:
    """The SASS (machine code) of a cubin, via cuobjdump."""
    tool = cuobjdump or find_cuobjdump()
    if tool is None:
        raise RuntimeError("cuobjdump not found (it ships inside the triton wheel: pip install triton)")
    return subprocess.run([str(tool), "--dump-sass", str(cubin)], capture_output=True, text=True, check=True).stdout


def sass_instruction_mix(cubin: Path, cuobjdump: Path | None = None) -> collections.Counter:
    """How often each SASS opcode (without modifiers) occurs in a cubin, e.g. HGMMA, HMMA, LDSM."""
    return collections.Counter(SASS_LINE.findall(sass(cubin, cuobjdump)))
