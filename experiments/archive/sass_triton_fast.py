"""Compile triton_fast's kernels for sm_90 without a GPU and write each one's normalised SASS and
PTX, so that two versions of ``course_lib/kernels/coalescing_and_triton/fast.py`` can be compared.

    COURSE_BACKEND=cpu PYTHONPATH=. python experiments/sass_triton_fast.py OUT_DIR
    python experiments/sass_triton_fast.py --compare BEFORE_DIR AFTER_DIR

The configurations: every candidate of FAST_CONFIGS and PORTABLE_CONFIGS at 4096^3; PORTABLE_CONFIGS
and the first candidate through pointers also at an unaligned shape (launch_fast's fallback); one
persistent fp32 configuration (not a candidate: so that every kernel is compiled in every dtype);
the heuristic's extra candidates for few tiles (768 x 2304 x 16384) and for small M
(16 x 4096 x 4096); and every configuration the H200's recording chose (``triton_fast_tuning`` in
course_lib/results/nvidia_h200.json) at the shape it was chosen for. Each goes through the kernel
``launch_fast`` would launch, with the arguments it would pass, specialised as Triton's JIT
specialises them (a stride of 1 becomes a constant, pointers and integers divisible by 16 are marked
so), then ``triton.compile`` for ``GPUTarget("cuda", 90, 32)`` (sm_90a) with the configuration's
warps and stages. Written per case: ``<case>.sass`` (control codes and instructions: the lines of
``asm["sass"]`` with a tab, which leaves out the function name and the line table) and
``<case>.ptx`` (without ``.loc``/``.file`` lines and the debug sections), plus ``summary.json``
(kernel, configuration, shape, instruction count, registers, shared memory, sha256 of each text).
``--compare`` prints one row per case.

Made for experiments/runs/2026-12-02_sass_flatten_triton_fast/ (fast.py's kernels flattened).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

PRECISION = {"fp32": "ieee", "tf32": "tf32", "fp16": "ieee", "bf16": "ieee"}  # tl.dot's input_precision
LABEL = re.compile(r"(\d+)x(\d+)x(\d+) g(\d+) w(\d+) s(\d+)((?: \S+)*)$")


def parse_label(label: str):
    """The FastConfig a label (``FastConfig.label``) was made from."""
    from course_lib.kernels.coalescing_and_triton.fast import FastConfig

    m = LABEL.match(label)
    bm, bn, bk, g, w, s = (int(x) for x in m.groups()[:6])
    extra = m.group(7).split()
    split_k = next((int(e[6:]) for e in extra if e.startswith("splitK")), 1)
    return FastConfig(bm, bn, bk, group_m=g, num_warps=w, num_stages=s, b_layout="nk" if "B^T" in extra else "kn",
                      loads="pointers" if "ptr" in extra else "descriptors", persistent="persistent" in extra,
                      epilogue_split=2 if "split2" in extra else 1, split_k=split_k)


class Pointer:
    """What the JIT's specialisation reads from a tensor argument: its address and element type."""

    def __init__(self, dtype):
        self.dtype = dtype

    def data_ptr(self) -> int:
        return 1 << 20  # 16-byte aligned, as a torch allocation is


def cases():
    """(name, dtype, config, (M, N, K)) for every configuration compiled."""
    from course_lib.kernels.coalescing_and_triton import autotune, fast
    from course_lib.kernels.coalescing_and_triton import autotune, fast

    out = {}
    for dtype, configs in fast.FAST_CONFIGS.items():
        for i, cfg in enumerate(configs):
            out[f"fast_{dtype}_{i}"] = (dtype, cfg, (4096, 4096, 4096))
    for dtype, cfg in fast.PORTABLE_CONFIGS.items():
        out[f"portable_{dtype}"] = (dtype, cfg, (4096, 4096, 4096))
        out[f"portable_{dtype}_unaligned"] = (dtype, cfg, (1000, 1003, 517))
        # Where a matrix breaks TMA's rules, launch_fast runs the tuned configuration through pointers.
        first = fast.FAST_CONFIGS[dtype][0]
        out[f"fallback_{dtype}_unaligned"] = (dtype, replace(first, loads="pointers", split_k=1), (1000, 1003, 517))
    # Every kernel in every dtype: exact fp32 has no persistent candidate, so one is made up.
    out["persistent_fp32_not_a_candidate"] = ("fp32", replace(fast.FAST_CONFIGS["fp32"][0], persistent=True),
                                              (4096, 4096, 4096))
    seen = {(d, c.label) for d, c, _ in out.values()}
    # The heuristic's extra candidates for few tiles (a GPT-2 weight gradient) and for small M (decode).
    for dtype in fast.FAST_CONFIGS:
        for shape, more in (((768, 2304, 16384), autotune.few_tile_configs), ((16, 4096, 4096), autotune.small_m_configs)):
            for cfg in more(dtype, *shape, 132):
                if (dtype, cfg.label) not in seen:
                    seen.add((dtype, cfg.label))
                    out[f"{more.__name__[:-8]}_{dtype}_{len(out)}"] = (dtype, cfg, shape)
    recording = json.loads(Path("course_lib/results/nvidia_h200.json").read_text())
    for run in recording["provenance"]["rerecorded"]:
        for row in run.get("triton_fast_tuning", []):
            key = (row["dtype"], row["chosen"]) + (("M = 1",) if row["M"] == 1 else ())  # 1 is specialised
            if row["aligned"] and key not in seen:
                seen.add(key)
                out[f"chosen_{row['dtype']}_{len(out)}"] = (row["dtype"], parse_label(row["chosen"]),
                                                           (row["M"], row["N"], row["K"]))
    return out


def launch(dtype: str, cfg, shape):
    """The kernel, arguments and meta-parameters launch_fast passes for ``cfg`` at ``shape`` (all
    three matrices aligned, so descriptors are used unless the configuration asks for pointers)."""
    import torch
    import triton
    from course_lib.kernels.coalescing_and_triton import fast

    M, N, K = shape
    elem = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    a, b, c = Pointer(elem), Pointer(elem), Pointer(elem)
    # B as a K x N matrix: given (strides N, 1) or the view B^T.T of a transposed copy (strides 1, K).
    stride_bk, stride_bn = (1, K) if cfg.b_layout == "nk" else (N, 1)
    args = [a, b, c, M, N, K, K, 1, stride_bk, stride_bn, N, 1]
    meta = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
                INPUT_PRECISION=PRECISION[dtype])
    if cfg.loads == "pointers":
        return fast.grouped_matmul_kernel, args, meta
    if cfg.split_k > 1:
        k_per_split = fast.split_k_ranges(K, cfg.block_k, cfg.split_k)
        splits = triton.cdiv(K, k_per_split)
        args = args[:3] + [Pointer(torch.float32), Pointer(torch.int32)] + args[3:] + [k_per_split]
        return fast.split_k_matmul_kernel, args, meta | dict(SPLIT_K=splits, B_K_MAJOR=cfg.b_layout == "nk")
    meta |= dict(B_K_MAJOR=cfg.b_layout == "nk", C_STORE_SPLIT=cfg.epilogue_split)
    return (fast.persistent_matmul_kernel if cfg.persistent else fast.fast_matmul_kernel), args, meta


def compile_case(dtype: str, cfg, shape):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    fn, args, meta = launch(dtype, cfg, shape)
    backend = make_backend(GPUTarget("cuda", 90, 32))
    kwargs = meta | dict(num_warps=cfg.num_warps, num_stages=cfg.num_stages, debug=False)
    bind = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = bind(*args, **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    ck = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                        options=options.__dict__)
    return fn.__name__, ck


def registers(cubin: bytes) -> int:
    """Registers per thread, as ptxas allotted them (cuobjdump --dump-resource-usage)."""
    import subprocess
    import tempfile

    from triton import knobs

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([knobs.nvidia.cuobjdump.path, "--dump-resource-usage", f.name], capture_output=True,
                               text=True, check=True).stdout
    return int(re.search(r"REG:(\d+)", usage).group(1))


def normalise_sass(sass: str) -> str:
    return "\n".join(line for line in sass.splitlines() if "\t" in line) + "\n"


def normalise_ptx(ptx: str) -> str:
    ptx = ptx.split("\t.section\t.debug")[0]
    return "\n".join(line for line in ptx.splitlines()
                     if not line.lstrip().startswith((".loc", ".file", "$L__", "//"))) + "\n"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for name, (dtype, cfg, shape) in cases().items():
        kernel, ck = compile_case(dtype, cfg, shape)
        sass, ptx = normalise_sass(ck.asm["sass"]), normalise_ptx(ck.asm["ptx"])
        (out / f"{name}.sass").write_text(sass)
        (out / f"{name}.ptx").write_text(ptx)
        summary[name] = {"dtype": dtype, "config": cfg.label, "shape": list(shape), "kernel": kernel,
                         "instructions": sass.count("\n"), "shared": ck.metadata.shared,
                         "registers": registers(ck.asm["cubin"]), "sass_sha256": sha(sass), "ptx_sha256": sha(ptx)}
        print(name, summary[name], flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")


def compare(before: Path, after: Path) -> None:
    old = json.loads((before / "summary.json").read_text())
    new = json.loads((after / "summary.json").read_text())
    print("| case | dtype | config | M x N x K | kernel | SASS instructions | SASS | PTX |")
    print("|---|---|---|---|---|---|---|---|")
    for name in sorted(old.keys() | new.keys()):
        o, n = old.get(name), new.get(name)
        if o is None or n is None:
            print(f"| {name} | only {'after' if o is None else 'before'} |")
            continue
        same = lambda key: "same" if o[key] == n[key] else f"**differs** ({o[key]} / {n[key]})"  # noqa: E731
        print(f"| {name} | {o['dtype']} | {o['config']} | {'x'.join(map(str, o['shape']))} | {o['kernel']} | "
              f"{o['instructions']} / {n['instructions']} | {same('sass_sha256')} | {same('ptx_sha256')} |")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        from course_lib import backend

        if hasattr(backend, "use_compile_only"):  # Triton's compiler, not its interpreter
            backend.use_compile_only("triton_fast's kernels compiled for sm_90, never launched")
        else:  # the course_lib of 2026-12-01, where the "before" side of experiments/runs/
            os.environ["TRITON_INTERPRET"] = "0"  # 2026-12-02_sass_flatten_triton_fast was compiled
        write(Path(sys.argv[1]))
