"""What the compiler makes of CUDA code, on a machine without a GPU, and building it into a torch
extension on a machine with one.

``nvcc`` compiles a ``.cu`` file to a cubin for a named architecture (:func:`compile_cubin`), with
ptxas's report of registers, spills and shared memory per kernel (:func:`parse_ptxas`); the
``cuobjdump`` that ships in Triton's wheel disassembles the cubin into SASS, the machine code the
GPU runs (:func:`sass`, :func:`sass_instruction_mix`). Compiled cubins are cached outside the
repository, keyed by the sources, the flags and the nvcc version. :func:`load_extension` builds
CUDA sources into a torch extension with the same flags (:data:`NVCC_FLAGS`), after saying what the
toolchain lacks, if anything (:func:`toolchain_problems`).

Nothing here knows the course's kernels: :mod:`course_lib.kernels.tensor_cores` compiles and builds
its stages with these helpers.
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
import sys
import time
from pathlib import Path
from typing import Iterable, Sequence

HEADER_SUFFIXES = (".h", ".cuh")

# Flags every build uses (an extension build and a compile without a GPU alike). PyTorch adds the
# __CUDA_NO_*_CONVERSIONS__ defines to extension builds; the compile without a GPU uses them too, so
# it compiles the same code.
NVCC_FLAGS = (
    "-O3", "-std=c++17", "-lineinfo", "--expt-relaxed-constexpr",
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
)
# wgmma and setmaxnreg exist only in the "a" (architecture-specific) variant of sm_90. nvcc 13.0's
# -arch=sm_90a shorthand also runs a plain sm_90 pass that rejects them; the -gencode form does not.
SM90A = "-gencode=arch=compute_90a,code=sm_90a"


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


def sass_tools_missing() -> str | None:
    """What is missing to compile a kernel and read its SASS without a GPU (nvcc, cuobjdump), in
    one line saying where to get it; None when both are found."""
    if find_nvcc() is None:
        return "nvcc not found (install the CUDA toolkit or `pip install nvidia-cuda-nvcc`)"
    if find_cuobjdump() is None:
        return "cuobjdump not found (it ships inside the triton wheel)"
    return None


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


# ---- a torch extension (GPU machines) -----------------------------------------------------------------
def toolchain_problems(nvcc: Path | None, ninja: str | None, cxx: str | None) -> list[str]:
    """What building an extension lacks, each with what to install (empty: nothing)."""
    out = []
    if nvcc is None:
        out.append("nvcc (CUDA's compiler): `make lab GPU=1` installs it from PyPI (cuda-toolkit[nvcc,cccl]"
                   "==13.0.*, the CUDA of PyPI's torch); or install the CUDA 13.0 toolkit and set CUDA_HOME")
    if ninja is None:
        out.append("ninja (runs the compilers in parallel): `make lab GPU=1` installs it, or `pip install ninja`")
    if cxx is None:
        out.append("a C++ compiler for the host code: on Debian/Ubuntu `sudo apt install g++`")
    return out


def _cudart_link_dir(cuda_home: Path) -> Path | None:
    """A folder holding ``libcudart.so`` for the linker, or None if ``cuda_home`` has one already.

    torch's extension builder links with ``-L$CUDA_HOME/lib[64] -lcudart``. PyPI's CUDA runtime
    ships only the versioned ``libcudart.so.13``, so a link named ``libcudart.so`` is made next to
    the built extensions (the extension loads the same library torch has already loaded)."""
    for lib in ("lib64", "lib"):
        if (cuda_home / lib / "libcudart.so").exists():
            return None
    versioned = sorted(cuda_home.glob("lib*/libcudart.so.*"))
    if not versioned:
        return None
    link_dir = extensions_dir() / "cudart_link"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "libcudart.so"
    if not link.exists():
        link.symlink_to(versioned[0])
    return link_dir


def load_extension(name: str, sources: Sequence[Path], flags: Sequence[str], include_paths: Sequence[Path] = (),
                   verbose: bool = False):
    """Build (or load from the cache in :func:`extensions_dir`) a torch extension ``name`` from CUDA
    ``sources`` with nvcc ``flags``. RuntimeError naming what to install if the toolchain lacks
    something. Call it on a machine with a GPU: the caller says so first if there is none."""
    import torch.utils.cpp_extension as cpp_extension  # noqa: PLC0415 - torch only where an extension is built

    # torch runs ninja by name: the one pip put next to this Python counts too.
    bin_dir = str(Path(sys.executable).parent)
    if shutil.which("ninja") is None and shutil.which("ninja", path=bin_dir):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    nvcc = find_nvcc()
    missing_tools = toolchain_problems(nvcc, shutil.which("ninja"), shutil.which(os.environ.get("CXX", "c++")))
    if missing_tools:
        raise RuntimeError(f"building the CUDA extension {name} needs:\n- " + "\n- ".join(missing_tools))
    cuda_home = nvcc.parent.parent
    cpp_extension.CUDA_HOME = str(cuda_home)  # torch looked for it once, at import, without PyPI's CUDA
    link_dir = _cudart_link_dir(cuda_home)

    build_dir = extensions_dir() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 4))  # ninja compiles the sources in parallel
    t0 = time.time()
    module = cpp_extension.load(
        name=name,
        sources=[str(s) for s in sources],
        extra_cuda_cflags=list(flags),
        extra_include_paths=[str(p) for p in include_paths],
        extra_ldflags=[f"-L{link_dir}"] if link_dir else None,
        build_directory=str(build_dir),
        verbose=verbose,
    )
    if verbose:
        print(f"extension {name} ready in {time.time() - t0:.0f} s ({build_dir})", file=sys.stderr)
    return module
