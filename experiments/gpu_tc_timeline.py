"""Where stage 6's cycles go, tile by tile, on a GPU (evidence for the gap to cuBLAS).

    PYTHONPATH=. COURSE_BACKEND=gpu python3 experiments/gpu_tc_timeline.py [--out DIR] [--sizes 4096 8192]

Builds the stage-6 variant of experiments/kernels/tc_6_stream_k.cu with ``-DTC_TIMELINE`` (its own
cache folder, about a minute): then each consumer warpgroup's first thread stamps ``clock64`` (its
SM's cycles) when a tile's first K slice has arrived, when the tile's last wgmma is done and when
its result has been staged (converted to bf16 in registers: stage 6 stores it during the next
tile's first slices, so the stores fall inside that tile's mainloop; before 2026-11-30 the stamp
came after the stores were handed to the copy engine), and ``clock64`` plus ``%globaltimer`` (ns)
at its start and end. Without the define those stamps compile to nothing, and the variant's SASS
is instruction for instruction the stage 6 the course measured until 2026-12-01 (with stream-K
compiled in but off); the course's stage 6 since then hands out whole tiles only and is a
different binary around the same mainloop (experiments/runs/2026-12-01_sass_restructure_cuda/).
experiments/test_tc_6_stream_k.py checks that the stamps do not serialise the wgmmas.

For each size, tc_6 runs with the recorded knobs (cluster 2, group_m 8, one CTA per SM) a few
times; the last run's stamps give, per consumer: the wait for the first slice after launch, per tile
the mainloop (first slice arrived -> last wgmma done) and the epilogue (-> result staged), the gap
to the next tile's first slice, the tail (last epilogue -> all stores done), and the SM clock
(cycles / ns between the start and end stamps). The mainloop is set against the tensor cores' peak
of 4096 bf16 FLOP per cycle per SM (A100: 1024 dense FMA per clock per SM, from 312 TFLOP/s on
108 SMs at 1.41 GHz; the H100 white paper: twice A100's MMA rate per SM, clock for clock).

With ``--sustain-s S`` each variant first runs back to back for S seconds (CUDA events give the
sustained TFLOP/s) while ``nvidia-smi`` samples power, SM clock and whether the power cap is
holding the clock down (read-only queries); ``--variants tc6,cublas`` adds cuBLAS to that
comparison and ``--rounds`` alternates them.

Writes ``timeline.json`` (summary and raw stamps) into ``--out`` and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import torch

import course_lib
from course_lib import bench

import tc_6_stream_k as variant

FLOP_PER_CYCLE_PER_SM = 4096  # dense bf16 tensor-core peak (see the module docstring)
BLOCK_M, BLOCK_N = 128, 256  # stage 6's tile (tc_6_stream_k.cu)


def analyse(stamps: torch.Tensor, M: int, N: int, K: int) -> dict:
    """Summarise one run's stamps [CTA][consumer][entry] (entries: start clk, start ns, end clk,
    end ns, then per tile: first slice arrived, last wgmma done, result staged)."""
    per_consumer = []
    for cta in range(stamps.shape[0]):
        for cw in range(stamps.shape[1]):
            s = stamps[cta, cw].tolist()
            if s[0] == 0:
                continue
            tiles = [s[4 + 3 * i: 7 + 3 * i] for i in range((len(s) - 4) // 3) if s[4 + 3 * i] != 0]
            per_consumer.append({"cta": cta, "consumer": cw, "start": s[0], "start_ns": s[1], "end": s[2],
                                 "end_ns": s[3], "tiles": tiles})
    stamped = sum(len(c["tiles"]) for c in per_consumer)
    expected = 2 * -(-M // BLOCK_M) * -(-N // BLOCK_N)  # each tile has two consumers (64 rows each)
    if stamped != expected:
        raise RuntimeError(f"{stamped} tile stamps for {expected} consumer tiles: the timeline holds at most "
                           f"{stamps.shape[0]} CTAs and {(stamps.shape[2] - 4) // 3} tiles per consumer")
    mains, epis, gaps, firsts, tails, totals, mhz = [], [], [], [], [], [], []
    for c in per_consumer:
        totals.append(c["end"] - c["start"])
        mhz.append((c["end"] - c["start"]) / max(1, c["end_ns"] - c["start_ns"]) * 1e3)
        previous = None
        for t0, t1, t2 in c["tiles"]:
            mains.append(t1 - t0)
            epis.append(t2 - t1)
            if previous is None:
                firsts.append(t0 - c["start"])
            else:
                gaps.append(t0 - previous)
            previous = t2
        if previous is not None:
            tails.append(c["end"] - previous)
    ideal = 2 * BLOCK_M * BLOCK_N * K / FLOP_PER_CYCLE_PER_SM

    def stats(v: list) -> dict:
        return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} if v else {}

    tiles_per_consumer = [len(c["tiles"]) for c in per_consumer]
    busy = sum(mains) / max(1, sum(totals))
    return {
        "shape": [M, N, K], "consumers": len(per_consumer), "tiles_per_consumer": stats(tiles_per_consumer),
        "ideal_mainloop_cycles": ideal, "mainloop_cycles": stats(mains), "epilogue_cycles": stats(epis),
        "gap_to_next_tile_cycles": stats(gaps), "first_slice_wait_cycles": stats(firsts), "tail_cycles": stats(tails),
        "consumer_lifetime_cycles": stats(totals), "sm_clock_mhz": stats(mhz),
        "mainloop_share_of_lifetime": busy,
        "mainloop_efficiency": ideal / statistics.median(mains) if mains else None,
        "raw": per_consumer,
    }


class PowerSampler:
    """``nvidia-smi`` sampling power, SM clock and the clock-event reasons every 50 ms in the
    background (read-only queries: nothing about the card is changed)."""

    FIELDS = ("timestamp", "power.draw", "power.limit", "clocks.sm", "clocks_event_reasons.sw_power_cap",
              "clocks_event_reasons.hw_slowdown", "temperature.gpu")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc = None
        try:
            self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(self.FIELDS)}", "--format=csv,noheader,nounits",
                                          "-lms", "50"], stdout=path.open("w"), stderr=subprocess.STDOUT)
        except OSError as e:
            print(f"nvidia-smi sampling unavailable: {e}", flush=True)

    def stop(self) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def window(self, t0: float, t1: float) -> dict:
        """Medians of the samples taken between host times t0 and t1 (seconds since the epoch)."""
        rows = []
        for line in self.path.read_text().splitlines() if self.path.exists() else []:
            parts = [x.strip() for x in line.split(",")]
            if len(parts) != len(self.FIELDS):
                continue
            try:
                ts = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + parts[0].split(".")[1])
                rows.append((ts, float(parts[1]), float(parts[2]), float(parts[3]), parts[4], parts[5], float(parts[6])))
            except (ValueError, IndexError):
                continue
        inside = [r for r in rows if t0 <= r[0] <= t1]
        if not inside:
            return {"samples": 0}
        return {"samples": len(inside), "power_w": statistics.median(r[1] for r in inside), "power_limit_w": inside[0][2],
                "sm_clock_mhz": statistics.median(r[3] for r in inside),
                "sw_power_cap_share": sum(r[4] == "Active" for r in inside) / len(inside),
                "hw_slowdown_share": sum(r[5] == "Active" for r in inside) / len(inside),
                "temperature_c": statistics.median(r[6] for r in inside)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_tc_timeline_out")))
    p.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    p.add_argument("--runs", type=int, default=20, help="runs per size; the last one's stamps are kept")
    p.add_argument("--variants", default="tc6",
                   help="comma-separated: tc6 (stage 6 as recorded) and/or cublas (torch.matmul: only the "
                        "sustained run and nvidia-smi, no stamps)")
    p.add_argument("--rounds", type=int, default=1, help="alternations of the variants per size")
    p.add_argument("--sustain-s", type=float, default=0.0,
                   help="before the stamped runs, launch back to back for this long (CUDA events: sustained "
                        "TFLOP/s) while nvidia-smi samples power and clock")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - {"tc6", "cublas"}:
        raise SystemExit(f"--variants takes tc6 and/or cublas, not {args.variants!r}")
    if "cublas" in variants and args.sustain_s <= 0:
        raise SystemExit("--variants cublas only has a sustained run to show: give --sustain-s too")
    t0 = time.time()
    ext = variant.extension(timeline=True)
    print(f"timeline build ready in {time.time() - t0:.0f} s", flush=True)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    method = "clock64 and globaltimer stamped inside the kernel by each consumer's first thread"
    if args.sustain_s > 0:
        method += (f"; before the stamps, {args.sustain_s:g} s of back-to-back launches timed with CUDA events "
                   f"(no L2 flush) while nvidia-smi sampled every 50 ms; variants {','.join(variants)} alternated "
                   f"in {args.rounds} round(s)")
    prov = dict(bench.provenance("experiments/gpu_tc_timeline.py"), method=method)
    results = {"provenance": prov, "sizes": []}
    sampler = PowerSampler(args.out / "nvidia_smi.csv") if args.sustain_s > 0 else None
    try:
        for n in args.sizes:
            a, b = course_lib.random_inputs(n, n, n, "bf16", seed=n)
            c = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
            for rnd in range(args.rounds):
                for kind in variants:
                    def launch() -> None:
                        if kind == "cublas":
                            torch.matmul(a, b, out=c)
                        else:
                            ext.tc_6_stream_k(a, b, c, cluster=2, group_m=8, max_ctas=sm, stream_k=False)

                    sustained = None
                    if args.sustain_s > 0:
                        launch()
                        torch.cuda.synchronize()
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        launch()
                        e1.record()
                        e1.synchronize()
                        count = max(10, int(args.sustain_s * 1e3 / max(e0.elapsed_time(e1), 1e-3)))
                        h0 = time.time()
                        e0.record()
                        for _ in range(count):
                            launch()
                        e1.record()
                        e1.synchronize()
                        h1 = time.time()
                        ms = e0.elapsed_time(e1) / count
                        sustained = {"launches": count, "ms_per_gemm": ms, "tflops": 2 * n ** 3 / ms / 1e9,
                                     "nvidia_smi": sampler.window(h0 + 0.2 * (h1 - h0), h1) if sampler else None}
                    if kind == "cublas":
                        results["sizes"].append({"shape": [n, n, n], "variant": kind, "round": rnd, "sustained": sustained})
                        print(f"{n}^3 cublas (round {rnd}): sustained {sustained}", flush=True)
                        continue
                    for _ in range(args.runs):
                        ext.clear_timeline()
                        launch()
                    torch.cuda.synchronize()
                    ref = a.double() @ b.double()
                    err = float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))
                    summary = analyse(ext.timeline(), n, n, n)
                    summary.update(relative_error=err, variant=kind, round=rnd, sustained=sustained)
                    results["sizes"].append(summary)
                    print(f"{n}^3 {kind} (round {rnd}): {summary['consumers']} consumers, tiles each "
                          f"{summary['tiles_per_consumer']}, rel. error {err:.1e}")
                    if sustained:
                        print(f"  sustained: {sustained['tflops']:.1f} TFLOP/s over {sustained['launches']} launches; "
                              f"nvidia-smi {sustained['nvidia_smi']}")
                    for key in ("sm_clock_mhz", "first_slice_wait_cycles", "mainloop_cycles", "epilogue_cycles",
                                "gap_to_next_tile_cycles", "tail_cycles", "consumer_lifetime_cycles"):
                        print(f"  {key:<28} {summary[key]}")
                    print(f"  ideal mainloop {summary['ideal_mainloop_cycles']:.0f} cycles: mainloop efficiency "
                          f"{summary['mainloop_efficiency']:.3f}, mainloop share of a consumer's life "
                          f"{summary['mainloop_share_of_lifetime']:.3f}", flush=True)
    finally:
        if sampler:
            sampler.stop()
    (args.out / "timeline.json").write_text(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
