"""Stage 6 at the shape table's decode rows (M <= 128), checked and timed beside cuBLAS: the
measurement that decides a change to the swapped (decode) kernel's K loop.

    source tools/gpu_env.sh && python3 experiments/gpu_tc6_decode_rows.py --out $OUT/decode.json

Run it once with the kernel as it is and once with the change, on the same warm GPU (the extension
rebuilds when its sources change): each log names the hash of the CUDA sources it ran. Each row is
first checked by ``course_lib.check`` (float64 reference, C poisoned) at the row's shape and at
the row's shape with M + 1 (a partial token tile), then timed with cuBLAS in alternating rounds in GPU
time (``course_lib.timing.time_fn``, the timer of ``course_lib.bench.measure``: L2 flushed before
each run, the host's time kept out), median of the rounds. Raw log, never edited.
"""

from __future__ import annotations

import hashlib
import statistics
import sys
from pathlib import Path

import torch

import course_lib
from course_lib.kernels import tensor_cores as tc
from course_lib.model_shapes import MODEL_SHAPES, ModelShape
from course_lib.timing import time_fn
import runlog  # this folder is on sys.path

ROUNDS, BUDGET_MS = 5, 30.0
# The table's rows, then M swept between the token tiles at llama3 qkv's N and K (N = 6144, K = 4096).
ROWS = [m for m in MODEL_SHAPES if m.M <= 128] + [
    ModelShape(f"sweep M={M}", "-", "-", "decode", M, 6144, 4096, "M between the token tiles")
    for M in (48, 64, 65, 80, 96, 97, 112, 128)]


def sources_hash() -> str:
    """sha256 (12 hex digits) over the extension's CUDA sources, in name order."""
    h = hashlib.sha256()
    for p in sorted((Path(course_lib.__file__).parent / "csrc").rglob("*.cu*")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()[:12]


def main() -> int:
    out, save = runlog.start(__doc__, part=1, checks=[], timings=[])
    out["provenance"]["csrc_sha256"] = sources_hash()
    tc.extension()
    fn = course_lib.get_stage("tc_6_tma_store").gemm("bf16")
    failures = 0
    for m in ROWS:
        for M in (m.M, m.M + 1):
            shape = (M, m.N, m.K)
            try:
                course_lib.check(fn, "bf16", [shape], seed=3, label=f"tc_6 {m.label}")
                ok, why = True, ""
            except AssertionError as e:
                ok, why = False, str(e).splitlines()[0]
            failures += not ok
            out["checks"].append({"shape": list(shape), "pass": ok, **({"why": why} if why else {})})
            print(f"{'PASS' if ok else 'FAIL'} check {'x'.join(map(str, shape))} {why}", flush=True)
    save()
    print(f"\nsources {out['provenance']['csrc_sha256']}; GPU time, us, median of {ROUNDS} alternating rounds")
    for m in ROWS:
        gen = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m.M, m.K, generator=gen, device="cuda").to(torch.bfloat16)
        b = torch.randn(m.K, m.N, generator=gen, device="cuda").to(torch.bfloat16)
        calls = {"cublas": lambda: torch.matmul(a, b), "tc_6": lambda: fn(a, b)}
        rounds = {n: [] for n in calls}
        for _ in range(ROUNDS):
            for n, call in calls.items():
                rounds[n].append(1e3 * time_fn(call, budget_ms=BUDGET_MS).median_ms)
        us = {n: statistics.median(v) for n, v in rounds.items()}
        pct = 100 * us["cublas"] / us["tc_6"]
        plan = tc.stage6_plan(m.M, m.N, m.K)
        out["timings"].append({"label": m.label, "shape": list(m.shape), "plan": f"{plan.tile} {plan.schedule}",
                               "us": {n: round(v, 2) for n, v in us.items()}, "pct_of_cublas": round(pct, 1),
                               "rounds_us": {n: [round(v, 2) for v in r] for n, r in rounds.items()}})
        print(f"{m.label:<22}{'x'.join(map(str, m.shape)):<18}{plan.tile + ' ' + plan.schedule:<26}"
              f"cuBLAS {us['cublas']:7.2f}  tc_6 {us['tc_6']:7.2f}  {pct:5.1f} %", flush=True)
        save()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
