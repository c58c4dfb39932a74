"""What nvidia-smi reports while cuBLAS runs flat out: power (the driver's averaged reading and the
instantaneous one), the enforced limit, the SM clock, and whether the software power cap is active,
sampled every 100 ms from an idle GPU through a few seconds of back-to-back bf16 GEMMs and back.

    python3 experiments/gpu_power_sampling.py --out DIR   -> DIR/power_sampling.csv (+ a summary on stdout)

Why: notebook 05's sustained runs found the power cap reported active in every sample, with one run's
mean power at 412 W against a 700 W limit; this shows how the averaged reading lags the instantaneous one.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import time
from pathlib import Path

import torch

FIELDS = ["timestamp", "power.draw.average", "power.draw.instant", "enforced.power.limit", "clocks.sm",
          "clocks_event_reasons.sw_power_cap", "clocks_event_reasons.hw_slowdown", "temperature.gpu"]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--load-s", type=float, default=5.0)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fields = [f for f in FIELDS if subprocess.run(["nvidia-smi", f"--query-gpu={f}", "--format=csv"],
                                                   capture_output=True).returncode == 0]
    print("fields this nvidia-smi knows:", ", ".join(fields))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits", "-lms", "100"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    marks = {"start": time.time()}
    time.sleep(1.5)
    marks["load_begins"] = time.time()
    launches = 0
    while time.time() - marks["load_begins"] < args.load_s:
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        launches += 10
    marks["load_ends"] = time.time()
    time.sleep(1.5)
    smi.terminate()
    out, err = smi.communicate(timeout=10)
    rows = list(csv.reader(io.StringIO(out)))
    with open(args.out / "power_sampling.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        w.writerows(rows)
    seconds = marks["load_ends"] - marks["load_begins"]
    print(f"{launches} GEMMs of 8192^3 bf16 in {seconds:.2f} s: {2 * 8192**3 * launches / seconds / 1e12:.0f} TFLOP/s sustained")
    print(f"load from +{marks['load_begins'] - marks['start']:.1f} s to +{marks['load_ends'] - marks['start']:.1f} s after sampling began")
    if err.strip():
        print("nvidia-smi:", err.strip()[:500])
    for r in rows:
        print(", ".join(x.strip() for x in r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
