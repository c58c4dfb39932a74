"""The machine code of every final kernel the course times, compiled on a machine without a GPU, so
that two versions of the library can be compared (``experiments/sass_compare.py BEFORE AFTER``).

    python experiments/sass_snapshot.py OUT_DIR [--repo TREE] [--jobs N] [--only cuda|triton]

``TREE`` (default: the repository this script lives in) is the tree whose ``course_lib`` is imported
and compiled: a ``git worktree`` of an older commit works as it is. Compiled:

* **CUDA**, every ``course_lib/csrc/tc_*.cu`` stage file (tc_0 to tc_6, the bf16 staircase, and
  tc_7_fp8, every template instance its launcher makes), for sm_90a; the stages whose manifest row
  does not need Hopper (tc_0, tc_1) also for sm_80. Through the library's own ``compiler.compile_cubin``
  with its ``NVCC_FLAGS`` (what ``tensor_cores.compile_stage`` does), without the cache. The manifest's
  ``cuda-extension`` stages must all be among these files.
* **triton_fast**, per dtype (fp32, tf32, fp16, bf16): every configuration the library would launch
  on the H200 (132 SMs) at every shape the recording timed it at (``autotune.shape_candidates``:
  FAST_CONFIGS, the few-tile and split-K candidates, the small-M ones), the pointer fallback at one
  unaligned shape (1000 x 1003 x 517), PORTABLE_CONFIGS, and the transpose that copies B^T for a
  configuration that reads B K-major.
* **Triton FP8**, the configuration ``fp8_config`` picks at every shape of the FP8 recording
  (``nvidia_h200_fp8_summary.json``), with one scale per tensor, per row, and in blocks.

Each Triton case is specialised as Triton's JIT specialises a launch (an integer 1 becomes a
constant, pointers and integers divisible by 16 are marked so; Triton's own binding code, as in
Triton 3.6 and 3.7) from the arguments the library's launcher passes - written out below, per kernel,
from ``fast_launch.FastPlan``, ``fast_launch.launch_split_k``, ``fast_launch.transpose``,
``fast_fp8.fp8_matmul`` and ``fast_fp8.fp8_matmul_blockscaled`` - then compiled by ``triton.compile`` for sm_90a. Cases that
compile from the same inputs are compiled once. Every object is found by its name in the package
``course_lib.kernels.coalescing_and_triton`` (its face, or the one submodule that defines it), so
that moving a name between its modules needs no change here; a renamed one goes into ``RENAMED``.

Written to OUT_DIR: ``<set>.sass`` (``cuobjdump --dump-sass`` of one cubin: a CUDA stage's file, or
one Triton case), ``<set>.ptxas.log`` for the CUDA sets, and ``manifest.json``: the tree and its
commit, the tools' versions, and per set what was compiled (source, architecture, flags; or stage,
dtype, kernel, configuration, specialisation and the shapes that launch it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import importlib
import inspect
import json
import multiprocessing
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]  # the repository this script lives in
H200_SMS = 132  # the recording's GPU (its provenance's sm_count is read and must agree)
UNALIGNED = (1000, 1003, 517)  # rows of 1003 or 517 elements break TMA's 16-byte rule in every dtype
TRITON_PACKAGE = "course_lib.kernels.coalescing_and_triton"
# New name -> the name it had in an older tree, for an object the library renamed (none so far).
RENAMED: dict[str, str] = {}


# ---- the tree ---------------------------------------------------------------------------------------
def import_tree(repo: Path):
    """Import ``course_lib`` from ``repo`` (ahead of the environment's editable install) with the
    compile-only backend, and return it."""
    sys.path.insert(0, str(repo))
    import course_lib
    from course_lib import backend

    if Path(course_lib.__file__).resolve().parents[1] != repo:
        raise RuntimeError(f"course_lib was imported from {course_lib.__file__}, not from {repo}")
    backend.use_compile_only("final kernels compiled for sm_90a, never launched")
    return course_lib


def find(name: str):
    """The object ``name`` of the Triton package: from its face, else from its submodules, where every
    module that holds the name must hold the same object (the one that defines it, and its importers)."""
    package = importlib.import_module(TRITON_PACKAGE)
    for wanted in (name, RENAMED.get(name)):
        if wanted is None:
            continue
        if hasattr(package, wanted):
            return getattr(package, wanted)
        found = {}
        for info in pkgutil.iter_modules(package.__path__, TRITON_PACKAGE + "."):
            obj = importlib.import_module(info.name).__dict__.get(wanted)
            if obj is not None:
                found.setdefault(id(obj), (info.name, obj))
        if len(found) == 1:
            return next(iter(found.values()))[1]
        if len(found) > 1:
            raise RuntimeError(f"{wanted} means {len(found)} different things in "
                               f"{', '.join(m for m, _ in found.values())}")
    raise RuntimeError(f"no {name} in {TRITON_PACKAGE} or its modules: add its new name to RENAMED")


def commit(repo: Path) -> str:
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "course_lib"],
                           capture_output=True, text=True).stdout.strip()
    return head + (" + uncommitted changes in course_lib/" if dirty else "")


# ---- CUDA: the stage files ----------------------------------------------------------------------------
def cuda_sets(course_lib) -> list[dict]:
    """One set per stage file and architecture."""
    from course_lib import features, registry

    csrc = Path(course_lib.__file__).resolve().parent / "csrc"
    files = sorted(p for p in csrc.glob("tc_*.cu") if p.stem != "tc_binding")
    rows = {s.name: s for s in registry.course() if s.backend == "cuda-extension"}
    unknown = sorted(set(rows) - {p.stem for p in files})
    if unknown:
        raise RuntimeError(f"the manifest's CUDA stages {unknown} have no csrc/<stage>.cu file")
    out = []
    for path in files:
        row = rows.get(path.stem)  # tc_7_fp8 has no manifest row in older trees: it is Hopper's
        archs = ["sm_90a"] + ([] if row is None or features.HOPPER_SM90A in row.needs else ["sm_80"])
        out += [{"set": f"{path.stem}.{arch}", "kind": "cuda", "source": str(path.relative_to(csrc.parent.parent)),
                 "arch": arch} for arch in archs]
    return out


def compile_cuda(case: dict, repo: Path, out: Path) -> dict:
    from course_lib import compiler

    csrc = repo / "course_lib" / "csrc"
    r = compiler.compile_cubin(repo / case["source"], case["arch"], compiler.NVCC_FLAGS, include_dirs=[csrc],
                               name=case["set"], use_cache=False)
    listing = compiler.sass(r.cubin)
    (out / f"{case['set']}.sass").write_text(listing)
    (out / f"{case['set']}.ptxas.log").write_text(r.ptxas_log)
    return case | {"flags": list(compiler.NVCC_FLAGS) + [compiler.gencode(case["arch"])],
                   "kernels": [{"name": k.name, "registers": k.registers, "spill_bytes": k.spill_store_bytes +
                                k.spill_load_bytes, "stack_bytes": k.stack_bytes} for k in r.kernels],
                   "instructions": len(compiler.SASS_LINE.findall(listing))}


# ---- Triton: what the launchers pass -------------------------------------------------------------------
class Pointer:
    """What the JIT's specialisation reads from a tensor argument: its element type and address."""

    def __init__(self, dtype):
        self.dtype = dtype

    def data_ptr(self) -> int:
        return 1 << 20  # 16-byte aligned, as a torch allocation is


def descriptor(dtype, shape: tuple[int, int], block: list[int]):
    """A tensor descriptor as a plan makes one on the host (``triton.tools.tensor_descriptor``), of a
    row-major ``shape`` matrix on PyTorch's meta device (no memory): the JIT's specialisation reads its
    element type and box."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    t = torch.empty(shape, dtype=dtype, device="meta")
    return TensorDescriptor(t, t.shape, t.stride(), list(block))


def takes_descriptors(kernel: str) -> bool:
    """Whether the tree's ``kernel`` takes tensor descriptors made on the host (``triton_fast``'s since
    commit 6bf746c, Triton FP8's since 7961371) rather than pointers it makes them from."""
    return "a_desc" in find(kernel).arg_names


def fast_launch(dtype: str, cfg, shape: tuple[int, int, int], aligned: bool) -> list[tuple]:
    """(kernel name, args, meta, label) of every kernel ``FastPlan`` launches for ``cfg`` at ``shape`` (A, B,
    C contiguous; B as the benchmarks give it, K x N row-major): the GEMM kernel, and the transpose
    first where the configuration reads B^T."""
    import torch
    import triton

    from course_lib import dtypes

    M, N, K = shape
    elem = dtypes.get(dtype).torch_dtype
    a, b, c = Pointer(elem), Pointer(elem), Pointer(elem)
    launches = []
    if cfg.b_layout == "nk":  # fast_launch.transpose(b): B^T (N x K) from B (K x N); 16-bit types as int16
        moved = torch.int16 if elem.itemsize == 2 else elem
        block_r, block_c = find("TRANSPOSE_BLOCK")
        warps = find("TRANSPOSE_WARPS")
        launches.append(("transpose_kernel", [Pointer(moved), Pointer(moved), K, N, N, 1, K],
                         dict(BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps), f"{block_r}x{block_c} w{warps}"))
        stride_bk, stride_bn = 1, K  # the view B^T.T
    else:
        stride_bk, stride_bn = N, 1
    args = [a, b, c, M, N, K, K, 1, stride_bk, stride_bn, N, 1]
    meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                INPUT_PRECISION=dtypes.get(dtype).triton_precision, num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    if cfg.loads == "pointers" or not aligned:
        launches.append(("grouped_matmul_kernel", args, meta, cfg.label))
    elif cfg.split_k > 1:  # fast_launch.launch_split_k
        k_per_split = find("split_k_ranges")(K, cfg.block_k, cfg.split_k)
        splits = triton.cdiv(K, k_per_split)
        if takes_descriptors("split_k_matmul_kernel"):  # A's and B's descriptors, C's pointer and strides
            args = [*fast_descriptors(elem, cfg, shape)[:2], c, Pointer(torch.float32), Pointer(torch.int32), M, N, K,
                    N, 1, k_per_split]
        else:
            args = args[:3] + [Pointer(torch.float32), Pointer(torch.int32)] + args[3:] + [k_per_split]
        launches.append(("split_k_matmul_kernel", args, meta | dict(SPLIT_K=splits, B_K_MAJOR=cfg.b_layout == "nk"),
                         cfg.label))
    else:
        kernel = "persistent_matmul_kernel" if cfg.persistent else "fast_matmul_kernel"
        if takes_descriptors(kernel):
            args = [*fast_descriptors(elem, cfg, shape), M, N, K]
        launches.append((kernel, args, meta | dict(B_K_MAJOR=cfg.b_layout == "nk", C_STORE_SPLIT=cfg.epilogue_split),
                         cfg.label))
    return launches


def fast_descriptors(elem, cfg, shape: tuple[int, int, int]) -> list:
    """A's, B's (B^T's for a K-major configuration) and C's descriptors as ``FastPlan.front`` makes them."""
    M, N, K = shape
    b = descriptor(elem, (N, K), [cfg.block_n, cfg.block_k]) if cfg.b_layout == "nk" else \
        descriptor(elem, (K, N), [cfg.block_k, cfg.block_n])
    return [descriptor(elem, (M, K), [cfg.block_m, cfg.block_k]), b,
            descriptor(elem, (M, N), [cfg.block_m, cfg.block_n // cfg.epilogue_split])]


def persistent(cfg) -> dict:
    """The descriptor kernels' PERSISTENT constexpr where the configuration walks the tiles (Fp8Config
    has had ``persistent`` since 2026-12-05; a kernel of an older tree has no such parameter)."""
    return {"PERSISTENT": True} if getattr(cfg, "persistent", False) else {}


def fp8_launch(scaling: str, shape: tuple[int, int, int]) -> tuple:
    """(kernel name, args, meta, config label) that ``fp8_matmul`` (one scale per tensor or per row) or
    ``fp8_matmul_blockscaled`` launches at ``shape`` with its default configuration (A M x K and W
    N x K e4m3, contiguous; C bf16)."""
    import torch
    import triton

    M, N, K = shape
    a, w, c = Pointer(torch.float8_e4m3fn), Pointer(torch.float8_e4m3fn), Pointer(torch.bfloat16)
    sa, sw = Pointer(torch.float32), Pointer(torch.float32)
    fp8_config = find("fp8_config")
    # The H200's SMs where fp8_config takes them (since issue 36; before, it held the H200's 132 itself).
    cfg = fp8_config(M, N, K, **({"sms": H200_SMS} if "sms" in inspect.signature(fp8_config).parameters else {}))
    common = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, GROUP_M=cfg.group_m, ROUND_BF16_BY_HAND=False,
                  num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    label = f"{cfg.block_m}x{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages}"
    if scaling == "block":  # BLOCK_K is the blocks' 128; one row of scales per K-block
        kb = triton.cdiv(K, 128)
        try:  # its own default since issue 37 (before, fp8_config's)
            cfg = find("fp8_blockscaled_config")(M, N, K, sms=H200_SMS)
        except RuntimeError:  # an older tree: no fp8_blockscaled_config
            pass
        common = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, GROUP_M=cfg.group_m, ROUND_BF16_BY_HAND=False,
                      num_warps=cfg.num_warps, num_stages=cfg.num_stages)
        label = f"{cfg.block_m}x{cfg.block_n} w{cfg.num_warps} s{cfg.num_stages}"
        if cfg.descriptors and K % 16 == 0 and N % 8 == 0:
            if takes_descriptors("fp8_blockscaled_tma_kernel"):
                args = [*fp8_descriptors(cfg, 128, shape), sa, sw, M, N, K, kb, kb]
            else:
                args = [a, w, c, sa, sw, M, N, K, K, K, N, kb, kb]
            return ("fp8_blockscaled_tma_kernel", args, common | dict(BLOCK_K=128) | persistent(cfg),
                    f"{label} k128 tma")
        return ("fp8_blockscaled_kernel", [a, w, c, sa, sw, M, N, K, K, K, N, 1, kb, kb],
                common | dict(BLOCK_K=128), f"{label} k128")
    per_row = int(scaling == "row")  # the scales' stride: 1 per row, 0 per tensor
    meta = common | dict(BLOCK_K=cfg.block_k, MAX_IMPRECISE_ACC=cfg.max_num_imprecise_acc)
    label += f" k{cfg.block_k}"
    if cfg.descriptors and K % 16 == 0 and N % 8 == 0:  # every row of A, W (e4m3) and C (bf16) 16-byte aligned
        if takes_descriptors("fp8_matmul_tma_kernel"):
            args = [*fp8_descriptors(cfg, cfg.block_k, shape), sa, sw, M, N, K, per_row, per_row]
        else:
            args = [a, w, c, sa, sw, M, N, K, K, K, N, per_row, per_row]
        return "fp8_matmul_tma_kernel", args, meta | persistent(cfg), label + " tma"
    return "fp8_matmul_kernel", [a, w, c, sa, sw, M, N, K, K, K, N, 1, per_row, per_row], meta, label


def fp8_descriptors(cfg, block_k: int, shape: tuple[int, int, int]) -> list:
    """A's, W's (e4m3) and C's (bf16) descriptors as ``Fp8Plan`` makes them."""
    import torch

    M, N, K = shape
    return [descriptor(torch.float8_e4m3fn, (M, K), [cfg.block_m, block_k]),
            descriptor(torch.float8_e4m3fn, (N, K), [cfg.block_n, block_k]),
            descriptor(torch.bfloat16, (M, N), [cfg.block_m, cfg.block_n])]


def bind(kernel: str, args: list, meta: dict):
    """The compile inputs Triton's JIT makes from a launch (its signature, constexprs, attributes and
    options), as in ``JITFunction.run`` of Triton 3.6 and 3.7."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn = find(kernel)
    backend = make_backend(GPUTarget("cuda", 90, 32))
    kwargs = meta | dict(debug=False)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    source = ASTSource(fn, signature, constexprs, attrs)
    key = repr((kernel, sorted(signature.items()), sorted(constexprs.items(), key=repr), sorted(attrs.items(), key=repr),
                sorted(options.__dict__.items())))
    return source, options, key, {"signature": {k: str(v) for k, v in signature.items()},
                                  "constexprs": {str(k): repr(v) for k, v in constexprs.items()},
                                  "attrs": {str(k): repr(v) for k, v in attrs.items()}}


def triton_sets() -> list[dict]:
    """One set per distinct compile of a final Triton kernel (its shapes listed)."""
    import course_lib

    results = Path(course_lib.__file__).resolve().parent / "results"
    recording = json.loads((results / "nvidia_h200.json").read_text())
    if recording["provenance"]["sm_count"] != H200_SMS:
        raise RuntimeError(f"the recording's GPU has {recording['provenance']['sm_count']} SMs, not {H200_SMS}")
    shapes: dict[str, set] = {}
    for r in recording["records"]:
        if r["stage"] == "triton_fast":
            shapes.setdefault(r["dtype"], set()).add((r["M"], r["N"], r["K"]))
    chosen = set()
    for run in recording["provenance"]["rerecorded"]:
        for r in run.get("triton_fast_tuning", []):
            shapes.setdefault(r["dtype"], set()).add((r["M"], r["N"], r["K"]))
            chosen.add((r["dtype"], r["chosen"]))

    shape_candidates, portable = find("shape_candidates"), find("PORTABLE_CONFIGS")
    cases = []  # (stage, dtype, config label, shape, aligned, kernel, args, meta)
    for dtype in find("FAST_CONFIGS"):
        for shape in sorted(shapes[dtype]) + [UNALIGNED]:
            aligned = shape != UNALIGNED
            for cfg in shape_candidates(dtype, *shape, H200_SMS) + (portable[dtype],):
                for kernel, args, meta, label in fast_launch(dtype, cfg, shape, aligned):
                    cases.append(("triton_fast", dtype, label, shape, aligned, kernel, args, meta))
    fp8_summary = json.loads((results / "nvidia_h200_fp8_summary.json").read_text())
    fp8_shapes = sorted({tuple(s) for s in _shapes_in(fp8_summary)})
    for scaling in ("tensor", "row", "block"):
        for shape in fp8_shapes:
            kernel, args, meta, label = fp8_launch(scaling, shape)
            cases.append(("triton_fp8", scaling, label, shape, True, kernel, args, meta))

    sets: dict[str, dict] = {}
    labels = set()
    for stage, dtype, label, shape, aligned, kernel, args, meta in cases:
        labels.add((dtype, label))
        _, _, key, spec = bind(kernel, args, meta)
        name = f"{stage}.{dtype}.{kernel}.{hashlib.sha256(key.encode()).hexdigest()[:10]}"
        entry = sets.setdefault(name, {"set": name, "kind": "triton", "stage": stage, "dtype": dtype, "kernel": kernel,
                                       "configs": [], "shapes": [], "specialization": spec,
                                       "launch": (kernel, _plain(args), meta)})
        if label not in entry["configs"]:
            entry["configs"].append(label)
        entry["shapes"].append(list(shape) + ([] if aligned else ["unaligned"]))
    missing = sorted(chosen - labels)
    if missing:
        print(f"recorded choices not among the candidates compiled (the library's candidates changed since): {missing}")
    return list(sets.values())


def _shapes_in(x):
    """Every [M, N, K] under a key "shape" or "shapes" in a results file."""
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "shape" and isinstance(v, list) and len(v) == 3:
                yield v
            elif k == "shapes" and isinstance(v, list):
                yield from (s for s in v if isinstance(s, list) and len(s) == 3 and all(isinstance(n, int) for n in s))
            else:
                yield from _shapes_in(v)
    elif isinstance(x, list):
        for v in x:
            yield from _shapes_in(v)


def _plain(args: list) -> list:
    """A launch's arguments as JSON: a pointer as its element type, a descriptor as a dict."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    return [str(a.dtype) if isinstance(a, Pointer) else
            {"descriptor": str(a.base.dtype), "shape": list(a.shape), "block": list(a.block_shape)}
            if isinstance(a, TensorDescriptor) else a for a in args]


def _unplain(a):
    """One argument of :func:`_plain` made again."""
    if isinstance(a, str):
        return Pointer(_torch_dtype(a))
    if isinstance(a, dict):
        return descriptor(_torch_dtype(a["descriptor"]), tuple(a["shape"]), a["block"])
    return a


def compile_triton(case: dict, repo: Path, out: Path) -> dict:
    """Compile one Triton set for sm_90a (in a worker process: Triton's compiler holds the GIL)."""
    import triton
    from triton.backends.compiler import GPUTarget

    from course_lib import compiler

    kernel, plain, meta = case["launch"]
    args = [_unplain(a) for a in plain]
    source, options, _, _ = bind(kernel, args, meta)
    ck = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options.__dict__)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / f"{case['set']}.cubin"
        cubin.write_bytes(ck.asm["cubin"])
        listing = compiler.sass(cubin)
    (out / f"{case['set']}.sass").write_text(listing)
    rest = {k: v for k, v in case.items() if k != "launch"}
    return rest | {"arguments": plain, "meta": {k: repr(v) for k, v in meta.items()}, "shared_bytes": ck.metadata.shared,
                   "instructions": len(compiler.SASS_LINE.findall(listing))}


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name.removeprefix("torch."))


def _worker_init(repo: str) -> None:
    import_tree(Path(repo))


def _run(case: dict, repo: str, out: str) -> dict:
    fn = compile_cuda if case["kind"] == "cuda" else compile_triton
    return fn(case, Path(repo), Path(out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--repo", type=Path, default=HERE, help="the tree to compile (default: this repository)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    p.add_argument("--only", choices=("cuda", "triton"))
    args = p.parse_args(argv)
    repo, out = args.repo.resolve(), args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # A cache of its own: Triton would otherwise hand back kernels compiled earlier from the same source.
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="sass_snapshot_triton_cache_")
    course_lib = import_tree(repo)
    import triton

    from course_lib import compiler

    cases = ([] if args.only == "triton" else cuda_sets(course_lib)) + ([] if args.only == "cuda" else triton_sets())
    print(f"{len(cases)} sets to compile from {repo}", flush=True)
    done = []
    # Fresh worker processes (spawned, not forked): each imports the tree with the compile-only backend.
    with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_worker_init, initargs=(str(repo),)) as pool:
        futures = {pool.submit(_run, case, str(repo), str(out)): case["set"] for case in cases}
        for f in concurrent.futures.as_completed(futures):
            done.append(f.result())
            print(f"{len(done)}/{len(cases)} {futures[f]}: {done[-1]['instructions']} instructions", flush=True)
    nvcc = compiler.require_nvcc()
    manifest = {"repo": str(repo), "commit": commit(repo), "triton": triton.__version__,
                "nvcc": compiler.nvcc_version(nvcc), "cuobjdump": str(compiler.find_cuobjdump()),
                "target": "sm_90a (CUDA sets: also sm_80 where the stage runs there)",
                "sets": sorted(done, key=lambda s: s["set"])}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
