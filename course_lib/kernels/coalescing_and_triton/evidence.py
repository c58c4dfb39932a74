"""What the compiler makes of the article's two kernels for the H200, without a GPU.

Triton's wheel ships NVIDIA's ptxas, so a kernel can be compiled for sm_90a on any machine and its
machine code (SASS) and shared-memory layouts read. It has to happen in a fresh Python process: in
this one Triton is in interpreter mode on the CPU backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Sequence

import triton

from course_lib import dtypes
from course_lib.kernels.coalescing_and_triton.article import tiled_matmul_transposed_b_kernel
from course_lib.kernels.coalescing_and_triton.tiled import tiled_matmul_kernel


_EVIDENCE_SCRIPT = r"""
import json, os, sys
import course_lib  # picks the CPU backend, which sets TRITON_INTERPRET=1 ...
os.environ["TRITON_INTERPRET"] = "0"  # ... undone before the kernels are decorated
# Newer Triton versions warn that their default for fusing a*b+c into FMA will change; keep it.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
from course_lib.kernels.coalescing_and_triton import evidence
print(json.dumps([evidence.compile_counts(**case) for case in json.loads(sys.argv[1])]))
"""


def b_layout_in_words(layout: str) -> str:
    """Triton's shared-memory layout of B's tile (a TTGIR string, as :func:`compile_counts` reads
    it) in words: swizzled or not, and which index runs fastest in memory.

    ``swizzled_shared<vec, perPhase, maxPhase, order>``: ``maxPhase = 1`` is no swizzle; otherwise
    each row permutes its ``vec``-element chunks by an XOR, with ``maxPhase`` patterns. ``order``
    lists the tile's dimensions fastest first. ``nvmma_shared<swizzlingByteWidth, transposed>`` is
    the layout the tensor cores' ``wgmma`` reads, swizzled within rows of that many bytes;
    ``transposed = true`` stores B's K x N tile K-major. The note "(then transposed in registers)"
    means the buffer holds B^T's N x K tile, turned around after it is loaded.
    """
    import re

    turned = "(then transposed in registers)" in layout
    if layout.startswith("nvmma_shared"):
        width = re.search(r"swizzlingByteWidth = (\d+)", layout)
        k_major = "transposed = true" in layout
        return (f"swizzled for wgmma ({width.group(1) if width else '?'}-byte rows), "
                + ("k fastest (K-major)" if k_major else "n fastest"))
    m = re.search(r"maxPhase = (\d+), order = \[(\d), (\d)\]", layout)
    if not layout.startswith("swizzled_shared") or not m:
        return layout
    phases, fastest = int(m.group(1)), int(m.group(2))
    # B's tile is K x N (dimension 1 is n); B^T's, before it is turned, is N x K (dimension 1 is k).
    index = ("n", "k")[fastest] if turned else ("k", "n")[fastest]
    words = "not swizzled" if phases == 1 else f"swizzled ({phases} patterns)"
    words += ", k fastest (K-major)" if index == "k" else ", n fastest"
    return words + (", B^T turned in registers" if turned else "")


def compile_counts(kernel: str, dtype: str, precision: str, block: int, num_warps: int = 4,
                    num_stages: int = 3, arch: int = 90) -> dict[str, Any]:
    """Compile one of the article's kernels for ``sm_<arch>`` and count instructions (runs in a fresh process)."""
    import re
    from collections import Counter

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = {"plain": tiled_matmul_kernel, "transposed": tiled_matmul_transposed_b_kernel}[kernel]
    ty = "*" + dtypes.get(dtype).triton_type
    names = fn.arg_names
    signature, constexprs = {}, {}
    for n in names[:3]:
        signature[n] = ty
    for n in names[3:12]:
        signature[n] = "i32"
    # The JIT specialises an integer argument equal to 1 into a constant (a unit column stride).
    unit = {"plain": ("stride_ak", "stride_bn", "stride_cn"), "transposed": ("stride_ak", "stride_btk", "stride_cn")}[kernel]
    for n in unit:
        signature[n] = "constexpr"
        constexprs[n] = 1
    for n, v in (("BLOCK_M", block), ("BLOCK_N", block), ("BLOCK_K", block), ("INPUT_PRECISION", precision)):
        signature[n] = "constexpr"
        constexprs[n] = v
    # ... and marks pointers and integers divisible by 16 (true at the article's shape) as such.
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names[:12]) if n not in unit}
    src = ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)
    ck = triton.compile(src, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps, "num_stages": num_stages})
    ttgir, sass = ck.asm["ttgir"], ck.asm["sass"]
    # SASS (what the GPU executes) lines look like "--:-:-:-:1\tLDS.128 R4, [R2+0x100];".
    ops = Counter(re.findall(r"^[^\t\n]*\t(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_.]*)", sass, re.M))

    def total(prefix: str) -> int:
        return sum(v for k, v in ops.items() if k == prefix or k.startswith(prefix + "."))

    # How B's tile is laid out in shared memory: the layout of the buffer the dot reads B from.
    aliases = dict(re.findall(r"^(#shared\d*) = #ttg\.(.*)$", ttgir, re.M))
    loads = re.findall(r"ttg\.local_load %\S+(?: token %\S+)? : !ttg\.memdesc<[^,]*, (#shared\d*)[^>]*> -> tensor<[^,]*, ([^\n]*)", ttgir)
    b_alias, note = None, ""
    for alias, result in loads:
        if "opIdx = 1" in result:
            b_alias = alias
    if b_alias is None:
        for alias, result in loads:
            if "opIdx = 0" not in result:  # B is read into registers and transposed there
                b_alias, note = alias, " (then transposed in registers)"
    if b_alias is None:  # wgmma reads B straight from shared memory: its second operand
        m = re.search(r"ttng\.warp_group_dot %\S+, %\S+, .* \* !ttg\.memdesc<[^,]*, (#shared\d*)", ttgir)
        b_alias = m.group(1) if m else None
    b_layout = re.sub(r"\s+", " ", aliases.get(b_alias, "?")).replace("{", "").replace("}", "") + note

    return {
        "kernel": kernel, "dtype": dtype, "precision": precision, "block": block,
        "triton": triton.__version__, "arch": f"sm_{arch}a" if arch == 90 else f"sm_{arch}",
        "HGMMA (wgmma)": total("HGMMA"),
        "HMMA (mma.sync)": total("HMMA"),
        "FFMA (CUDA cores)": total("FFMA"),
        "LDGSTS 16 B": sum(v for k, v in ops.items() if k.startswith("LDGSTS") and k.endswith(".128")),
        "LDGSTS 4 B": sum(v for k, v in ops.items() if k.startswith("LDGSTS") and not k.endswith((".128", ".64"))),
        "LDS (shared loads)": total("LDS"),
        "LDS.128": ops.get("LDS.128", 0),
        "B tile in shared memory": b_layout,
        "B tile in words": b_layout_in_words(b_layout),
        "layout conversions": ttgir.count("ttg.convert_layout"),
        "shared KiB": ck.metadata.shared // 1024,
    }


def hopper_compile_evidence(cases: Sequence[dict[str, Any]], timeout: float = 300) -> list[dict[str, Any]]:
    """Compile the article's kernels for the H200's architecture (sm_90a) on this machine and count what the
    compiler generated. ``cases``: dicts with ``kernel`` ("plain" or "transposed"), ``dtype``,
    ``precision`` ("ieee" or "tf32") and ``block``. Runs in a subprocess (a few seconds a case)."""
    env = dict(os.environ, COURSE_BACKEND="cpu")
    out = subprocess.run([sys.executable, "-c", _EVIDENCE_SCRIPT, json.dumps(list(cases))],
                         capture_output=True, text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"compiling for sm_90a failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print a list of same-keyed dicts as an aligned text table."""
    keys = list(rows[0])
    width = {k: max(len(str(k)), *(len(str(r[k])) for r in rows)) for k in keys}
    print("  ".join(f"{k:<{width[k]}}" for k in keys))
    for r in rows:
        print("  ".join(f"{str(r[k]):<{width[k]}}" for k in keys))
