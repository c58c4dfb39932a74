"""Tensor cores through a bundled CUDA C++ extension (notebooks 06_tensor_cores and
07_hopper_tensor_cores).

Seven stages, each a real ``.cu`` file in ``course_lib/csrc/`` (shared helpers in ``tc_*.cuh``):

=========================  ================================================================
``tc_0_mma_sync_minimal``  one ``mma.sync.m16n8k16`` per warp, fragments loaded from global memory
``tc_1_mma_sync``          warp-level ``mma.sync.m16n8k16`` fed by ``ldmatrix`` (sm_80 and newer)
``tc_2_wgmma_tma``         Hopper ``wgmma`` reading shared memory that TMA filled, 128-byte swizzle
``tc_3_pipeline``          a ring of shared-memory slots on mbarriers (copies run ahead)
``tc_4_warp_specialized``  producer warpgroup + 2 consumer warpgroups, ``setmaxnreg``, 128x256 tiles
``tc_5_persistent``        persistent CTAs walking a grouped tile order; 2-CTA clusters, B multicast
``tc_6_tma_store``         one wgmma batch kept in flight; epilogue via ``stmatrix`` + TMA store
=========================  ================================================================

The stage's name is also its file (``csrc/tc_4_warp_specialized.cu``), its entry in the extension
(``extension().tc_4_warp_specialized``) and its C++ launcher (``tc::launch_tc_4_warp_specialized``).

Every stage computes ``c = a @ b`` for bf16 ``a`` (M x K) and ``b`` (K x N), row-major, with fp32
accumulation, and returns **bf16**, as ``torch.matmul`` does for bf16 inputs (cuBLAS accumulates in
fp32 and rounds once at the end). The same output type makes the comparison with cuBLAS fair: both
write the same bytes, and ``course_lib.check`` holds both to the bf16 tolerance. An fp32 output
would double the bytes written and measure a different operation.

Shapes: M, N and K must be multiples of 8 - the copy engine (TMA) needs every row of A, B and C to
start on a 16-byte boundary, and stage 1 loads 16 bytes at a time. Beyond that any shape works:
partial tiles at the edges are zero-filled on load and clipped on store by TMA (stages 2-6) or
bounds-checked (stage 1). Stage 0 reads and writes one element at a time and takes any shape.

On a machine with an NVIDIA GPU the extension is built on first use with
``torch.utils.cpp_extension.load`` (ninja, parallel jobs) into a cache outside the repository
(``COURSE_EXTENSIONS_DIR``, else ``$TORCH_EXTENSIONS_DIR/course_lib``, else
``~/.cache/course_lib/extensions``); the architecture is read from the device. Without a GPU the
stages cannot run; this module still compiles their sources with ``nvcc`` when one is installed
(:func:`compile_stage`, with :mod:`course_lib.compiler`) and counts the instructions of the machine
code (:func:`instruction_table`). It also holds a pure-Python model of the address arithmetic the
kernels rely on (swizzle, wgmma descriptors, fragment layouts, tile order) that the tests check.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

import torch

from course_lib import backend, compiler
from course_lib.features import BF16_TENSOR_CORES, HOPPER_SM90A
from course_lib.gemm import new_output, prepare
from course_lib.registry import NotOnThisGPU, Stage, get_stage, register

CSRC = Path(__file__).resolve().parent.parent / "csrc"
# The notebook that teaches each stage: mma.sync from CUDA C++ (06), then Hopper's wgmma path (07).
NOTEBOOK_MMA_SYNC = "06_tensor_cores"
NOTEBOOK_HOPPER = "07_hopper_tensor_cores"
SHAPE_MULTIPLE = 8  # 16-byte rows for TMA: 8 bf16
ALIGNMENT_BYTES = 16

# Flags every build uses (the extension build and the CPU compile check alike). PyTorch adds the
# __CUDA_NO_*_CONVERSIONS__ defines to extension builds; the compile check uses them too, so it
# compiles the same code.
NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "-lineinfo",
    "--expt-relaxed-constexpr",
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
)
# wgmma and setmaxnreg exist only in the "a" (architecture-specific) variant of sm_90. nvcc 13.0's
# -arch=sm_90a shorthand also runs a plain sm_90 pass that rejects them; the -gencode form does not.
SM90A = "-gencode=arch=compute_90a,code=sm_90a"


@dataclasses.dataclass(frozen=True)
class Design:
    """What a stage's kernel is made of (mirrors the constants in its .cu file; a test checks)."""

    stage: str
    title: str
    idea: str
    block: tuple[int, int, int]  # BLOCK_M, BLOCK_N, BLOCK_K
    threads: int
    stages: int  # shared-memory slots (1 = no pipeline)
    smem_bytes: int  # shared memory per CTA (static or dynamic), including alignment slack
    min_arch: str  # "sm_80" or "sm_90a"
    cluster: int = 1
    shape_multiple: int = SHAPE_MULTIPLE  # M, N, K must be multiples of this (1: any shape)

    @property
    def source(self) -> str:
        """The stage's .cu file in csrc/: its name is the stage's, as is its extension entry's."""
        return f"{self.stage}.cu"

    @property
    def hopper(self) -> bool:
        return self.min_arch == "sm_90a"

    @property
    def notebook(self) -> str:
        return NOTEBOOK_HOPPER if self.hopper else NOTEBOOK_MMA_SYNC


def _ring(stages: int, block_m: int, block_n: int, block_k: int = 64, extra: int = 0) -> int:
    """Bytes of a ring of A and B slots, its two mbarriers per slot, staging, and 1 KB of slack."""
    return stages * (block_m + block_n) * block_k * 2 + 2 * 8 * stages + extra + 1024


# Stage 0 stands before the staircase: the smallest correct use of the tensor cores, read line by
# line in notebook 06. DESIGNS is the staircase (stages 1-6) that charts and tables walk;
# ALL_DESIGNS has stage 0 too.
MINIMAL = Design("tc_0_mma_sync_minimal", "mma.sync, fragments from global memory",
                 "4 warps, each one 16x8 tile of C: per 16 of K one mma.sync.m16n8k16 whose A and B "
                 "fragments each lane loads element by element from global memory (zero outside); "
                 "no shared memory", (32, 16, 16), 128, 1, 0, "sm_80", shape_multiple=1)
DESIGNS: tuple[Design, ...] = (
    Design("tc_1_mma_sync", "mma.sync + ldmatrix (warp-level)",
           "8 warps, each a 64x32 piece of C from 4x4 mma.sync.m16n8k16 per 16 of K; ldmatrix(.trans) "
           "from padded shared-memory tiles; next slice loaded to registers while the tensor cores work",
           (128, 128, 32), 256, 1, 128 * 40 * 2 + 32 * 136 * 2, "sm_80"),
    Design("tc_2_wgmma_tma", "wgmma + TMA, 128B swizzle",
           "2 warpgroups x m64n128k16 read A and B straight from shared memory; one thread asks TMA "
           "for each 64-wide K slice; load and multiply take turns",
           (128, 128, 64), 256, 1, 2 * 128 * 64 * 2 + 8 + 1024, "sm_90a"),
    Design("tc_3_pipeline", "5-slot mbarrier pipeline",
           "full/empty mbarriers per slot; copies run up to 5 slices ahead of the tensor cores",
           (128, 128, 64), 256, 5, _ring(5, 128, 128), "sm_90a"),
    Design("tc_4_warp_specialized", "warp specialisation, setmaxnreg, 128x256",
           "producer warpgroup (40 registers) + 2 consumer warpgroups (232 registers) each holding a "
           "64x256 fp32 accumulator; m64n256k16",
           (128, 256, 64), 384, 4, _ring(4, 128, 256), "sm_90a"),
    Design("tc_5_persistent", "persistent + clusters, TMA multicast",
           "one CTA per SM walks tiles in grouped order; 2-CTA clusters share B slices by multicast",
           (128, 256, 64), 384, 4, _ring(4, 128, 256), "sm_90a", cluster=2),
    Design("tc_6_tma_store", "wgmma in flight + TMA-store epilogue",
           "wait_group 1 keeps one wgmma batch queued; accumulators leave through stmatrix into "
           "swizzled shared memory and an asynchronous TMA store",
           (128, 256, 64), 384, 4, _ring(4, 128, 256, extra=2 * 2 * 64 * 64 * 2), "sm_90a", cluster=2),
)
ALL_DESIGNS: tuple[Design, ...] = (MINIMAL,) + DESIGNS
DESIGN = {d.stage: d for d in ALL_DESIGNS}
BINDING = "tc_binding.cu"

# ---- the extension (GPU only) ---------------------------------------------------------------
_EXTENSION = None


def build_plan(capability: tuple[int, int], *, ptx_only: bool = False) -> tuple[list[Path], list[str], str]:
    """Sources, nvcc flags and extension name for a GPU the course treats as compute capability
    ``capability``: on Hopper every stage, for sm_90a; on other GPUs of sm_80 or newer stage 1 only.

    ``ptx_only`` compiles stages 0-1 to PTX alone, which the driver compiles for the real GPU when the
    extension loads: how the course runs an older GPU's build on a newer one (COURSE_ASSUME_CAPABILITY).
    """
    major, minor = capability
    if not BF16_TENSOR_CORES.available(capability):
        raise RuntimeError(f"the tensor-core stages need {BF16_TENSOR_CORES.name} (compute capability "
                           f"{BF16_TENSOR_CORES.where}), and this GPU is treated as {major}.{minor}")
    if HOPPER_SM90A.available(capability) and not ptx_only:
        sources = [CSRC / d.source for d in ALL_DESIGNS] + [CSRC / BINDING]
        flags = [SM90A, "-DTC_WITH_SM90A"]
        name = "course_tensor_cores_sm90a"
    else:  # wgmma does not exist here (or is not assumed to): stages 0 and 1 only
        sources = [CSRC / d.source for d in ALL_DESIGNS if not d.hopper] + [CSRC / BINDING]
        code = f"compute_{major}{minor}" if ptx_only else f"sm_{major}{minor}"
        flags = [f"-gencode=arch=compute_{major}{minor},code={code}"]
        name = f"course_tensor_cores_{code.replace('compute_', 'ptx')}"
    return sources, [f for f in NVCC_FLAGS if f != "-std=c++17"] + flags, name  # torch adds -std


def extension(verbose: bool = False):
    """Build (first call, ~1 minute) or load the extension for this GPU and return the module."""
    global _EXTENSION
    if _EXTENSION is None:
        _EXTENSION = build_extension(verbose=verbose)
    return _EXTENSION


def toolchain_problems(nvcc: Path | None, ninja: str | None, cxx: str | None) -> list[str]:
    """What building the extension lacks, each with what to install (empty: nothing)."""
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
    link_dir = compiler.extensions_dir() / "cudart_link"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "libcudart.so"
    if not link.exists():
        link.symlink_to(versioned[0])
    return link_dir


def load_extension(name: str, sources: Sequence[Path], flags: Sequence[str], include_paths: Sequence[Path] = (CSRC,),
                   verbose: bool = False):
    """Build (or load from the cache) a torch extension from CUDA ``sources`` with nvcc ``flags``:
    the toolchain checks and the cache folder every build of these kernels shares."""
    backend.require_gpu("the tensor-core extension",
                        "runs only on an NVIDIA GPU (on the CPU, compile_stage() shows what the compiler makes of it)")
    import torch.utils.cpp_extension as cpp_extension

    # torch runs ninja by name: the one pip put next to this Python counts too.
    bin_dir = str(Path(sys.executable).parent)
    if shutil.which("ninja") is None and shutil.which("ninja", path=bin_dir):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    nvcc = compiler.find_nvcc()
    missing_tools = toolchain_problems(nvcc, shutil.which("ninja"), shutil.which(os.environ.get("CXX", "c++")))
    if missing_tools:
        raise RuntimeError("building the tensor-core extension needs:\n- " + "\n- ".join(missing_tools))
    cuda_home = nvcc.parent.parent
    cpp_extension.CUDA_HOME = str(cuda_home)  # torch looked for it once, at import, without PyPI's CUDA
    link_dir = _cudart_link_dir(cuda_home)

    build_dir = compiler.extensions_dir() / name
    build_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 4))  # ninja compiles the stages in parallel
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


def build_extension(verbose: bool = False):
    """Build or load the course's extension for this GPU (:func:`build_plan`)."""
    b = backend.get()
    sources, flags, name = build_plan(b.capability, ptx_only=b.assumed)
    return load_extension(name, sources, flags, verbose=verbose)


# ---- the stages: check, allocate, launch ----------------------------------------------------
def make_gemm(stage: str, launcher: Callable[[], Callable] | None = None, **knobs) -> Callable:
    """The GEMM function of a stage: check the operands, allocate C, launch. ``launcher()`` gives
    the function to launch (default: the extension's entry named for the stage), called as
    ``launch(a, b, c, **knobs)``; a knob that is callable is called for its value at launch."""
    multiple = DESIGN[stage].shape_multiple

    def gemm(a: object, b: object) -> object:
        ops = prepare(a, b, stage=stage, dtypes=("bf16",), contiguous=True, shape_multiple=multiple)
        why = get_stage(stage).why_not_here("bf16")
        if why is not None:
            raise NotOnThisGPU(why)
        for name, t in (("a", ops.a), ("b", ops.b)):
            if multiple > 1 and t.data_ptr() % ALIGNMENT_BYTES:  # stage 0 reads element by element
                raise ValueError(
                    f"{stage}: {name} does not start on a {ALIGNMENT_BYTES}-byte boundary (a view "
                    f"into a larger tensor?); pass {name}.clone()"
                )
        launch = launcher() if launcher else getattr(extension(), stage)
        c = new_output(ops.M, ops.N, torch.bfloat16, ops.a.device)
        resolved = {k: (v() if callable(v) else v) for k, v in knobs.items()}
        launch(ops.a, ops.b, c, **resolved)  # launches on torch.cuda.current_stream()
        return ops.give_back(c)

    gemm.__name__ = stage
    gemm.__qualname__ = stage
    gemm.__doc__ = f"{DESIGN[stage].title}: c = a @ b, bf16 in and out, fp32 accumulation ({DESIGN[stage].source})."
    return gemm


tc_0_mma_sync_minimal = make_gemm("tc_0_mma_sync_minimal")
tc_1_mma_sync = make_gemm("tc_1_mma_sync")
tc_2_wgmma_tma = make_gemm("tc_2_wgmma_tma")
tc_3_pipeline = make_gemm("tc_3_pipeline")
tc_4_warp_specialized = make_gemm("tc_4_warp_specialized")
tc_5_persistent = make_gemm("tc_5_persistent")
# Stage 6 runs at most one CTA per SM (the textbook persistent grid): on the H200 that measured
# better than the grid derived from occupancy (stage 5's), at 4096^3 and at 8192^3.
tc_6_tma_store = make_gemm("tc_6_tma_store", group_m=8, max_ctas=backend.sm_count)
GEMMS = {
    "tc_0_mma_sync_minimal": tc_0_mma_sync_minimal,
    "tc_1_mma_sync": tc_1_mma_sync,
    "tc_2_wgmma_tma": tc_2_wgmma_tma,
    "tc_3_pipeline": tc_3_pipeline,
    "tc_4_warp_specialized": tc_4_warp_specialized,
    "tc_5_persistent": tc_5_persistent,
    "tc_6_tma_store": tc_6_tma_store,
}


STAGES = tuple(
    register(
        Stage(
            name=d.stage,
            notebook=d.notebook,
            backend="cuda-extension",
            title=d.title,
            gemms={"bf16": GEMMS[d.stage]},
            gpu_only=True,
            needs=(HOPPER_SM90A,) if d.hopper else (BF16_TENSOR_CORES,),
            shape_multiple=d.shape_multiple,
            sweep=(d is DESIGNS[-1]),
            order=50 + i,
        )
    )
    for i, d in enumerate(ALL_DESIGNS)
)


# ---- compiling without a GPU (course_lib.compiler): ptxas's report and the SASS per stage ------
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
    return compiler.compile_cubin(CSRC / design.source, arch, NVCC_FLAGS, include_dirs=[CSRC], name=stage, nvcc=nvcc,
                                  use_cache=use_cache)


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


# ---- a pure-Python model of the address arithmetic --------------------------------------------
def tc0_fragment_position(operand: str, lane: int, i: int) -> tuple[int, int]:
    """(row, col) inside the 16 x 16 A, 16 x 8 B or 16 x 8 C tile of the element that register
    element ``i`` of ``lane`` holds: stage 0's index formulas (a_row ... c_col in
    tc_0_mma_sync_minimal.cu), written again in Python. A test holds them to the PTX ISA's layout
    (course_lib.viz.fragments) and to the .cu's own functions compiled for the CPU."""
    g, t = lane // 4, lane % 4  # the lane's group (0-7) and its place in the group (0-3)
    if operand == "A":  # 8 bf16 per lane
        return g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)
    if operand == "B":  # 4 bf16 per lane
        return 2 * t + i % 2 + 8 * (i // 2), g
    if operand == "C":  # 4 fp32 per lane
        return g + 8 * (i // 2), 2 * t + i % 2
    raise ValueError(f"operand is 'A', 'B' or 'C', not {operand!r}")


TC0_ELEMENTS = {"A": 8, "B": 4, "C": 4}  # register elements per lane



# These functions restate, element by element, what the kernels and the hardware do, so the tests
# can check that what TMA writes is what wgmma reads, on a machine without a GPU.
SWIZZLE_ROW = 128  # bytes in one swizzled row
SWIZZLE_ATOM = 1024  # bytes after which the XOR pattern repeats
ELEM = 2  # bytes per bf16


def swizzle_128b(byte_offset: int) -> int:
    """The 128-byte swizzle as an address function (CUTLASS's Swizzle<3,4,3>): the 16-byte chunk
    index, bits [4:6], is XORed with the row index within the 1024-byte atom, bits [7:9]."""
    return byte_offset ^ (((byte_offset >> 7) & 0x7) << 4)


def tma_box_offset(row: int, col: int, box_cols: int = 64) -> int:
    """Byte offset at which TMA with CU_TENSOR_MAP_SWIZZLE_128B puts element (row, col) of a box
    whose rows are ``box_cols`` bf16 (= 128 bytes), the box starting on a 1024-byte boundary."""
    assert box_cols * ELEM == SWIZZLE_ROW and 0 <= col < box_cols
    return swizzle_128b(row * SWIZZLE_ROW + col * ELEM)


def descriptor_encode(x: int) -> int:
    return (x & 0x3FFFF) >> 4


def make_descriptor(start: int, lbo: int, sbo: int, swizzle_mode: int = 1, base_offset: int = 0) -> int:
    """A wgmma shared-memory matrix descriptor (PTX ISA 9.7.15.5.1.2.2)."""
    return (
        descriptor_encode(start)
        | descriptor_encode(lbo) << 16
        | descriptor_encode(sbo) << 32
        | (base_offset & 0x7) << 49
        | (swizzle_mode & 0x3) << 62
    )


def decode_descriptor(desc: int) -> dict[str, int]:
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 0x7,
        "swizzle_mode": (desc >> 62) & 0x3,
    }


# The descriptor fields the kernels use (tc_hopper.cuh: a_descriptor, b_descriptor).
A_LBO, A_SBO = 16, 1024  # K-major: LBO unused ("assumed 1"), SBO = next 8 rows
B_LBO, B_SBO = 64 * SWIZZLE_ROW, 1024  # N-major: LBO = next 64 columns (next box), SBO = next 8 k


def a_descriptor(tile_base: int, warpgroup_row0: int, k16: int) -> int:
    """Descriptor for a 64 x 16 slice of a K-major A tile with 128-byte rows (as in the kernels)."""
    return make_descriptor(tile_base + warpgroup_row0 * SWIZZLE_ROW + k16 * 16 * ELEM, A_LBO, A_SBO)


def b_descriptor(tile_base: int, k16: int) -> int:
    """Descriptor for a 16 x N slice of an N-major B tile stored as 64 x 64 boxes (as in the kernels)."""
    return make_descriptor(tile_base + k16 * 16 * SWIZZLE_ROW, B_LBO, B_SBO)


def wgmma_k_major_address(desc: int, row: int, k: int) -> int:
    """Where wgmma reads element (row, k) of a K-major 128B-swizzled operand described by ``desc``:
    canonical layout ((8,m),(T,2k)):((8T,SBO),(1,T)) (PTX ISA 9.7.15.5.1.2.1.3), in bytes, then
    the swizzle applied to the address."""
    d = decode_descriptor(desc)
    assert d["swizzle_mode"] == 1 and 0 <= k < 16
    linear = d["start"] + (row // 8) * d["sbo"] + (row % 8) * SWIZZLE_ROW + k * ELEM
    return swizzle_128b(linear)


def wgmma_mn_major_address(desc: int, n: int, k: int) -> int:
    """Where wgmma reads element (k, n) of an MN-major 128B-swizzled operand: canonical layout
    ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) in units of elements, T = 8 for bf16."""
    d = decode_descriptor(desc)
    assert d["swizzle_mode"] == 1 and 0 <= k < 16
    linear = d["start"] + (n % 64) * ELEM + (n // 64) * d["lbo"] + (k % 8) * SWIZZLE_ROW + (k // 8) * d["sbo"]
    return swizzle_128b(linear)


def wgmma_accumulator_position(thread: int, i: int, n_tile: int) -> tuple[int, int]:
    """(row, column) of accumulator register d[i] of thread ``thread`` (0..127) of a warpgroup for
    m64nNk16 (PTX ISA 9.7.15.5.1.1, matrix D)."""
    assert 0 <= thread < 128 and 0 <= i < n_tile // 2
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * ((i // 2) % 2)
    col = 8 * (i // 4) + 2 * (lane % 4) + i % 2
    return row, col


def stmatrix_staging_address(thread: int, j: int) -> int:
    """Byte offset (within one consumer's staging buffer of 64 x 64 boxes) of the row that lane
    ``thread % 32`` addresses for stmatrix number ``j`` (16 columns each) - as in tc_6_tma_store.cu."""
    warp, lane = divmod(thread, 32)
    row = warp * 16 + ((lane // 8) % 2) * 8 + lane % 8
    col = j * 16 + (lane // 16) * 8
    box, chunk = divmod(col, 64)
    return box * 64 * 64 * ELEM + row * SWIZZLE_ROW + ((chunk // 8) ^ (row % 8)) * 16


def stmatrix_fragment_position(lane: int, matrix: int, element: int) -> tuple[int, int]:
    """(row, column) within 8x8 matrix ``matrix`` of the bf16 ``element`` (0 or 1) that lane
    ``lane`` supplies to stmatrix (the ldmatrix/mma fragment: row lane/4, columns 2*(lane%4)+e)."""
    return lane // 4, 2 * (lane % 4) + element


def grouped_tile_order(cluster_rows: int, cols: int, group_m: int) -> list[tuple[int, int]]:
    """The order in which the persistent stages hand out cluster tiles (tc_schedule.cuh)."""
    out = []
    per_group = group_m * cols
    for t in range(cluster_rows * cols):
        first = (t // per_group) * group_m
        rows = min(cluster_rows - first, group_m)
        r = t % per_group
        out.append((first + r % rows, r // rows))
    return out


def persistent_ctas(cluster_tiles: int, max_clusters: int, cluster: int) -> int:
    """CTAs of a persistent launch: as many clusters as fit, trimmed so the waves come out even."""
    waves = -(-cluster_tiles // max_clusters)
    return -(-cluster_tiles // waves) * cluster


def whole_tile_efficiency(cluster_tiles: int, clusters: int) -> float:
    """The share of the clusters' time whole tiles keep busy: tiles handed out in rounds of
    ``clusters``, the last round maybe partly empty (tc_stream_k.cuh)."""
    rounds = -(-cluster_tiles // clusters)
    return cluster_tiles / (rounds * clusters) if rounds else 1.0


# Stage 6 switches to stream-K below this whole-tile efficiency, for K of at least STREAM_K_MIN_SLICES
# slices of 64 (tc_6_tma_store.cu).
STREAM_K_BELOW = 0.8
STREAM_K_MIN_SLICES = 32


def stage6_schedule(M: int, N: int, K: int, clusters: int = 66) -> str:
    """How stage 6 covers an M x N x K product with ``clusters`` resident 2-CTA clusters (66 on the
    H200): "whole tiles" or "stream-K" (the launcher's rule in tc_6_tma_store.cu)."""
    cluster_tiles = -(-(-(-M // 128)) // 2) * -(-N // 256)
    few = whole_tile_efficiency(cluster_tiles, clusters) < STREAM_K_BELOW
    return "stream-K" if few and -(-K // 64) >= STREAM_K_MIN_SLICES else "whole tiles"


def stream_k_work(cluster_tiles: int, clusters: int, slices: int,
                  stream_k: bool = True) -> list[list[tuple[int, int, int]]]:
    """Each cluster's work units (tile, first K slice, end K slice), in order, as ``WorkCursor`` in
    tc_stream_k.cuh hands them out: whole waves of whole tiles round robin, then the rest shared out
    by slices."""
    dp_tiles = cluster_tiles - cluster_tiles % clusters if stream_k else cluster_tiles
    split = (cluster_tiles - dp_tiles) * slices
    out = []
    for c in range(clusters):
        units = [(t, 0, slices) for t in range(c, dp_tiles, clusters)]
        pos, end = split * c // clusters, split * (c + 1) // clusters
        while pos < end:
            k = pos % slices
            k_end = min(slices, k + end - pos)
            units.append((dp_tiles + pos // slices, k, k_end))
            pos += k_end - k
        out.append(units)
    return out


def stream_k_contributors(cluster_tiles: int, clusters: int, slices: int, owner: int, tile: int) -> list[int]:
    """The clusters whose partial sums the owner of split tile ``tile`` adds (the kernel's loop)."""
    dp_tiles = cluster_tiles - cluster_tiles % clusters
    split = (cluster_tiles - dp_tiles) * slices

    def start(c: int) -> int:
        return split * c // clusters

    tile_end = (tile - dp_tiles + 1) * slices
    out, c = [], owner + 1
    while c < clusters and start(c) < tile_end:
        if start(c + 1) > start(c):
            out.append(c)
        c += 1
    return out


# ---- for the notebook ---------------------------------------------------------------------------
# Notebooks 06 and 07 print parts of the sources, each between two marker lines that name it:
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


def resource_table(results: dict[str, compiler.CompileResult]) -> str:
    """ptxas's report for every kernel, one line each, as text (at most 100 characters wide)."""
    rows = [f"{'stage':<23}{'kernel':<20}{'threads':>8}{'regs':>6}{'spills':>8}{'stack':>7}{'smem/CTA':>10}  tile, slots"]
    for stage, r in results.items():
        d = DESIGN[stage]
        for k in r.kernels:
            smem = k.static_smem_bytes or d.smem_bytes
            rows.append(
                f"{stage:<23}{k.name:<20}{d.threads:>8}{k.registers:>6}{k.spill_store_bytes + k.spill_load_bytes:>8}"
                f"{k.stack_bytes:>7}{smem / 1024:>8.1f}KB  {d.block[0]}x{d.block[1]}x{d.block[2]}, {d.stages}"
            )
    return "\n".join(rows)


def sass_mix_by_kernel(cubin: Path) -> dict[str, collections.Counter]:
    """How often each SASS opcode occurs in each kernel of a cubin (demangled name -> counts): a file
    with several kernels (primer_fp32.cu) counted kernel by kernel."""
    out = {}
    for part in re.split(r"\n\s*Function : ", compiler.sass(cubin))[1:]:
        out[compiler.demangle(part.split()[0])] = collections.Counter(compiler.SASS_LINE.findall(part))
    return out


def instruction_table(results: dict[str, compiler.CompileResult],
                      opcodes: Iterable[str] = tuple(SASS_HIGHLIGHTS)) -> str:
    """How many of each highlighted SASS opcode every stage's cubin holds, as text (each column as
    wide as its opcode: pick the opcodes to keep a table narrow)."""
    opcodes = list(opcodes)
    widths = [max(len(op) + 2, 6) for op in opcodes]
    rows = [f"{'stage':<23}" + "".join(f"{op:>{w}}" for op, w in zip(opcodes, widths))]
    for stage, r in results.items():
        mix = compiler.sass_instruction_mix(r.cubin)
        rows.append(f"{stage:<23}" + "".join(f"{mix[op]:>{w}}" for op, w in zip(opcodes, widths)))
    return "\n".join(rows)
