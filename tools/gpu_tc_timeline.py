"""Where stage 6's cycles go, tile by tile, on a GPU (evidence for the gap to cuBLAS).

    PYTHONPATH=. COURSE_BACKEND=gpu python3 tools/gpu_tc_timeline.py [--out DIR] [--sizes 4096 8192]

Builds a second copy of the extension with ``-DTC_TIMELINE`` (its own cache folder, about a minute):
then each consumer warpgroup's first thread stamps ``clock64`` (its SM's cycles) when a tile's
first K slice has arrived, when the tile's last wgmma is done and when its epilogue has been handed
to the copy engine, and ``clock64`` plus ``%globaltimer`` (ns) at its start and end
(tc6_tma_store.cu). Without the define those stamps compile to nothing: the recorded kernel's SASS
is unchanged (compared instruction for instruction when the stamps were added; tests/test_tensor_cores.py
checks that the course's build has none of them and that they do not serialise the wgmmas).

For each size, tc_6 runs with the recorded knobs (cluster 2, group_m 8, one CTA per SM) a few
times; the last run's stamps give, per consumer: the wait for the first slice after launch, per tile
the mainloop (first slice arrived -> last wgmma done) and the epilogue (-> stores issued), the gap
to the next tile's first slice, the tail (last epilogue -> all stores done), and the SM clock
(cycles / ns between the start and end stamps). The mainloop is set against the tensor cores' peak
of 4096 bf16 FLOP per cycle per SM (A100: 1024 dense FMA per clock per SM, from 312 TFLOP/s on
108 SMs at 1.41 GHz; the H100 white paper: twice A100's MMA rate per SM, clock for clock).

Writes ``timeline.json`` (summary and raw stamps) into ``--out`` and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

import course_lib
from course_lib import bench
from course_lib.kernels import tensor_cores as tc

FLOP_PER_CYCLE_PER_SM = 4096  # dense bf16 tensor-core peak (see the module docstring)
BLOCK_M, BLOCK_N = 128, 256  # stage 6's tile (tc6_tma_store.cu)


def analyse(stamps: torch.Tensor, M: int, N: int, K: int) -> dict:
    """Summarise one run's stamps [CTA][consumer][entry] (entries: start clk, start ns, end clk,
    end ns, then per tile: first slice arrived, last wgmma done, stores issued)."""
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_tc_timeline_out")))
    p.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192])
    p.add_argument("--runs", type=int, default=20, help="runs per size; the last one's stamps are kept")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    ext = tc.build_extension(defines=("TC_TIMELINE",))
    print(f"timeline build ready in {time.time() - t0:.0f} s", flush=True)
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    prov = dict(bench.provenance("tools/gpu_tc_timeline.py"),
                method="clock64 and globaltimer stamped inside the kernel by each consumer's first thread; no events, no cuBLAS")
    results = {"provenance": prov, "sizes": []}
    for n in args.sizes:
        a, b = course_lib.random_inputs(n, n, n, "bf16", seed=n)
        c = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
        for _ in range(args.runs):
            ext.tc6_clear_timeline()
            ext.tc6_tma_store(a, b, c, cluster=2, group_m=8, max_ctas=sm)
        torch.cuda.synchronize()
        err = float(torch.linalg.norm(c.double() - a.double() @ b.double()) / torch.linalg.norm(a.double() @ b.double()))
        summary = analyse(ext.tc6_timeline(), n, n, n)
        summary["relative_error"] = err
        results["sizes"].append(summary)
        print(f"{n}^3: {summary['consumers']} consumers, tiles each {summary['tiles_per_consumer']}, rel. error {err:.1e}")
        for key in ("sm_clock_mhz", "first_slice_wait_cycles", "mainloop_cycles", "epilogue_cycles",
                    "gap_to_next_tile_cycles", "tail_cycles", "consumer_lifetime_cycles"):
            print(f"  {key:<28} {summary[key]}")
        print(f"  ideal mainloop {summary['ideal_mainloop_cycles']:.0f} cycles: mainloop efficiency "
              f"{summary['mainloop_efficiency']:.3f}, mainloop share of a consumer's life "
              f"{summary['mainloop_share_of_lifetime']:.3f}", flush=True)
    (args.out / "timeline.json").write_text(json.dumps(results) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
