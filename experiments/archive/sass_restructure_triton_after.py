"""Compile the Triton stages' kernels for sm_90a offline (old API) and write normalised SASS.

Produced the "after" column of experiments/runs/2026-12-01_sass_restructure_triton/comparison.md,
run against the package course_lib/kernels/coalescing_and_triton/ of that day (its names, e.g.
``INPUT_PRECISION``, have moved since; experiments/sass_triton_fast.py compiles today's fast kernels):
    python experiments/sass_restructure_triton_after.py OUT_DIR
"""
import json, os, re, sys
import course_lib
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from course_lib.kernels import coalescing_and_triton as c04

OUT = sys.argv[1]
PTR = {"fp32": "*fp32", "tf32": "*fp32", "fp16": "*fp16", "bf16": "*bf16"}

def compile_(fn, dtype, ints, constexprs, num_warps, num_stages, ptrs=3):
    names = fn.arg_names
    sig = {n: PTR[dtype] for n in names[:ptrs]}
    for n in names[ptrs:ptrs + ints]:
        sig[n] = "i32"
    sig |= {n: "constexpr" for n in constexprs}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(ptrs + ints)}
    ck = triton.compile(ASTSource(fn, sig, constexprs=constexprs, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                        options={"num_warps": num_warps, "num_stages": num_stages})
    return ck.asm["sass"], ck.metadata.shared

def norm(sass):
    """Control codes and instructions, without the function-name line."""
    return "\n".join(line for line in sass.splitlines() if "\t" in line)

def fast_case(dtype, cfg):
    cst = dict(BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m)
    if cfg.loads == "pointers":
        fn = c04.grouped_matmul_kernel
    else:
        fn = c04.persistent_matmul_kernel if cfg.persistent else c04.fast_matmul_kernel
        cst |= dict(B_K_MAJOR=cfg.b_layout == "nk", C_STORE_SPLIT=cfg.epilogue_split)
    cst["INPUT_PRECISION"] = c04.INPUT_PRECISION[dtype]
    return compile_(fn, dtype, 9, cst, cfg.num_warps, cfg.num_stages)

summary = {}
cfgs = [(d, i, c) for d, cs in c04.FAST_CONFIGS.items() for i, c in enumerate(cs)] + [(d, "portable", c) for d, c in c04.PORTABLE_CONFIGS.items()]
for d, i, cfg in cfgs:
    sass, shared = fast_case(d, cfg)
    name = f"fast_{d}_{i}"
    open(f"{OUT}/{name}.sass", "w").write(norm(sass))
    summary[name] = {"label": cfg.label, "instructions": len(norm(sass).splitlines()), "shared": shared}
t = c04.TILED_CONFIG
for d in ("fp32", "tf32", "fp16", "bf16"):
    for kname, fn in (("tiled", c04.tiled_matmul_kernel), ("transposed_b", c04.tiled_matmul_transposed_b_kernel)):
        sass, shared = compile_(fn, d, 9, dict(BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k, INPUT_PRECISION=c04.INPUT_PRECISION[d]), t.num_warps, t.num_stages)
        open(f"{OUT}/{kname}_{d}.sass", "w").write(norm(sass)); summary[f"{kname}_{d}"] = {"instructions": len(norm(sass).splitlines()), "shared": shared}
    sass, shared = compile_(c04.tiled_matmul_descriptor_kernel, d, 6, dict(BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k, INPUT_PRECISION=c04.INPUT_PRECISION[d]), t.num_warps, t.num_stages)
    open(f"{OUT}/descriptors_{d}.sass", "w").write(norm(sass)); summary[f"descriptors_{d}"] = {"instructions": len(norm(sass).splitlines()), "shared": shared}
sass, shared = compile_(c04.transpose_kernel, "fp32", 5, dict(BLOCK_R=64, BLOCK_C=64), 4, 3, ptrs=2)
open(f"{OUT}/transpose_fp32.sass", "w").write(norm(sass)); summary["transpose_fp32"] = {"instructions": len(norm(sass).splitlines()), "shared": shared}
json.dump(summary, open(f"{OUT}/summary.json", "w"), indent=1)
print(json.dumps(summary, indent=0)[:3000])
