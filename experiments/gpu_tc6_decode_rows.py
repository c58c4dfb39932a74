"""Stage 6 at the shape table's decode rows (M <= 128), checked and timed beside cuBLAS: the
measurement that decides a change to the swapped (decode) kernel's K loop.

    source tools/gpu_env.sh && python3 experiments/gpu_tc6_decode_rows.py --out $OUT/decode.json [--fp8]

Run it once with the kernel as it is and once with the change, on the same warm GPU (the extension
rebuilds when its sources change): each log names the hash of the CUDA sources it ran. Each row is
first checked by ``course_lib.check`` (float64 reference, C poisoned) at the row's shape and at
the row's shape with M + 1 (a partial token tile), then timed with cuBLAS in alternating rounds in GPU
time (``course_lib.timing.time_fn``, the timer of ``course_lib.bench.measure``: L2 flushed before
each run, the host's time kept out), median of the rounds. With ``--fp8``, stage 7 (``tc_7_fp8``, e4m3)
instead of stage 6, promoted with scales per tensor and per block, against cuBLAS FP8 with the same
scaling. Raw log, never edited.
"""

from __future__ import annotations

import hashlib
import statistics
import sys
from pathlib import Path

import torch

import course_lib
from course_lib import fp8
from course_lib.kernels import tensor_cores as tc
from course_lib.model_shapes import MODEL_SHAPES, ModelShape
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

ROUNDS, BUDGET_MS = 5, 30.0
# The table's rows, then M swept between the token tiles at llama3 qkv's N and K (N = 6144, K = 4096).
ROWS = [m for m in MODEL_SHAPES if m.M <= 128] + [
    ModelShape(f"sweep M={M}", "-", "-", "decode", M, 6144, 4096, "M between the token tiles")
    for M in (48, 64, 65, 80, 96, 97, 112, 128)]
FP8_SCALINGS = ("tensor", "block")


def sources_hash() -> str:
    """sha256 (12 hex digits) over the extension's CUDA sources, in name order."""
    h = hashlib.sha256()
    for p in sorted((Path(course_lib.__file__).parent / "csrc").rglob("*.cu*")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:12]


def variants(is_fp8: bool) -> dict[str, dict]:
    """name -> what check takes (the GEMM, dtype, scaling), for stage 6 or stage 7's two scalings."""
    if not is_fp8:
        return {"tc_6": dict(gemm=course_lib.get_stage("tc_6_tma_store").gemm("bf16"), dtype="bf16", scaling=None)}
    return {f"tc_7 {s}": dict(gemm=tc.tc_7_fp8, dtype="e4m3", scaling=s) for s in FP8_SCALINGS}


def calls_at(shape, name: str, v: dict) -> dict:
    """The kernel and cuBLAS (the same scaling), on operands made once for the row."""
    M, N, K = shape
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, generator=gen, device="cuda")
    if v["scaling"] is None:
        a, b = a.to(torch.bfloat16), torch.randn(K, N, generator=gen, device="cuda").to(torch.bfloat16)
        return {"cublas": lambda: torch.matmul(a, b), name: lambda: v["gemm"](a, b)}
    w = torch.randn(N, K, generator=gen, device="cuda")
    (sa, ba), (sw, bw) = fp8.OPERAND_SCALING[v["scaling"]]
    qa, qw = fp8.quantize(a, "e4m3", sa, ba), fp8.quantize(w, "e4m3", sw, bw)
    return {"cublas": lambda: fp8.cublas_fp8(qa, qw), name: lambda: v["gemm"](qa, qw)}


def main() -> int:
    out, save = runlog.start(__doc__, part=1, flags=("--fp8",), checks=[], timings=[])
    out["provenance"]["csrc_sha256"] = sources_hash()
    tc.extension()
    kinds = variants("--fp8" in out["provenance"]["flags"])
    failures = 0
    for name, v in kinds.items():
        for m in ROWS:
            for M in (m.M, m.M + 1):
                shape = (M, m.N, m.K)
                try:
                    course_lib.check(v["gemm"], v["dtype"], [shape], scaling=v["scaling"], seed=3,
                                     label=f"{name} {m.label}")
                    ok, why = True, ""
                except AssertionError as e:
                    ok, why = False, str(e).splitlines()[0]
                failures += not ok
                out["checks"].append({"kernel": name, "shape": list(shape), "pass": ok, **({"why": why} if why else {})})
                print(f"{'PASS' if ok else 'FAIL'} {name} check {'x'.join(map(str, shape))} {why}", flush=True)
    save()
    print(f"\nsources {out['provenance']['csrc_sha256']}; GPU time, us, median of {ROUNDS} alternating rounds")
    for name, v in kinds.items():
        for m in ROWS:
            if v["scaling"] == "block" and m.M % 4:
                continue  # cuBLAS takes block scales only for M in multiples of 4 (fp8.cublas_fp8)
            calls = calls_at(m.shape, name, v)
            rounds = {n: [] for n in calls}
            for _ in range(ROUNDS):
                for n, call in calls.items():
                    rounds[n].append(1e3 * time_fn(call, budget_ms=BUDGET_MS).median_ms)
            us = {n: statistics.median(r) for n, r in rounds.items()}
            pct = 100 * us["cublas"] / us[name]
            plan = tc.stage6_plan(m.M, m.N, m.K)  # stage 7's decode path takes the same token tile
            out["timings"].append({"kernel": name, "label": m.label, "shape": list(m.shape),
                                   "plan": f"{plan.tile} {plan.schedule}", "us": {n: round(t, 2) for n, t in us.items()},
                                   "pct_of_cublas": round(pct, 1),
                                   "rounds_us": {n: [round(t, 2) for t in r] for n, r in rounds.items()}})
            print(f"{name:<10}{m.label:<22}{'x'.join(map(str, m.shape)):<18}{plan.tile + ' ' + plan.schedule:<26}"
                  f"cuBLAS {us['cublas']:7.2f}  {name} {us[name]:7.2f}  {pct:5.1f} %", flush=True)
            save()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
