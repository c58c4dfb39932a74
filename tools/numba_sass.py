"""Compile the course's numba kernels to PTX and SASS without running them; report resources.

    python tools/numba_sass.py [--out course_lib/results/numba_kernels_sm90.json] [--dump DIR]

Needs numba-cuda with NVVM (``pip install "numba-cuda[cu13]"``) and ``ptxas``/``cuobjdump`` on the
PATH (or the ones inside the Triton wheel, used when the PATH has none). No GPU is needed: the
kernels are compiled for sm_90 (the H200) and never launched. For each kernel it records the
registers per thread, spill and stack bytes, shared memory, and the SASS instruction mix (FFMA,
LDS/LDS.128, LDG, LDL/STL for local memory) — the evidence notebook 03 shows for what limits a
Python-written kernel.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from course_lib import backend  # noqa: E402 - course_lib chooses a backend; numba is not imported yet

# Compile-only: the kernels are defined by numba's real CUDA target but never launched, so neither a
# GPU nor the simulator is wanted.
backend.use_compile_only("PTX/SASS inspection")

from numba import cuda  # noqa: E402

from course_lib.kernels import naive, shared_memory_tiling, thread_coarsening  # noqa: E402

SIG = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
CC = (9, 0)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    if path.exists():
        return str(path)
    raise SystemExit(f"{name} not found: install the CUDA toolkit or Triton")


def kernels() -> dict[str, object]:
    ks = {
        "naive": naive.naive_kernel,
        "naive_x_along_rows": naive.naive_x_along_rows_kernel,
        "coarsened_2x2": thread_coarsening.coarsened_2x2_kernel,
    }
    for t in shared_memory_tiling.TILE_SIZES:
        ks[f"shared_memory_tiling_t{t}"] = shared_memory_tiling.make_tiled_kernel(t)
    ks["register_tiling"] = thread_coarsening.make_register_tiling_kernel(thread_coarsening.DEFAULT_CONFIG)
    for name, cfg in thread_coarsening.SWEEP_CONFIGS.items():
        ks[name] = thread_coarsening.make_register_tiling_kernel(cfg)
    return ks


SASS_CLASSES = ("FFMA", "LDS", "LDS.64", "LDS.128", "STS", "LDG", "STG", "LDL", "STL", "BAR", "IMAD", "ISETP")


def inspect(name: str, dispatcher, dump: Path | None) -> dict:
    ptx, _ = cuda.compile_ptx(dispatcher.py_func, SIG, cc=CC, fastmath=True)
    with tempfile.TemporaryDirectory() as tmp:
        ptx_path, cubin = Path(tmp) / f"{name}.ptx", Path(tmp) / f"{name}.cubin"
        ptx_path.write_text(ptx)
        r = subprocess.run([_tool("ptxas"), "-arch=sm_90", "-v", str(ptx_path), "-o", str(cubin)], capture_output=True, text=True, check=True)
        sass = subprocess.run([_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    report = r.stderr
    regs = int(re.search(r"Used (\d+) registers", report).group(1))
    stack = int(re.search(r"(\d+) bytes stack frame", report).group(1))
    spill_st = int(re.search(r"(\d+) bytes spill stores", report).group(1))
    spill_ld = int(re.search(r"(\d+) bytes spill loads", report).group(1))
    smem = re.search(r"(\d+) bytes smem", report)
    ops = Counter()
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?P\d+\s+)?([A-Z0-9]+(?:\.[A-Z0-9]+)*)", line)
        if not m:
            continue
        op = m.group(1)
        base = op.split(".")[0]
        if base == "LDS":
            width = next((p for p in op.split(".")[1:] if p in ("64", "128")), None)
            ops["LDS." + width if width else "LDS"] += 1
        elif base in SASS_CLASSES:
            ops[base] += 1
        ops["total"] += 1
    if dump:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{name}.sass").write_text(sass)
    return {
        "registers": regs,
        "stack_bytes": stack,
        "spill_store_bytes": spill_st,
        "spill_load_bytes": spill_ld,
        "shared_bytes": int(smem.group(1)) if smem else 0,
        "sass": {k: ops.get(k, 0) for k in SASS_CLASSES + ("total",)},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "course_lib" / "results" / "numba_kernels_sm90.json")
    p.add_argument("--dump", type=Path, help="also write each kernel's SASS here")
    args = p.parse_args()
    ptxas_version = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    result = {
        "provenance": {
            "what": "numba kernels compiled for sm_90 without running (tools/numba_sass.py)",
            "numba": importlib.metadata.version("numba"),
            "numba_cuda": importlib.metadata.version("numba-cuda"),
            "nvvm": _nvvm_version(),
            "ptxas": ptxas_version,
            "date": datetime.date.today().isoformat(),
        },
        "kernels": {},
    }
    for name, k in kernels().items():
        result["kernels"][name] = inspect(name, k, args.dump)
        r = result["kernels"][name]
        print(f"{name:<32} regs {r['registers']:>3}  stack {r['stack_bytes']:>4}  spills {r['spill_store_bytes']:>4}/{r['spill_load_bytes']:<4} smem {r['shared_bytes']:>6}  {r['sass']}")
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print("wrote", args.out)
    return 0


def _nvvm_version() -> str:
    for dist in ("nvidia-nvvm", "nvidia-cuda-nvcc-cu12"):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            pass
    return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
