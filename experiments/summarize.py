"""Make the small summaries the notebooks read from the raw logs in experiments/runs/.

    python experiments/summarize.py           # rewrite course_lib/results/nvidia_h200_*_summary.json
    python experiments/summarize.py --check   # exit 1 if a committed summary is not what the logs give

The raw logs are the files the experiment scripts wrote on the H200, one per run, never edited.
A summary keeps only the rows a notebook shows, and names the runs it comes from.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "experiments" / "runs"
RESULTS = ROOT / "course_lib" / "results"

TRITON_SWEEPS = (
    "2026-11-29_1341_triton_sweep_1",
    "2026-11-29_1446_triton_sweep_2",
    "2026-11-30_1926_triton_sweep_3_fp32",
    "2026-11-30_1959_triton_sweep_4_fp32",
    "2026-11-30_2124_triton_sweep_5_fp32",
    "2026-11-30_2246_triton_sweep_6",
    "2026-11-30_2249_triton_sweep_6_fp32_b",
    "2026-12-01_0024_triton_sweep_7_16bit",
)
TF32_LABEL = "128x256x32 g8 w8 s3 B^T persistent split2"
NCU_4096 = "2026-11-29_ncu_4096"
NCU_FP32 = "2026-11-30_2247_ncu_triton_fp32_vs_cublas"
NCU_16BIT = "2026-12-01_0027_ncu_triton_16bit_vs_cublas"
REPEAT = "2026-12-01_0033_triton_fast_repeat"
STREAM_K = "2026-11-29_1437_tc_stream_k"
OVERLAP = "2026-11-30_2134_tc_epilogue_overlap"
TIMELINE = "2026-11-30_2159_tc6_timeline"
POWER = "2026-12-01_0707_power_sampling"  # a CSV of nvidia-smi samples (+ .log)
# The model shape table: the recording run whose triton_fast tuning log the notebook shows, and the
# exploration runs that timed stage 6 with whole tiles and with stream-K on every table shape.
# (the final kernels' rows were last re-recorded by the run named here; its tuning log is that run's)
SHAPE_RECORDING = ("2026-12-01_1950_rerecord_final_kernels", "final_rerecord")
# Nsight Compute on cuBLAS at the shapes where the final kernels fall behind, the write-flush /
# read-flush timings and the stage-6 variant's tile widths and cluster sizes.
SHAPE_LIMITS = "2026-12-01_1927_shape_limits"
SHAPE_EXPLORE = ("2026-12-01_0940_shapes_explore_1", "2026-12-01_0955_shapes_explore_2")
# Host time per call and the final kernels timed as called and in GPU time (experiments/gpu_host_time.py).
HOST_TIME = "2026-12-03_0225_host_time_alternating"
# What the course's as-called time of cuBLAS contains, and how it moves with the kernel it alternates
# with (experiments/gpu_as_called.py).
AS_CALLED = "2026-12-04_1240_mid_shapes/as_called.json"
# cuBLAS in FP8 against bf16, and its accumulator with and without fast accumulation
# (experiments/gpu_fp8_cublas.py).
FP8_CUBLAS = "2026-12-03_0245_fp8_cublas"
# The Triton FP8 GEMM's configurations against cuBLAS FP8, and its accumulator
# (experiments/gpu_fp8_triton.py).
FP8_TRITON = "2026-12-03_0315_fp8_triton_tma_blocks"
# Stage 7 (the CUDA FP8 kernel) against cuBLAS FP8 (experiments/gpu_fp8_stage7.py), and the runs that
# part its promoted mainloop's costs: the 128 x 128 tile without promotion, Nsight Compute's tensor
# pipe (experiments/gpu_fp8_stage7_variants.py, experiments/gpu_ncu_fp8.py).
FP8_STAGE7 = "2026-12-03_0637_fp8_stage7"
FP8_STAGE7_EVIDENCE = "2026-12-04_0940_fp8_stage7_loop"
# Stage 7's loop cut again (barrier addresses and descriptor words carried from slice to slice):
# timed against the loop before it, on an H100 (no H200 was lent that day).
FP8_STAGE7_SHORTER = "2026-12-05_1540_h100_tc7_loop"
# Stage 7 promoting a slice while the next one's wgmmas run (two accumulator sets in groups of slices),
# against one slice at a time, on an H100; Nsight Compute's sampled stalls per SASS instruction.
FP8_STAGE7_TWO_SETS = "2026-12-06_1620_h100_two_sets"
# Its L2 read sectors against cuBLAS's (Nsight Compute's counts), and the tile order's group_m, on an H100.
FP8_STAGE7_L2 = "2026-12-06_1642_h100_l2"
# Both FP8 stages as bench records them, and the Triton FP8 sweep with its persistent candidates, on an
# H100 (no H200 was lent): the stages' bars against cuBLAS with the same scaling, and the block-scaled
# Triton default chosen from that sweep.
FP8_H100_RECORD = "2026-12-05_1830_h100_fp8_sweep"
TRITON_BLOCK_DEFAULTS = {"before": "64x128x128 g8 w4 s3 tma", "now": "128x128x128 g8 w8 s4 tma persistent"}
# Triton FP8 per tensor with two one-warpgroup programs an SM, on an H100: the same tile with one and
# with two programs an SM (a quick sweep), and the full sweep's large class for the default before and now.
FP8_TRITON_TWO_PER_SM = "2026-12-06_1925_h100_triton_two_per_sm"
FP8_TRITON_TWO_PER_SM_SWEEP = "2026-12-06_1935_h100_group_m_sweep"
TRITON_TENSOR_LARGE = {"one per SM": "128x128x128 g8 w4 s4 tma", "two per SM": "128x128x128 g8 w4 s3 tma",
                       "before": "256x128x128 g8 w8 s4 tma"}
# Nsight Compute runs of the course's stages; a later run adds probes (or replaces a probe of the same name).
STAGE_PROFILES = ("2026-12-01_0628_ncu_course_stages.csv", "2026-12-01_0709_ncu_course_stages.csv")

# The Triton configurations the Nsight Compute runs profiled (from each log's "what").
NCU_PROFILED = {"fp32": "64x64x64 g8 w4 s2", "bf16": "128x256x64 g8 w8 s4 persistent split2",
                "fp16": "128x256x64 g8 w8 s3 persistent"}

# What each summary keeps of the Nsight Compute metrics (the notebooks' tables).
NCU_FP32_KEYS = (
    "Registers Per Thread", "Block Size", "Block Limit Registers", "Block Limit Shared Mem", "Block Limit Warps",
    "Block Limit SM", "smsp__warps_active.avg.per_cycle_active", "smsp__inst_executed.sum",
    "smsp__inst_executed_pipe_fma.sum", "smsp__inst_executed_op_shared_ld.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "Warp Cycles Per Issued Instruction",
    *(f"smsp__average_warps_issue_stalled_{s}_per_issue_active.ratio"
      for s in ("not_selected", "selected", "short_scoreboard", "dispatch_stall", "barrier", "long_scoreboard")),
)
NCU_4096_KEYS = ("Duration (ms)", "Duration (us)", "SM Frequency (Ghz)", "Elapsed Cycles (cycle)", "SM Active Cycles (cycle)",
                 "Issue Slots Busy (%)", "Executed Ipc Active (inst/cycle)", "Warp Cycles Per Issued Instruction (cycle)")
NCU_16BIT_KEYS = ("Duration (us)", "SM Frequency (Ghz)", "Grid Size", "Block Size", "Cluster Size",
                  "Registers Per Thread (register/thread)",
                  "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
                  "dram__bytes_read.sum (bytes)", "lts__t_bytes.sum (bytes)")


def _run(name: str) -> dict:
    return json.loads((RUNS / f"{name}.json").read_text())


def _gpu(prov: dict) -> dict:
    return {k: prov[k] for k in ("gpu", "sm_count", "driver", "cuda", "torch", "triton") if k in prov}


def _median(stats: dict) -> float:
    return stats["median"]


def _family(label: str) -> str:
    """What a configuration tried, without the knobs that only tune it (group size, warps, stages):
    '128x256x64 g8 w8 s3 persistent split2' -> '128 x 256 tile, persistent, C stored in halves'."""
    parts = label.split()
    bm, bn, bk = parts[0].split("x")
    words = {"persistent": "persistent", "ptr": "pointer loads", "split2": "C stored in halves", "B^T": "B^T",
             "ws": "warp-specialised", "x2/SM": "2 persistent programs per SM", "Cptr": "pointer stores for C"}
    extra = [words[p] for p in parts[1:] if p in words]
    extra += [f"at most {p[1:]} registers" for p in parts[1:] if re.fullmatch(r"r\d+", p)]
    return ", ".join([f"{bm} x {bn} tile, K slices of {bk}"] + extra)


def triton_summary() -> dict:
    first = _run(TRITON_SWEEPS[0])
    tried: dict[str, dict[str, dict]] = {}
    for name in TRITON_SWEEPS:
        for dtype, entries in _run(name)["ranking"].items():
            for e in entries:
                fam = tried.setdefault(dtype, {}).setdefault(_family(e["label"]), {"configs": 0, "best": None})
                fam["configs"] += 1
                r = {"label": e["label"], "ratio_4096": e["ratios"]["4096"], "ratio_8192": e["ratios"]["8192"]}
                if fam["best"] is None or min(r["ratio_4096"], r["ratio_8192"]) > min(fam["best"]["ratio_4096"], fam["best"]["ratio_8192"]):
                    fam["best"] = r
    tried_rows = {
        dtype: sorted(({"family": f, "configs": v["configs"], **v["best"]} for f, v in fams.items()),
                      key=lambda r: -min(r["ratio_4096"], r["ratio_8192"]))
        for dtype, fams in tried.items()
    }
    article = []
    for r in first["seed_experiment"]:
        _, variant, block = r["stage"].split(":")
        article.append({"variant": variant, "block_size": int(block.split("=")[1]), "dtype": r["dtype"],
                        "tflops": r["tflops"], "ratio_to_cublas": r["ratio_to_cublas"]})
    ncu4096 = _run(NCU_4096)["probes"]
    ncu_fp32 = _run(NCU_FP32)
    ncu16 = _run(NCU_16BIT)["probes"]
    repeat = _run(REPEAT)
    return {
        "provenance": {
            "what": "What notebook 04 shows of the Triton experiments on the H200; every ratio is to cuBLAS "
                    "measured in the same call",
            "made_by": "experiments/summarize.py",
            "runs": [f"experiments/runs/{n}.json" for n in (*TRITON_SWEEPS, NCU_4096, NCU_FP32, NCU_16BIT, REPEAT)],
            **_gpu(first["provenance"]),
        },
        "article_experiment": article,
        "transpose_copy": [{"what": r["what"], "ms": r["ms"], "gbs": r["GB/s (read+write)"]}
                           for name in TRITON_SWEEPS[:2] for r in _run(name).get("transpose_cost", [])],
        "tried": tried_rows,
        # The same TF32 configuration before and after B^T was written by the course's transpose
        # kernel instead of torch's b.T.contiguous() (the first two sweeps).
        "tf32_transpose_effect": [
            {"copy": copy, **next({"label": e["label"], "ratio_4096": e["ratios"]["4096"], "ratio_8192": e["ratios"]["8192"]}
                                  for e in _run(name)["ranking"]["tf32"] if e["label"] == TF32_LABEL)}
            for copy, name in (("b.T.contiguous()", TRITON_SWEEPS[0]), ("transpose kernel", TRITON_SWEEPS[1]))
        ],
        "profiled_configs": NCU_PROFILED,
        "ncu_fp32_before": {k: {"kernel": ncu4096[k]["kernel"], **{m: ncu4096[k]["metrics"][m] for m in NCU_4096_KEYS
                                                                    if m in ncu4096[k]["metrics"]}}
                            for k in ("triton32", "triton32_desc64", "cublas32")},
        "ncu_fp32": {k: {m: ncu_fp32[k][m] for m in NCU_FP32_KEYS if m in ncu_fp32[k]}
                     for k in ("triton_fp32", "cublas_fp32")},
        "ncu_16bit": {k: {"kernel": v["kernel"], **{m: v["metrics"][m] for m in NCU_16BIT_KEYS if m in v["metrics"]}}
                      for k, v in ncu16.items()},
        "repeat": [{"dtype": r["dtype"], "size": r["M"], "config": r["triton_fast_config"],
                    "triton_fast": {k: r["triton_fast"][k] for k in ("median", "min", "max")},
                    "below_cublas_lowest": sum(x < r["cublas"]["min"] for x in r["triton_fast"]["ratios"]),
                    "runs": len(r["triton_fast"]["ratios"]),
                    "cublas": {k: r["cublas"][k] for k in ("median", "min", "max")}} for r in repeat["repeat"]],
    }


def power_sampling() -> dict:
    """nvidia-smi every 100 ms from idle through 5 s of back-to-back cuBLAS bf16 GEMMs and back: seconds
    since the load began, the averaged and instantaneous power, the SM clock, the software power cap."""
    import csv

    rows = list(csv.DictReader((RUNS / f"{POWER}.csv").open()))
    log = (RUNS / f"{POWER}.log").read_text()
    begins = float(re.search(r"load from \+([0-9.]+) s to \+([0-9.]+) s", log).group(1))
    first = _clock_seconds(rows[0]["timestamp"])
    samples = [{"t_s": round(_clock_seconds(r["timestamp"]) - first - begins, 2),
                "power_average_w": float(r["power.draw.average"]), "power_instant_w": float(r["power.draw.instant"]),
                "sm_clock_mhz": float(r["clocks.sm"]), "power_cap": r["clocks_event_reasons.sw_power_cap"].strip() == "Active"}
               for r in rows]
    return {"what": log.splitlines()[1], "limit_w": float(rows[0]["enforced.power.limit"]), "samples": samples}


def _clock_seconds(stamp: str) -> float:
    hms = stamp.strip().split(" ")[1]
    h, m, sec = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(sec)


def tensor_core_summary() -> dict:
    sk = _run(STREAM_K)
    ncu = _run(NCU_4096)["probes"]
    overlap = _run(OVERLAP)
    timeline = _run(TIMELINE)
    keep = ("first_slice_wait_cycles", "mainloop_cycles", "epilogue_cycles", "gap_to_next_tile_cycles", "tail_cycles",
            "tiles_per_consumer", "sm_clock_mhz", "consumer_lifetime_cycles")
    sizes = [{"shape": s["shape"], "ideal_mainloop_cycles": s["ideal_mainloop_cycles"],
              "mainloop_share_of_lifetime": s["mainloop_share_of_lifetime"],
              **{k: _median(s[k]) for k in keep}} for s in timeline["sizes"]]
    four_k = next(s for s in timeline["sizes"] if s["shape"][0] == 4096)
    split = overlap["split_round"]["timeline"]["sizes"]
    epilogue = []
    for s in split:
        smi = s["sustained"]["nvidia_smi"]
        row = {"size": s["shape"][0], "variant": s["variant"], "round": s["round"],
               "sustained_tflops": s["sustained"]["tflops"], "sm_clock_mhz_smi": smi["sm_clock_mhz"],
               "power_w": smi["power_w"], "power_limit_w": smi["power_limit_w"],
               "power_cap_share": smi["sw_power_cap_share"]}
        if s["variant"] != "cublas":
            row |= {k: _median(s[k]) for k in ("mainloop_cycles", "epilogue_cycles", "gap_to_next_tile_cycles",
                                               "consumer_lifetime_cycles")}
        epilogue.append(row)
    direct = [s for s in overlap["timeline"]["sizes"] if s["shape"][0] == 4096 and s["epilogue"] in ("serial", "direct")]
    return {
        "provenance": {
            "what": "What the deep dive hopper_lab shows of the tensor-core experiments on the H200",
            "made_by": "experiments/summarize.py",
            "runs": [f"experiments/runs/{n}.json" for n in (STREAM_K, NCU_4096, OVERLAP, TIMELINE)]
                    + [f"experiments/runs/{POWER}.csv"],
            **_gpu(timeline["provenance"]),
        },
        "stream_k": [{k: r[k] for k in ("stream_k", "cluster", "group_m", "M", "ratio_to_cublas")} for r in sk["explore"]],
        "ncu_4096": {k: {"kernel": ncu[k]["kernel"], **{m: ncu[k]["metrics"][m] for m in NCU_4096_KEYS if m in ncu[k]["metrics"]}}
                     for k in ("tc6", "tc6_sk", "cublas16")},
        "timeline": {"sizes": sizes, "consumers_4096": four_k["raw"][:8]},
        "epilogue_overlap": epilogue,
        "power_sampling": power_sampling(),
        "epilogue_direct_stores_4096": {
            "serial_mainloop_cycles": min(_median(s["mainloop_cycles"]) for s in direct if s["epilogue"] == "serial"),
            "direct_mainloop_cycles": min(_median(s["mainloop_cycles"]) for s in direct if s["epilogue"] == "direct"),
        },
    }


# What the stage profiles keep, by the name the notebooks use: (ncu metric, scale).
PROFILE_METRICS = {
    "time_ms": ("gpu__time_duration.sum", 1e-6),
    "sm_clock_ghz": ("sm__cycles_elapsed.avg.per_second", 1e-9),
    "dram_read_gb": ("dram__bytes_read.sum", 1e-9),
    "dram_write_gb": ("dram__bytes_write.sum", 1e-9),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct", 1),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct", 1),
    "global_load_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", 1),
    "global_load_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", 1),
    "shared_load_instructions": ("smsp__inst_executed_op_shared_ld.sum", 1),
    "shared_store_instructions": ("smsp__inst_executed_op_shared_st.sum", 1),
    "shared_load_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", 1),
    "shared_store_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", 1),
    "shared_load_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 1),
    "shared_store_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", 1),
    "instructions": ("smsp__inst_executed.sum", 1),
    "fma_instructions": ("smsp__inst_executed_pipe_fma.sum", 1),
    "issue_active_pct": ("smsp__issue_active.avg.pct_of_peak_sustained_active", 1),
    "fma_pipe_pct": ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", 1),
    "tensor_pipe_pct": ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 1),
    "achieved_occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active", 1),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct", 1),
    "registers_per_thread": ("launch__registers_per_thread", 1),
    "block_size": ("launch__block_size", 1),
    "grid_size": ("launch__grid_size", 1),
    "blocks_per_sm_by_registers": ("launch__occupancy_limit_registers", 1),
    "blocks_per_sm_by_shared_memory": ("launch__occupancy_limit_shared_mem", 1),
    "blocks_per_sm_by_warps": ("launch__occupancy_limit_warps", 1),
    "blocks_per_sm_by_blocks": ("launch__occupancy_limit_blocks", 1),
}


def _ncu_csv(text: str) -> dict[str, dict[str, str]]:
    """{probe: {metric: value as printed}} from ncu --csv --page raw outputs, each after '=== probe'."""
    import csv
    import io

    out = {}
    for block in text.split("=== ")[1:]:
        probe, rest = block.split("\n", 1)
        rows = list(csv.reader(io.StringIO("\n".join(ln for ln in rest.splitlines() if ln.startswith('"')))))
        if len(rows) >= 3:
            out[probe.strip()] = dict(zip(rows[0], rows[2]))
    return out


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def stage_profiles_summary() -> dict:
    raw = {}
    for run in STAGE_PROFILES:
        raw |= _ncu_csv((RUNS / run).read_text())
    profiles = {}
    for probe, m in raw.items():
        row = {"kernel": re.split(r"[\[(]", m["Kernel Name"])[0]}
        row |= {k: round(_number(m[metric]) * scale, 6) for k, (metric, scale) in PROFILE_METRICS.items() if metric in m}
        prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
        stalls = {k[len(prefix):-len(suffix)]: _number(v) for k, v in m.items() if k.startswith(prefix) and k.endswith(suffix)}
        row["stalls_per_issued_instruction"] = {k: v for k, v in sorted(stalls.items(), key=lambda kv: -kv[1]) if v >= 0.05}
        profiles[probe] = row
    first = next(iter(raw.values()))
    return {
        "provenance": {
            "what": "Nsight Compute on the course's stages at 4096^3 on the H200 (the GPU's own clocks; the second "
                    "launch of each kernel profiled; M = N = K = 4096)",
            "made_by": "experiments/summarize.py",
            "runs": [f"experiments/runs/{run}" for run in STAGE_PROFILES],
            "gpu": first.get("device__attribute_display_name", "NVIDIA H200"),
            "command": "experiments/ncu_course_stages.sh",
        },
        "profiles": profiles,
    }


def shape_table_summary() -> dict:
    """Per table shape: what triton_fast's autotuning timed (every candidate, ms) and chose, from the
    recording run; stage 6 with whole tiles and with stream-K against cuBLAS, from the explorations
    (the later run wins where both timed a shape)."""
    from course_lib.model_shapes import MODEL_SHAPES

    table = {s.shape: s.label for s in MODEL_SHAPES}
    run, stem = RUNS / SHAPE_RECORDING[0], SHAPE_RECORDING[1]
    prov = json.loads((run / f"{stem}.json").read_text())["provenance"]
    tuning = [dict(t, label=table[(t["M"], t["N"], t["K"])])
              for t in json.loads((run / f"{stem}_triton_fast_tuning_log.json").read_text())
              if (t["M"], t["N"], t["K"]) in table]
    stage6: dict[str, dict] = {}
    for name in SHAPE_EXPLORE:
        data = json.loads((RUNS / name / "shapes_explore.json").read_text())
        for row in data["rows"]:
            shape = (row["M"], row["N"], row["K"])
            if row.get("stage") != "tc_6_tma_store" or shape not in table:
                continue
            cublas_ms = sum(row["cublas_ms"]) / 2
            ratio = {k: cublas_ms / v["ms"] for k, v in row["candidates"].items() if "ms" in v}
            stage6[table[shape]] = {"M": row["M"], "N": row["N"], "K": row["K"], "run": name,
                                    "whole_tiles": ratio.get("0"), "stream_k": ratio.get("1")}
    flush: dict[str, dict] = {}
    variant: dict[str, dict] = {}
    for part in ("few", "decode"):
        limits = json.loads((RUNS / SHAPE_LIMITS / part / "shapes_explore.json").read_text())
        flush_copy_gbs = limits["copy_bandwidth_gbs"]
        for row in limits["rows"]:
            shape = (row["M"], row["N"], row["K"])
            if shape not in table:
                continue
            if "flush" in row:
                flush[table[shape]] = {"M": row["M"], "N": row["N"], "K": row["K"], **{
                    kernel: {how: statistics.median(ms) for how, ms in t.items()} for kernel, t in row["flush"].items()}}
            if row.get("stage") == "tc_6_stream_k variant":
                cublas_ms = sum(row["cublas_ms"]) / 2
                variant[table[shape]] = {k.split("[", 1)[1].rstrip("]").replace("group_m=8,max_ctas=132", "").replace(",,", ",").strip(","):
                                         cublas_ms / v["ms"] for k, v in row["candidates"].items() if "ms" in v}
    return {
        "provenance": _gpu(prov) | {
            "date": prov["date"],
            "made_by": "experiments/summarize.py",
            "runs": [f"experiments/runs/{SHAPE_RECORDING[0]}/{stem}.json",
                     f"experiments/runs/{SHAPE_RECORDING[0]}/{stem}_triton_fast_tuning_log.json",
                     *(f"experiments/runs/{n}/shapes_explore.json" for n in SHAPE_EXPLORE),
                     *(f"experiments/runs/{SHAPE_LIMITS}/{p}/shapes_explore.json" for p in ("few", "decode")),
                     f"experiments/runs/{SHAPE_LIMITS}/ncu_shapes.csv"],
        },
        "triton_fast_tuning": tuning,
        "stage6_schedules": stage6,
        "cublas_kernels": cublas_kernels((RUNS / SHAPE_LIMITS / "ncu_shapes.csv").read_text()),
        "flush_ms": flush,
        "flush_copy_bandwidth_gbs": flush_copy_gbs,  # measured in the same run as flush_ms
        "stage6_variant": variant,
    }


def cublas_kernels(text: str) -> dict[str, list[dict]]:
    """{table label: the kernels cuBLAS launched there (name, grid, ms)} from experiments/gpu_ncu_shapes.py's
    output under ncu --csv: its 'profiled: <label> <library>' lines say, in launch order, which call the
    following kernels belong to (cuBLAS's kernels are named nvjet* or cublasLt*)."""
    import csv
    import io

    calls = [ln[len("profiled: "):].rsplit(" ", 1) for ln in text.splitlines() if ln.startswith("profiled: ")]
    rows = list(csv.reader(io.StringIO("\n".join(ln for ln in text.splitlines() if ln.startswith('"')))))
    head, body = rows[0], rows[1:]
    col = {name: head.index(name) for name in ("ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Value")}
    kernels: dict[str, dict] = {}
    for r in body:
        k = kernels.setdefault(r[col["ID"]], {"name": r[col["Kernel Name"]], "grid": r[col["Grid Size"]]})
        k[r[col["Metric Name"]]] = r[col["Metric Value"]]
    # Each cuBLAS call's kernels are a run of consecutive cuBLAS-named kernels (a GEMM, maybe a split-K
    # reduction); the course's kernels between them end a run.
    runs: list[list[dict]] = [[]]
    for k in kernels.values():
        if k["name"].startswith(("nvjet", "void cublasLt")):
            runs[-1].append(k)
        elif runs[-1]:
            runs.append([])
    runs = [r for r in runs if r]
    labels = [label for label, library in calls if library == "cublas"]
    if len(runs) != len(labels):
        raise ValueError(f"{len(labels)} cuBLAS calls were profiled but {len(runs)} runs of cuBLAS kernels found")
    out = {label: [{"name": k["name"], "grid": k["grid"], "ms": _number(k["gpu__time_duration.sum"]) * 1e-6} for k in run]
           for label, run in zip(labels, runs)}
    return out


def host_time_summary() -> dict:
    """Host time per call of a small product, and per model shape each final kernel against cuBLAS
    timed as called (``triton.testing.do_bench``) and in GPU time (``do_bench_cudagraph``)."""
    run = json.loads((RUNS / HOST_TIME / "host_time.json").read_text())
    prov = run["provenance"]
    rows = {(r["label"], r["stage"], r["dtype"]): r for r in run["shapes"] if "as_called_us" in r}
    shapes = []
    for (label, stage, dtype), r in rows.items():
        if stage == "cublas":
            continue
        c = rows.get((label, "cublas", "bf16" if dtype != "fp32" else "fp32")) or rows.get((label, "cublas", "bf16"))
        entry = {k: r[k] for k in ("label", "M", "N", "K", "stage", "dtype", "phase")}
        entry |= {"as_called_us": r["as_called_us"], "gpu_us": r["gpu_us"],
                  "cublas_as_called_us": c["as_called_us"], "cublas_gpu_us": c["gpu_us"],
                  "as_called_ratio": c["as_called_us"] / r["as_called_us"],
                  "gpu_time_ratio": c["gpu_us"] / r["gpu_us"] if r["gpu_us"] and c["gpu_us"] else None}
        if dtype == "fp32":  # cuBLAS was timed in bf16 only: no ratio in the same type
            entry |= {"cublas_as_called_us": None, "cublas_gpu_us": None, "as_called_ratio": None, "gpu_time_ratio": None}
        shapes.append(entry)
    return {
        "provenance": _gpu(prov) | {
            "date": prov["date"], "python": prov["python"], "made_by": "experiments/summarize.py",
            "runs": [f"experiments/runs/{HOST_TIME}/host_time.json"],
            "what": "host time per call: a 64 x 64 x 64 product called 2000 times back to back, the wall time per "
                    "call, best of 3 rounds, beside torch.matmul in the same dtype; as called: triton.testing.do_bench (each call after an L2 flush, the "
                    "host's time included when it is longer than the GPU's); GPU time: "
                    "triton.testing.do_bench_cudagraph (the calls replayed from a CUDA graph); medians; cuBLAS "
                    "(torch.matmul, bf16) timed the same way in the same run; ratio = cuBLAS's time / the kernel's",
        },
        "small_shape": run["small_shape"],
        "host_us_per_call": run["host_us_per_call"],
        "shapes": shapes,
        "decode": [e for e in shapes if e["phase"] == "decode" and e["dtype"] == "bf16"],
        "as_called": as_called_rows(),
    }


def as_called_rows() -> dict:
    """torch.matmul (bf16) per shape: GPU time, as called alone and beside each partner (the median of
    the rounds, and every round), as called one by one with and without the flush and after the host
    slept 1 ms, and the host time per call back to back; microseconds."""
    run = json.loads((RUNS / AS_CALLED).read_text())
    rows = {}
    for r in run["rows"]:
        rows[r["label"]] = {"shape": r["shape"], "gpu_us": round(r["gpu_us"], 2),
                            "called_us": {k: round(v, 2) for k, v in r["called_us"].items()},
                            "called_rounds": r["called_rounds"],
                            **{k: round(r[k], 2) for k in ("called_one_by_one_us", "called_no_flush_us", "called_idle_us")},
                            "host_us": round(r["host_us"], 2) if r["host_us"] else None}
    return {"run": f"experiments/runs/{AS_CALLED}", "gpu": run["provenance"]["gpu"],
            "torch": run["provenance"]["torch"], "rows": rows}


def fp8_summary() -> dict:
    """cuBLAS's FP8 GEMM (torch._scaled_mm) per scaling against cuBLAS bf16, TFLOP/s in GPU time and as
    called; its relative error with and without fast accumulation at K = 1,024 - 16,384."""
    run = json.loads((RUNS / FP8_CUBLAS / "fp8_cublas.json").read_text())
    prov = run["provenance"]
    keys = {"bf16": "bf16", "tensor": "e4m3 tensor", "tensor fast": "e4m3 tensor fast", "row": "e4m3 row",
            "row fast": "e4m3 row fast", "block": "e4m3 block"}
    speed = []
    for r in run["speed"]:
        M, N, K = r["shape"]
        entry = {"shape": [M, N, K]}
        for name, key in keys.items():
            if f"{key} ms" in r:
                entry[f"{name} tflops"] = round(2 * M * N * K / (r[f"{key} ms"] * 1e-3) / 1e12, 1)
                entry[f"{name} tflops as called"] = round(2 * M * N * K / (r[f"{key} ms as called"] * 1e-3) / 1e12, 1)
            if f"{key} rel_error" in r:
                entry[f"{name} rel_error"] = r[f"{key} rel_error"]
            if f"{key} error" in r:
                entry[f"{name} refused"] = r[f"{key} error"].split("when calling")[0].strip()
        speed.append(entry)
    triton_run = json.loads((RUNS / FP8_TRITON / "fp8_triton.json").read_text())
    triton_rows = []
    for r in triton_run["sweep"]:
        M, N, K = r["shape"]
        flops = 2 * M * N * K

        def tf(ms):
            return round(flops / (ms * 1e-3) / 1e12, 1)
        configs = {k: tf(v) for k, v in r.items() if "_w" in k and isinstance(v, float)}
        triton_rows.append({"shape": [M, N, K], "cublas tflops": tf(r["cublas ms"]),
                            "cublas fast tflops": tf(r["cublas fast ms"]), "best": r["best"],
                            "best tflops": configs[r["best"]], "best fast tflops": tf(r["best fast ms"]),
                            "configs tflops": configs})
    return {
        "provenance": _gpu(prov) | {
            "date": prov["date"], "python": prov["python"], "made_by": "experiments/summarize.py",
            "runs": [f"experiments/runs/{FP8_CUBLAS}/fp8_cublas.json", f"experiments/runs/{FP8_TRITON}/fp8_triton.json"],
            "what": "torch._scaled_mm on e4m3 operands (A M x K, the weight N x K), bf16 output, per scaling "
                    "(tensor; rows of A and of the weight; 1 x 128 and 128 x 128 blocks), with and without fast "
                    "accumulation, beside torch.matmul in bf16; course_lib.timing.time_fn medians (GPU time, and "
                    "host=True as called). accumulation: relative error against the float64 product of the "
                    "dequantized inputs, fp32 output, M = N = 256, one scale per tensor",
        },
        "speed": speed,
        "accumulation": run["accumulation"],
        "triton": {"what": "fast_fp8.fp8_matmul, one scale per tensor, each configuration of the sweep (promoted "
                           "once per K-slice), the best again with fast accumulation, beside cuBLAS FP8 promoted "
                           "and fast in the same loop; GPU time (time_fn); TFLOP/s",
                   "triton_version": triton_run["provenance"]["triton"],
                   "shapes": triton_rows, "accumulation": triton_run["accumulation"],
                   "blockscaled": [_blockscaled_row(r) for r in triton_run.get("blockscaled", [])]},
        "stage7": _stage7(),
        "h100_record": _fp8_h100_record(),
        "triton_two_per_sm": _triton_two_per_sm(),
    }


def _triton_two_per_sm() -> dict:
    """Triton FP8 per tensor at the large shapes: % of cuBLAS of the configurations of
    TRITON_TENSOR_LARGE in a quick sweep (per shape), and over the full sweep's class "large" (geometric
    mean and worst over the shapes where each was timed, first round)."""
    quick = json.loads((RUNS / FP8_TRITON_TWO_PER_SM / "fp8_sweep_quick.json").read_text())
    full = json.loads((RUNS / FP8_TRITON_TWO_PER_SM_SWEEP / "fp8_sweep.json").read_text())

    def pcts(sweep: dict, config: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for m in sorted(sweep["measurements"], key=lambda m: m["phase"] != "first"):
            if (m["scaling"], m["class"], m["config"]) == ("tensor", "large", config) and "pct_of_cublas" in m:
                out.setdefault(" x ".join(map(str, m["shape"])), round(m["pct_of_cublas"], 1))
        return out

    def over(values) -> dict:
        v = list(values)
        return {"geomean": round(statistics.geometric_mean(v), 1), "worst": min(v), "shapes": len(v)}

    large = {name: pcts(full, c) for name, c in TRITON_TENSOR_LARGE.items()}
    return {
        "what": "experiments/gpu_fp8_triton_sweep.py on an H100, one scale per tensor, % of cuBLAS (do_bench medians): "
                "quick: the same 128 x 128 tile on 4 warps with one program an SM (4 stages) and two (3 stages), "
                "and the default before; large: over the full sweep's class 'large'",
        "gpu": quick["provenance"]["gpu"],
        "runs": [f"experiments/runs/{FP8_TRITON_TWO_PER_SM}/fp8_sweep_quick.json",
                 f"experiments/runs/{FP8_TRITON_TWO_PER_SM_SWEEP}/fp8_sweep.json"],
        "configs": TRITON_TENSOR_LARGE,
        "quick": {name: pcts(quick, c) for name, c in TRITON_TENSOR_LARGE.items()},
        "large": {name: over(v.values()) for name, v in large.items() if v},
    }


def _fp8_h100_record() -> dict:
    """bench's recording of tc_7_fp8 and triton_fp8 on an H100 (GPU time and as called, each against cuBLAS
    with the same scaling in the same call), and the Triton sweep's block-scaled large shapes for the
    default before and now (TRITON_BLOCK_DEFAULTS; the first round's timing where a configuration was
    timed in both rounds)."""
    folder = RUNS / FP8_H100_RECORD
    record = json.loads((folder / "h100_fp8_record.json").read_text())
    sweep = json.loads((folder / "fp8_sweep.json").read_text())
    rows = [{"stage": r["stage"], "scaling": r["scaling"], "shape": [r["M"], r["N"], r["K"]],
             "pct": round(100 * r["ratio_to_cublas"], 1), "pct as called": round(100 * r["ratio_to_cublas_as_called"], 1)}
            for r in record["records"] if r["stage"] in ("tc_7_fp8", "triton_fp8")]
    block: dict[str, dict[str, float]] = {name: {} for name in TRITON_BLOCK_DEFAULTS}
    for m in sorted(sweep["measurements"], key=lambda m: m["phase"] != "first"):
        for name, config in TRITON_BLOCK_DEFAULTS.items():
            if (m["scaling"], m["class"], m["config"]) == ("block", "large", config):
                block[name].setdefault(" x ".join(map(str, m["shape"])), round(m["pct_of_cublas"], 1))
    return {
        "what": "rows: python -m course_lib.bench --record --stages tc_7_fp8,triton_fp8 (stage 7 with the loop cut "
                "again, Triton FP8 with the block-scaled default now), % of cuBLAS with the same scaling, GPU time "
                "and as called. triton_block_large: experiments/gpu_fp8_triton_sweep.py, % of cuBLAS block-scaled "
                "(do_bench medians) at the class 'large', the block-scaled default before and now",
        "gpu": record["provenance"]["gpu"], "date": record["provenance"]["date"],
        "runs": [f"experiments/runs/{FP8_H100_RECORD}/{p}" for p in ("h100_fp8_record.json", "fp8_sweep.json")],
        "rows": rows,
        "triton_block_large": {name: {"config": TRITON_BLOCK_DEFAULTS[name], "pct": block[name]} for name in block},
    }


STAGE7_VARIANTS = ("tensor", "tensor fast", "row", "block")


def _stage7() -> dict:
    """tc_7_fp8's checks and accumulation errors (its first recording; the speed of the kernel as the
    course builds it is bench's, in the results file), and the evidence on its promoted mainloop: the
    rewrite against the loop before it, the 128 x 128 tile without promotion, fast accumulation, and
    Nsight Compute's tensor pipe."""
    run = json.loads((RUNS / FP8_STAGE7 / "fp8_stage7.json").read_text())
    evidence_dir = RUNS / FP8_STAGE7_EVIDENCE
    loop = json.loads((evidence_dir / "variants.json").read_text())
    shorter_dir = RUNS / FP8_STAGE7_SHORTER
    shorter = json.loads((shorter_dir / "variants.json").read_text())
    pipes = {name: _ncu_pipe(evidence_dir / path) for name, path in
             (("tc7", "ncu_base_tensor.txt"), ("tc7_before", "ncu_before_tensor.txt"), ("cublas", "ncu_cublas.txt"))}
    shorter_pipes = {name: _ncu_pipe(shorter_dir / path) for name, path in
                     (("tc7", "ncu_base_tensor.txt"), ("tc7_block", "ncu_base_block.txt"),
                      ("cublas", "ncu_cublas_tensor.txt"))}
    return {
        "what": "check: check_fp8's worst relative error per variant; accumulation: bf16 output, M = N = 256 (both "
                "from stage 7's first recording). loop: the promoted mainloop as the course builds it (base), the "
                "loop before its rewrite (before), each with fast accumulation on the 128 x 128 tile (fast n128), the "
                "course's fast-accumulation kernel (base tensor fast), beside cuBLAS per tensor promoted and fast, "
                "GPU time, alternating rounds. ncu_4096: Nsight Compute at 4096^3 per tensor (--clock-control none)",
        "runs": [f"experiments/runs/{FP8_STAGE7}/fp8_stage7.json", f"experiments/runs/{FP8_STAGE7_EVIDENCE}/variants.json"]
                + [f"experiments/runs/{FP8_STAGE7_EVIDENCE}/{p}" for p in ("ncu_base_tensor.txt", "ncu_before_tensor.txt", "ncu_cublas.txt")],
        "date": loop["provenance"]["date"],
        "check": [{"variant": c["variant"], "shapes": len(c.get("shapes", [])),
                   "worst rel_error": max((x["rel_error"] for x in c.get("shapes", [])), default=None),
                   **({"error": c["error"]} if "error" in c else {})} for c in run["check"]],
        "accumulation": run["accumulation"],
        "loop": {"shapes": _loop_rows(loop), "accumulation": loop["accumulation"]},
        "ncu_4096": pipes,
        "two_sets": _two_sets(),
        "shorter_loop": {
            "what": "the loop cut again (the ring's barrier address and the descriptors' low words carried from "
                    "slice to slice, the warpgroup index read through a shuffle): base = that loop, before = the "
                    "loop before it (main at fd23133), same run, same GPU; block rows are % of cuBLAS per tensor",
            "gpu": shorter["provenance"]["gpu"], "date": shorter["provenance"]["date"],
            "runs": [f"experiments/runs/{FP8_STAGE7_SHORTER}/{p}" for p in
                     ("variants.json", "ncu_base_tensor.txt", "ncu_base_block.txt", "ncu_cublas_tensor.txt")],
            "shapes": _loop_rows(shorter), "accumulation": shorter["accumulation"], "ncu_4096": shorter_pipes,
        },
    }


def _two_sets() -> dict:
    """Stage 7's promoted loop in groups of slices over two accumulator sets (the course's: 4) against one
    slice at a time (group 1), and where the consumers' warps wait (Nsight Compute's stall samples)."""
    d = RUNS / FP8_STAGE7_TWO_SETS
    default = json.loads((d / "variants_default.json").read_text())
    groups = json.loads((d / "variants_groups.json").read_text())
    return {
        "what": "base = the course's loop (two sets, groups of 4 slices), group 1 = one slice at a time, fast n128 = "
                "the 128 x 128 tile without promotion; group_sizes: an earlier run on another H100 where base was "
                "the one-at-a-time loop. Block rows are % of cuBLAS per tensor. stalls: % of the sampled warp "
                "stalls at 4096^3 per tensor, less the warps parked at the kernel's last cluster barrier",
        "gpu": default["provenance"]["gpu"], "date": default["provenance"]["date"],
        "runs": [f"experiments/runs/{FP8_STAGE7_TWO_SETS}/{p}" for p in
                 ("variants_default.json", "variants_groups.json", "ncu_source_group1_tensor.csv",
                  "ncu_source_group4_tensor.csv", "ncu_source_cublas_tensor.csv")],
        "shapes": _loop_rows(default), "group_sizes": _loop_rows(groups),
        "stalls": {name: _stall_shares(d / f"ncu_source_{name}_tensor.csv") for name in ("group1", "group4", "cublas")},
        "ncu_4096": {name: _ncu_speed_of_light(d / f"ncu_{name}_tensor.log") for name in ("group1", "group4", "cublas")},
        "l2_read_sectors": {name: _ncu_metric(RUNS / FP8_STAGE7_L2 / f"ncu_l2_{name}.txt",
                                              "lts__t_sectors_srcunit_tex_op_read.sum") for name in ("tc7", "cublas")},
        "l2_runs": [f"experiments/runs/{FP8_STAGE7_L2}/ncu_l2_{name}.txt" for name in ("tc7", "cublas")],
    }


def _ncu_metric(path: Path, metric: str) -> float:
    """One metric's value from an ``ncu --metrics`` text report (thousands separators dropped)."""
    return float(re.search(rf"{re.escape(metric)}\s+\S+\s+([\d,.]+)", path.read_text()).group(1).replace(",", ""))


def _ncu_speed_of_light(path: Path) -> dict:
    """Duration and L2 throughput (% of its peak) from Nsight Compute's text report."""
    text = path.read_text()
    return {"duration us": float(re.search(r"Duration\s+us\s+([\d.]+)", text).group(1)),
            "l2 throughput pct": float(re.search(r"L2 Cache Throughput\s+%\s+([\d.]+)", text).group(1))}


def _stall_shares(path: Path) -> dict:
    """From Nsight Compute's source page (per SASS instruction, CSV): the % of sampled warp stalls a warp
    spent waiting for its own wgmmas (WARPGROUP.DEPBAR), waiting for a slot's data (a branch held by the
    long scoreboard: the mbarrier try-wait's result), or promoting (FADD / FFMA); out of all samples less
    those of warps parked at the last cluster barrier (UCGABAR_WAIT: the producer warpgroup's idle warps)."""
    rows = list(csv.reader(path.open()))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    col = {name: i for i, name in enumerate(rows[head])}
    shares = {"wgmma wait": 0.0, "slot wait": 0.0, "promotion": 0.0}
    total = 0.0
    for r in rows[head + 1:]:
        if len(r) < len(col):
            continue
        op = r[col["Source"]].split()
        op = op[1] if op and op[0].startswith("@") else (op[0] if op else "")
        samples = float(r[col["Warp Stall Sampling (All Samples)"]] or 0)
        if op == "UCGABAR_WAIT":
            continue
        total += samples
        if op.startswith("WARPGROUP.DEPBAR"):
            shares["wgmma wait"] += samples
        elif op == "BRA":
            shares["slot wait"] += float(r[col["stall_long_sb"]] or 0)
        elif op.split(".")[0] in ("FADD", "FFMA"):
            shares["promotion"] += samples
    return {k: round(100 * v / total, 1) for k, v in shares.items()}


def _loop_rows(run: dict) -> list[dict]:
    """gpu_fp8_stage7_variants.py's timings per shape, as TFLOP/s."""
    rows = []
    for r in run["speed"]:
        M, N, K = r["shape"]
        tf = {k[:-3]: round(2 * M * N * K / (v * 1e-3) / 1e12, 1) for k, v in r.items() if k.endswith(" ms")}
        rows.append({"shape": [M, N, K], **{f"{k} tflops": v for k, v in tf.items()}})
    return rows


def _ncu_pipe(path: Path) -> dict:
    """Nsight Compute's busiest pipeline (%) and executed instructions, from its text report (the
    metric by name, or the InstructionStats section's "Executed Instructions")."""
    text = path.read_text()
    busiest = re.search(r"highest-utilized pipeline \(([\d.]+)%\)", text)
    inst = re.search(r"(?:smsp__inst_executed\.sum|Executed Instructions)\s+inst\s+([\d,]+)", text)
    return {"busiest pipeline pct": float(busiest.group(1)) if busiest else None,
            "instructions": int(inst.group(1).replace(",", "")) if inst else None}


def _blockscaled_row(r: dict) -> dict:
    """fp8_matmul_blockscaled's best tile at one shape, and cuBLAS with the same block scales and per tensor."""
    M, N, K = r["shape"]

    def tf(ms):
        return round(2 * M * N * K / (ms * 1e-3) / 1e12, 1)
    tiles = {k: tf(v) for k, v in r.items() if "_w" in k and isinstance(v, float)}
    best = max(tiles, key=tiles.get)
    return {"shape": [M, N, K], "best": best, "best tflops": tiles[best],
            "cublas block tflops": tf(r["cublas block ms"]) if "cublas block ms" in r else None,
            "cublas tensor tflops": tf(r["cublas tensor ms"])}


SUMMARIES = {
    "nvidia_h200_triton_summary.json": triton_summary,
    "nvidia_h200_tensor_core_summary.json": tensor_core_summary,
    "nvidia_h200_stage_profiles_summary.json": stage_profiles_summary,
    "nvidia_h200_shape_table_summary.json": shape_table_summary,
    "nvidia_h200_host_time_summary.json": host_time_summary,
    "nvidia_h200_fp8_summary.json": fp8_summary,
}


def render(data: dict) -> str:
    return json.dumps(data, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python experiments/summarize.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="only check that the committed summaries are up to date")
    args = p.parse_args(argv)
    stale = []
    for name, make in SUMMARIES.items():
        text, path = render(make()), RESULTS / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)} ({len(text) // 1024} KB)")
    for name in stale:
        print(f"course_lib/results/{name} is not what experiments/runs gives: run python experiments/summarize.py")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
