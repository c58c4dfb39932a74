"""What the pinned Triton makes of every Triton kernel of the course, for each GPU generation.

    python tools/triton_targets.py --readme   # compile everything, write tools/triton_targets.json and
                                              # the README's GPU table
    python tools/triton_targets.py --check    # compile everything, compare with the file (exit 1 if it differs)

No GPU is needed: ``triton.compile`` with a ``GPUTarget("cuda", capability, 32)`` runs Triton's whole
code generation for that architecture, and the ptxas and nvdisasm inside the Triton wheel turn the
PTX into machine code (SASS). Each kernel is compiled as the course launches it at 4096 x 4096 x 4096
(row-major operands, so pointers and sizes are multiples of 16 and the unit strides are constants,
as Triton's JIT specialises them), once per course dtype it computes, with the configuration the
course launches it with, for every generation the README's GPU table names (:data:`CAPABILITIES`).

For each it records whether it compiles (else the line of the error that says why), the shared
memory it asks for, and what each ``tl.dot`` became, read from the PTX: ``wgmma`` (Hopper's warpgroup
instruction), ``tcgen05`` (Blackwell's), ``mma`` (``mma.sync``), or ``fma`` (no tensor-core instruction
at all: the dot is unrolled into multiply-adds on the CUDA cores); and the SASS instructions that
confirm it (``HGMMA``/``QGMMA``, ``UTCHMMA``/``UTCQMMA``, ``HMMA``/``QMMA``, ``FFMA``). The README's
GPU table (``--readme`` rewrites it) and ``course_lib.features``' gating say what this file says;
``tests/test_triton_targets.py`` compiles a sample again and compares, and checks the README and the
gating against the file. The whole table takes about 4 minutes on 2 CPU cores.

The compiling happens in a fresh Python process (:func:`compile_in_subprocess`): in a process on the
CPU backend Triton is already in interpreter mode.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
TABLE_FILE = ROOT / "tools" / "triton_targets.json"
# Every generation the README's GPU table names: Turing, Ampere (A100; A10 and RTX 30xx), Ada, Hopper,
# Blackwell (B200; RTX 50xx).
CAPABILITIES = (75, 80, 86, 89, 90, 100, 120)
# Largest shared memory one block may use (opt-in), per compute capability: CUDA C++ Programming
# Guide, "Technical Specifications per Compute Capability". A configuration that asks for more is
# refused at launch (Triton's OutOfResources): autotuning skips it.
MAX_SHARED_PER_BLOCK = {75: 65536, 80: 166912, 86: 101376, 89: 101376, 90: 232448, 100: 232448, 120: 101376}
SIZE = 4096  # every case is compiled as launched at SIZE x SIZE x SIZE, row-major
SM_COUNT = 132  # the H200's SMs: which split-K and few-tile candidates autotuning would consider

# Triton's options when a launch names none (triton/backends/nvidia/compiler.py, CUDAOptions).
DEFAULT_WARPS, DEFAULT_STAGES = 4, 3

# SASS opcodes: a tensor-core instruction, or a fused multiply-add on the CUDA cores.
TENSOR_CORE_OPS = ("UTCHMMA", "UTCQMMA", "UTCMMA", "HGMMA", "QGMMA", "HMMA", "QMMA")
FMA_OPS = ("FFMA",)  # (HFMA2 also appears as ptxas's way to move constants: not counted)


@dataclass(frozen=True)
class Case:
    """One kernel as the course launches it for one dtype: its arguments (``Ptr`` for a tensor, an
    int for a size or stride), its compile-time constants and its launch options."""

    kernel: str  # "module:function", under course_lib
    dtype: str  # the course dtype it computes (what its operands are)
    stage: str  # the stage (or notebook exercise) that launches it
    config: str  # the configuration, in words
    args: dict[str, Any]
    constexprs: dict[str, Any]
    num_warps: int = DEFAULT_WARPS
    num_stages: int = DEFAULT_STAGES

    @property
    def key(self) -> str:
        """e.g. "grouped_matmul_kernel fp16 128x128x32 g8 w4 s2 ptr": unique among the cases."""
        return f"{self.kernel.split(':')[1]} {self.dtype} {self.config}"


@dataclass(frozen=True)
class Ptr:
    """A tensor argument: Triton's element type (``fp16``, ``fp8e4nv``, ...)."""

    ty: str


@dataclass(frozen=True)
class Desc:
    """A tensor descriptor made on the host: Triton's element type and the box it loads or stores."""

    ty: str
    block: tuple[int, ...]


# ---- the cases: every @triton.jit kernel of course_lib, with what launches it ------------------------
K04 = "course_lib.kernels.coalescing_and_triton"
GEMM_DTYPES = ("fp32", "tf32", "fp16", "bf16")
ELEMENTWISE_DTYPES = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}  # vector_add's and row_sums' types


def _gemm_args(ty: str, *, b_k_major: bool = False, names: Sequence[str] | None = None) -> dict[str, Any]:
    """A, B, C and their sizes and strides at SIZE^3, row-major (B as K x N, or its transpose's view)."""
    n = SIZE
    args = dict(a_ptr=Ptr(ty), b_ptr=Ptr(ty), c_ptr=Ptr(ty), M=n, N=n, K=n, stride_am=n, stride_ak=1,
                stride_bk=1 if b_k_major else n, stride_bn=n if b_k_major else 1, stride_cm=n, stride_cn=1)
    return args if names is None else dict(zip(names, args.values()))


def _cases() -> list[Case]:
    from dataclasses import replace

    from course_lib import dtypes
    from course_lib.kernels.coalescing_and_triton import autotune, fast_configs, fast_fp8_configs, fast_launch
    from course_lib.kernels.coalescing_and_triton.tiled import TILED_CONFIG
    from course_lib.exercises import coalescing_and_triton as ex04

    cases: list[Case] = []
    tc = TILED_CONFIG
    tile = dict(BLOCK_M=tc.block_m, BLOCK_N=tc.block_n, BLOCK_K=tc.block_k)
    tile_words = f"{tc.block_m}x{tc.block_n}x{tc.block_k} w{tc.num_warps} s{tc.num_stages}"
    for d in GEMM_DTYPES:
        ty, prec = dtypes.get(d).triton_type, dtypes.get(d).triton_precision
        opts = dict(num_warps=tc.num_warps, num_stages=tc.num_stages)
        cases.append(Case(f"{K04}.tiled:tiled_matmul_kernel", d, "triton_tiled", tile_words, _gemm_args(ty),
                          dict(tile, INPUT_PRECISION=prec), **opts))
        bt = ("a_ptr", "bt_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_btn", "stride_btk",
              "stride_cm", "stride_cn")
        cases.append(Case(f"{K04}.article:tiled_matmul_transposed_b_kernel", d, "triton_tiled_transposed_b",
                          tile_words, _gemm_args(ty, b_k_major=True, names=bt) | {"stride_btn": SIZE, "stride_btk": 1},
                          dict(tile, INPUT_PRECISION=prec), **opts))
        desc = {k: v for k, v in _gemm_args(ty).items() if k not in ("stride_ak", "stride_bn", "stride_cn")}
        cases.append(Case(f"{K04}.tiled:tiled_matmul_descriptor_kernel", d, "triton_tiled_descriptors", tile_words,
                          desc, dict(tile, INPUT_PRECISION=prec), **opts))

        # triton_fast: each of its kernels with the first configuration that launches it - the tuned
        # candidates at the squares, the few-tile candidates (split-K) of a 1024 x 1024 x 8192 product,
        # the small-M ones of a 16 x 4096 x 4096 product, and the portable one (pointers) that runs
        # where none of them fits.
        configs = (*fast_configs.FAST_CONFIGS[d], *autotune.few_tile_configs(d, 1024, 1024, 8192, SM_COUNT),
                   *autotune.small_m_configs(d, 16, SIZE, SIZE, SM_COUNT), fast_configs.PORTABLE_CONFIGS[d])
        seen = set()
        for cfg in configs:
            kernel = ("grouped_matmul_kernel" if cfg.loads == "pointers" else "split_k_matmul_kernel"
                      if cfg.split_k > 1 else "persistent_matmul_kernel" if cfg.persistent else "fast_matmul_kernel")
            if kernel in seen and cfg != fast_configs.PORTABLE_CONFIGS[d]:
                continue
            seen.add(kernel)
            nk = cfg.b_layout == "nk"
            args = _gemm_args(ty, b_k_major=nk)
            meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                        INPUT_PRECISION=prec)
            if kernel != "grouped_matmul_kernel":  # A's and B's descriptors (C's too but for split-K)
                descs = dict(a_desc=Desc(ty, (cfg.block_m, cfg.block_k)),
                             b_desc=Desc(ty, (cfg.block_n, cfg.block_k) if nk else (cfg.block_k, cfg.block_n)))
                sizes = dict(M=SIZE, N=SIZE, K=SIZE)
            if kernel == "split_k_matmul_kernel":
                k_per_split = fast_launch.split_k_ranges(SIZE, cfg.block_k, cfg.split_k)
                args = dict(descs, c_ptr=Ptr(ty), partial_ptr=Ptr("fp32"), counter_ptr=Ptr("i32"), **sizes,
                            stride_cm=SIZE, stride_cn=1, K_PER_SPLIT=k_per_split)
                meta |= dict(SPLIT_K=-(-SIZE // k_per_split), B_K_MAJOR=nk)
            elif kernel != "grouped_matmul_kernel":
                args = dict(descs, c_desc=Desc(ty, (cfg.block_m, cfg.block_n // cfg.epilogue_split)), **sizes)
                meta |= dict(B_K_MAJOR=nk, C_STORE_SPLIT=cfg.epilogue_split)
            cases.append(Case(f"{K04}.fast:{kernel}", d, "triton_fast", cfg.label, args, meta,
                              cfg.num_warps, cfg.num_stages))

    # B^T for TF32's K-major configurations (an fp32 copy)
    r, c = fast_configs.TRANSPOSE_BLOCK
    cases.append(Case(f"{K04}.fast:transpose_kernel", "tf32", "triton_fast", f"{r}x{c} w{fast_configs.TRANSPOSE_WARPS}",
                      dict(src_ptr=Ptr("fp32"), dst_ptr=Ptr("fp32"), R=SIZE, C=SIZE, stride_sr=SIZE, stride_sc=1,
                           stride_dr=SIZE), dict(BLOCK_R=r, BLOCK_C=c), num_warps=fast_configs.TRANSPOSE_WARPS))

    # triton_fp8: e4m3 A and W (both K-major), bf16 C, fp32 scales (one per row: stride 1)
    fp8 = dtypes.get("e4m3").triton_type
    kb = SIZE // 128
    for kernel, cfg in (("fp8_matmul_kernel", fast_fp8_configs.SCALES_CONFIGS["few_tiles"]),
                        ("fp8_matmul_tma_kernel", fast_fp8_configs.SCALES_CONFIGS["large"]),
                        ("fp8_blockscaled_kernel", fast_fp8_configs.BLOCKSCALED_CONFIGS["short_k"]),
                        ("fp8_blockscaled_tma_kernel", fast_fp8_configs.BLOCKSCALED_CONFIGS["large"])):
        tma, blocks = "tma" in kernel, "blockscaled" in kernel
        if tma:  # A's, W's and C's descriptors, made on the host
            args = dict(a_desc=Desc(fp8, (cfg.block_m, cfg.block_k)), w_desc=Desc(fp8, (cfg.block_n, cfg.block_k)),
                        c_desc=Desc("bf16", (cfg.block_m, cfg.block_n)))
        else:
            args = dict(a_ptr=Ptr(fp8), w_ptr=Ptr(fp8), c_ptr=Ptr("bf16"))
        args |= dict(scale_a_ptr=Ptr("fp32"), scale_w_ptr=Ptr("fp32"), M=SIZE, N=SIZE, K=SIZE)
        if not tma:
            args |= dict(stride_am=SIZE, stride_wn=SIZE, stride_cm=SIZE, stride_cn=1)
        args |= dict(stride_sam=kb, stride_swn=kb) if blocks else dict(stride_sa=1, stride_sw=1)
        meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                    ROUND_BF16_BY_HAND=False)
        if not blocks:
            meta["MAX_IMPRECISE_ACC"] = cfg.max_num_imprecise_acc
        if tma:
            meta["PERSISTENT"] = cfg.persistent
        cases.append(Case(f"{K04}.fast_fp8:{kernel}", "e4m3", "triton_fp8", cfg.label, args, meta,
                          cfg.num_warps, cfg.num_stages))

    # notebook 04: the first kernels and the masked GEMM (its puzzles' solutions)
    for d, ty in ELEMENTWISE_DTYPES.items():
        cases.append(Case(f"{K04}.vector_add:vector_add_kernel", d, "04: vector_add", "BLOCK 1024",
                          dict(x_ptr=Ptr(ty), y_ptr=Ptr(ty), out_ptr=Ptr(ty), n=SIZE * SIZE),
                          dict(BLOCK=1024)))
        cases.append(Case(f"{K04}.row_sums:row_sums_kernel", d, "04: row_sums", "16x32",
                          dict(x_ptr=Ptr(ty), out_ptr=Ptr(ty), R=SIZE, C=SIZE, stride_xr=SIZE, stride_xc=1),
                          dict(BLOCK_R=16, BLOCK_C=32)))
    cases.append(Case("course_lib.exercises.coalescing_and_triton:column_sums_kernel", "fp32",
                      "04: column_sums", f"{ex04.COLUMN_SUMS_BLOCK_R}x{ex04.COLUMN_SUMS_BLOCK_C}",
                      dict(x_ptr=Ptr("fp32"), out_ptr=Ptr("fp32"), R=SIZE, C=SIZE, stride_xr=SIZE, stride_xc=1),
                      dict(BLOCK_R=ex04.COLUMN_SUMS_BLOCK_R, BLOCK_C=ex04.COLUMN_SUMS_BLOCK_C)))
    block = ex04.GEMM_PUZZLE_BLOCK
    cases.append(Case("course_lib.exercises.coalescing_and_triton:masked_gemm_kernel", "fp32", "04: masked GEMM",
                      f"{block}x{block}x{block}", _gemm_args("fp32"), dict(BLOCK_M=block, BLOCK_N=block, BLOCK_K=block)))
    return cases


def cases() -> list[Case]:
    """Every case, in a fixed order (importing the kernel modules: call on the CPU backend or after
    ``backend.use_compile_only()``)."""
    return _cases()


# ---- compiling one case (in a process where Triton is not in interpreter mode) -----------------------
def _specialise(fn, case: Case) -> tuple[dict, dict, dict]:
    """Signature, constants and attributes as Triton's JIT makes them for these arguments: an integer
    equal to 1 becomes a constant, pointers (fresh allocations) and integers that are multiples of 16
    are marked divisible by 16 (triton/backends/compiler.py, ``get_int_specialization``)."""
    names = list(fn.arg_names)
    missing = [n for n in names if n not in case.args and n not in case.constexprs]
    extra = [n for n in (*case.args, *case.constexprs) if n not in names]
    if missing or extra:
        raise ValueError(f"{case.kernel}: the case's arguments do not match the kernel's "
                         f"(missing {missing}, unknown {extra}); update tools/triton_targets.py")
    signature, constexprs, attrs = {}, dict(case.constexprs), {}
    for i, n in enumerate(names):
        v = case.args.get(n)
        if n in case.constexprs:
            signature[n] = "constexpr"
        elif isinstance(v, Ptr):
            signature[n] = "*" + v.ty
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, Desc):
            signature[n] = f"tensordesc<{v.ty}[{', '.join(map(str, v.block))}]>"
        elif v == 1:
            signature[n], constexprs[n] = "constexpr", 1
        else:
            signature[n] = "i32"
            if v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return signature, constexprs, attrs


def dot_became(ptx: str, has_dot: bool) -> str:
    """What the kernel's ``tl.dot`` became: "wgmma", "mma" (mma.sync), "fma" (neither: multiply-adds on
    the CUDA cores), or "no dot" for a kernel without one."""
    if "tcgen05.mma" in ptx:
        return "tcgen05"
    if "wgmma.mma_async" in ptx:
        return "wgmma"
    if re.search(r"\bmma\.sync\.", ptx):
        return "mma"
    return "fma" if has_dot else "no dot"


def sass_counts(sass: str) -> dict[str, int]:
    """Tensor-core and FMA instructions in SASS as ``cuobjdump --dump-sass`` lists it, by opcode
    (``HMMA``, ``HGMMA``, ``FFMA`` ...).

    Not Triton's ``asm["sass"]``: its parser (triton/tools/disasm.py, 3.6 and 3.7) reads instruction
    offsets of four hex digits only, so it stops after 4,096 instructions, and the counts of a longer
    kernel (a descriptor kernel compiled for a GPU without TMA, whose copies become masked loads) came
    out short or empty."""
    from course_lib import compiler

    ops = Counter(compiler.SASS_LINE.findall(sass))
    return {k: ops[k] for k in (*TENSOR_CORE_OPS, *FMA_OPS) if ops[k]}


def compile_case(case: Case, capability: int) -> dict[str, Any]:
    """Compile ``case`` for ``sm_<capability>`` and say what came out (call only where Triton compiles:
    see :func:`compile_in_subprocess`)."""
    import importlib
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from course_lib import compiler

    module, name = case.kernel.split(":")
    fn = getattr(importlib.import_module(module), name)
    signature, constexprs, attrs = _specialise(fn, case)
    has_dot = "tl.dot(" in fn.src or any("tl.dot(" in f.src for f in _called_jit_functions(fn))
    try:
        ck = triton.compile(ASTSource(fn, signature, constexprs=constexprs, attrs=attrs),
                            target=GPUTarget("cuda", capability, 32),
                            options={"num_warps": case.num_warps, "num_stages": case.num_stages})
        ptx, cubin = ck.asm["ptx"], ck.asm["cubin"]
    except Exception as e:  # noqa: BLE001 - what the compiler refuses is the result
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else type(e).__name__)
        return {"compiles": False, "error": f"{type(e).__name__}: {first}"[:200]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        sass = compiler.sass(path)
    return {"compiles": True, "dot": dot_became(ptx, has_dot), "sass": sass_counts(sass),
            "shared_bytes": ck.metadata.shared}


def _called_jit_functions(fn) -> list:
    """The ``@triton.jit`` functions ``fn`` calls by name from its module (one level: enough for the
    course's helpers ``matmul_tile_masked`` and ``grouped_tile``)."""
    import importlib

    import triton

    module = importlib.import_module(fn.fn.__module__)
    return [getattr(module, n) for n in dir(module)
            if isinstance(getattr(module, n), triton.runtime.jit.JITFunction) and f"{n}(" in fn.src]


_SCRIPT = r"""
import json, os, sys
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # keep a*b+c fused, the default the course runs with
from course_lib import backend
backend.use_compile_only("Triton kernels compiled for each GPU generation")
sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import triton_targets as tt
wanted = json.loads(sys.argv[1])
by_key = {c.key: c for c in tt.cases()}
for key, cap in wanted:
    print(json.dumps([key, cap, tt.compile_case(by_key[key], cap)]), flush=True)
"""


def compile_in_subprocess(wanted: Iterable[tuple[str, int]], timeout: float = 3600) -> dict[tuple[str, int], dict]:
    """Compile each (case key, capability) of ``wanted`` in a fresh Python process; {(key, cap): result}."""
    import tempfile

    wanted = [list(w) for w in wanted]
    with tempfile.TemporaryDirectory(prefix="triton_targets_") as cache:
        # an empty cache: every kernel is compiled, none read back from an earlier compile
        env = dict(os.environ, COURSE_BACKEND="cpu", TRITON_CACHE_DIR=cache)
        proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(wanted)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"compiling the course's Triton kernels failed:\n{proc.stderr[-3000:]}")
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("["):
            key, cap, result = json.loads(line)
            out[(key, cap)] = result
    return out


# ---- the table ---------------------------------------------------------------------------------------
def table(results: dict[tuple[str, int], dict], all_cases: Sequence[Case]) -> dict[str, Any]:
    """The JSON file's content: the Triton version, then one row per case with a result per target."""
    import triton

    rows = [{"kernel": c.kernel, "dtype": c.dtype, "stage": c.stage, "config": c.config,
             "targets": {f"sm_{cap}": results[(c.key, cap)] for cap in CAPABILITIES}} for c in all_cases]
    return {"triton": triton.__version__, "size": SIZE, "capabilities": [f"sm_{c}" for c in CAPABILITIES],
            "command": "python tools/triton_targets.py", "kernels": rows}


def load(path: Path = TABLE_FILE) -> dict[str, Any]:
    """The committed table (``python tools/triton_targets.py`` writes it)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `python tools/triton_targets.py` to write it")
    return json.loads(path.read_text())


def row_key(row: dict) -> str:
    """A row's :attr:`Case.key`."""
    return f"{row['kernel'].split(':')[1]} {row['dtype']} {row['config']}"


def outcome(data: dict, dtype: str, capability: int, stages: Iterable[str] | None = None) -> str:
    """What the course's Triton GEMMs in ``dtype`` (those of ``stages``; default every stage, not the
    notebook exercises) became on sm_<capability>: "fma", "mma", "wgmma", "tcgen05", or "does not
    compile" if any of them fails. Raises if their tl.dots became different things."""
    got = [r["targets"][f"sm_{capability}"] for r in data["kernels"] if r["dtype"] == dtype
           and (r["stage"] in stages if stages is not None else not r["stage"][:2].isdigit())]
    if not got:
        raise KeyError(f"the table has no Triton kernel in {dtype}")
    if not all(g["compiles"] for g in got):
        return "does not compile"
    dots = {g["dot"] for g in got} - {"no dot"}
    if len(dots) != 1:
        raise ValueError(f"the {dtype} kernels' tl.dot became {sorted(dots)} on sm_{capability}: one README cell "
                         "cannot say that; split the cell")
    return dots.pop()


# ---- the README's GPU table ---------------------------------------------------------------------------
# Its rows by GPU, with what runs live and what is shown from the recording (course_lib.features'
# gating: tests/test_triton_targets.py checks that every capability of a row runs the same stages);
# the column of what Triton's tl.dot becomes is generated from the table.
README_HEADER = ("| GPU (compute capability) | runs live | Triton's `tl.dot` becomes | shown from the H200 recording |\n"
                 "|---|---|---|---|")
README_ROWS = (
    ("T4, RTX 20xx (7.5)", (75,),
     "the numba stages; Triton and cuBLAS in fp32 and fp16 (Triton's fp16 on the CUDA cores, cuBLAS's on "
     "the tensor cores)",
     "everything in TF32, bf16 and FP8; every tensor-core stage"),
    ("A100 (8.0), A10 / RTX 30xx (8.6)", (80, 86),
     "also TF32 and bf16, and the `mma.sync` stages of notebook 07",
     "FP8 (notebook 12); the Hopper stages of notebooks 08 and 09 (built for sm_90a, which runs on "
     "compute capability 9.0 only)"),
    ("L4 / RTX 40xx (8.9), B200 (10.0), RTX 50xx (12.0)", (89, 100, 120),
     "also FP8: notebook 12's Triton kernels and cuBLAS",
     "the Hopper stages of notebooks 08 and 09 (built for sm_90a, which runs on compute capability 9.0 only)"),
    ("H100, H200 (9.0)", (90,), "everything", "—"),
)
README_OLDER = ("| older than 7.5 (V100, P100) | nothing: CUDA 13 builds for 7.5 and newer, so the course runs on "
                "the CPU | — | everything |")
DOT_WORDS = {"fma": "FMA on the CUDA cores", "mma": "`mma.sync`", "wgmma": "`wgmma`", "tcgen05": "`tcgen05.mma`"}
DTYPE_WORDS = {"fp16": "fp16", "bf16": "bf16", "tf32": "TF32", "e4m3": "FP8"}


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def dot_cell(data: dict, capabilities: Sequence[int]) -> str:
    """The README cell for a row's capabilities: for each outcome, the dtypes it holds for (and the
    capabilities, where a row's differ), e.g. "`mma.sync` in fp16, bf16 and TF32; FP8 does not compile"."""
    def phrase(cap: int) -> str:
        by: dict[str, list[str]] = {}
        for d, w in DTYPE_WORDS.items():
            by.setdefault(outcome(data, d, cap), []).append(w)
        parts = [f"{DOT_WORDS[o]} in {_listed(ws)}" for o, ws in by.items() if o != "does not compile"]
        if "does not compile" in by:
            parts.append(f"{_listed(by['does not compile'])} does not compile")
        return "; ".join(parts)

    phrases: dict[str, list[int]] = {}
    for cap in capabilities:
        phrases.setdefault(phrase(cap), []).append(cap)
    if len(phrases) == 1:
        return next(iter(phrases))
    return "; ".join(f"{p} ({', '.join(f'{c // 10}.{c % 10}' for c in caps)})" for p, caps in phrases.items())


def readme_block(data: dict) -> str:
    """The README's GPU table and the sentence under it, as this table says them."""
    fp32 = {outcome(data, "fp32", cap) for cap in CAPABILITIES}
    if fp32 != {"fma"}:
        raise ValueError(f"exact fp32's tl.dot became {sorted(fp32)}: the sentence under the README's table says FMA")
    rows = [README_HEADER]
    rows += [f"| {gpus} | {live} | {dot_cell(data, caps)} | {recorded} |" for gpus, caps, live, recorded in README_ROWS]
    rows.append(README_OLDER)
    sentence = (f"Exact fp32 is FMA on every GPU. The third column is what Triton {data['triton']} (the version "
                "the lock pins) makes of every Triton kernel of the course, compiled for each target without a GPU "
                "by `python tools/triton_targets.py --readme`, which writes `tools/triton_targets.json` and these rows.")
    return "\n".join(rows) + "\n\n" + sentence + "\n"


README = ROOT / "README.md"


def readme_span(text: str) -> tuple[int, int]:
    """Where the block :func:`readme_block` writes starts and ends in the README's text."""
    start = text.find("| GPU (compute capability) |")
    end_marker = "Exact fp32 is FMA on every GPU."
    end = text.find(end_marker, start)
    if start < 0 or end < 0:
        raise ValueError("README.md has no GPU table followed by the sentence 'Exact fp32 is FMA on every GPU. ...'")
    end = text.find("\n", end) + 1
    return start, end


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    parser.add_argument("--readme", action="store_true", help="also rewrite the README's GPU table from the result")
    parser.add_argument("--out", type=Path, default=TABLE_FILE)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ["COURSE_BACKEND"] = "cpu"
    all_cases = cases()
    start = time.monotonic()
    results = compile_in_subprocess([(c.key, cap) for c in all_cases for cap in CAPABILITIES])
    got = table(results, all_cases)
    print(f"compiled {len(all_cases)} kernels x {len(CAPABILITIES)} targets in {time.monotonic() - start:.0f} s")
    text = json.dumps(got, indent=1) + "\n"
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print(f"{args.out}: " + ("what the compiler says" if same else "DIFFERS from what the compiler says"))
        return 0 if same else 1
    args.out.write_text(text)
    print(f"wrote {args.out}")
    if args.readme:
        readme = README.read_text()
        a, b = readme_span(readme)
        README.write_text(readme[:a] + readme_block(got) + readme[b:])
        print(f"rewrote the GPU table of {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
