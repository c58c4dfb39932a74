"""Nsight Compute's view of the course's stages, as the notebooks print it: a table of what the
profiler measured for some stages at 4096³ on the H200, side by side.

Nothing is profiled here: ``experiments/ncu_course_stages.sh`` profiled the stages on the H200 and
``experiments/summarize.py`` keeps what the notebooks show in a summary with its provenance
(``results/nvidia_h200_stage_profiles_summary.json``, read by :func:`course_lib.results.summary`).
"""

from __future__ import annotations

from typing import Any

from course_lib.results import summary

# The rows of :func:`profile_table`: (title, how to compute it from one stage's profile).
_PROFILE_ROWS: dict[str, tuple[str, Any]] = {
    "time": ("time (ms)", lambda p: f"{p['time_ms']:.3g}"),
    "dram": ("read from DRAM (GB)", lambda p: f"{p['dram_read_gb']:.2f}"),
    "l1": ("L1 hit rate (%)", lambda p: f"{p['l1_hit_pct']:.0f}"),
    "l2": ("L2 hit rate (%)", lambda p: f"{p['l2_hit_pct']:.0f}"),
    "sectors": ("sectors per global load request",  # "-": no loads through L1 (TMA copies bypass it)
                lambda p: f"{p['global_load_sectors'] / p['global_load_requests']:.1f}" if p["global_load_requests"] else "-"),
    "load_sectors": ("global load sectors (millions)", lambda p: f"{p['global_load_sectors'] / 1e6:.0f}"),
    "instructions": ("instructions (billions)", lambda p: f"{p['instructions'] / 1e9:.2f}"),
    "per_fma": ("instructions per multiply-add", lambda p: f"{p['instructions'] / (4096**3 / 32):.1f}"),
    "fma_share": ("of them on the FMA pipe (%)", lambda p: f"{100 * p['fma_instructions'] / p['instructions']:.0f}"),
    "shared_loads": ("shared-memory load instructions (billions)", lambda p: f"{p['shared_load_instructions'] / 1e9:.2f}"),
    "wavefronts": ("shared-memory load wavefronts (billions)", lambda p: f"{p['shared_load_wavefronts'] / 1e9:.2f}"),
    "conflicts": ("of them bank conflicts (billions)", lambda p: f"{p['shared_load_bank_conflicts'] / 1e9:.2f}"),
    "registers": ("registers per thread", lambda p: f"{p['registers_per_thread']:.0f}"),
    "threads": ("threads per block", lambda p: f"{p['block_size']:.0f}"),
    "blocks": ("blocks per SM (limit: registers / shared memory)",
               lambda p: f"{p['blocks_per_sm_by_registers']:.0f} / {p['blocks_per_sm_by_shared_memory']:.0f}"),
    "occupancy": ("achieved occupancy (% of 64 warps)", lambda p: f"{p['achieved_occupancy_pct']:.0f}"),
    "issue": ("cycles a scheduler issues (%)", lambda p: f"{p['issue_active_pct']:.0f}"),
    "fma_pipe": ("FMA pipe busy (% of peak)", lambda p: f"{p['fma_pipe_pct']:.0f}"),
    "tensor_pipe": ("tensor pipe busy (% of peak)", lambda p: f"{p['tensor_pipe_pct']:.0f}"),
    "stalls": ("top stalls (cycles per issued instruction)",
               lambda p: ", ".join(f"{k} {v:.1f}" for k, v in list(p["stalls_per_issued_instruction"].items())[:4]
                                   if k != "selected")),
}


def profile_table(stages: list[str], rows: list[str] | None = None) -> str:
    """Nsight Compute's view of some of the course's stages at 4096^3 on the H200, side by side, as
    text (``rows``: keys of the table, default all; the profiles are a summary of a recorded run)."""
    data = summary("stage_profiles")
    profiles = data["profiles"]
    missing = [s for s in stages if s not in profiles]
    if missing:
        raise LookupError(f"no profile of {missing}; profiled: {', '.join(profiles)}")
    width = max(14, *(len(s) + 2 for s in stages))
    lines = [f"Nsight Compute on {data['provenance']['gpu']}, M = N = K = 4096 (recorded)",
             f"{'':<48}" + "".join(f"{s:>{width}}" for s in stages)]
    for key in rows or list(_PROFILE_ROWS):
        title, cell = _PROFILE_ROWS[key]
        if key == "stalls":
            lines.append(title)
            for s in stages:  # the list on a line of its own: it is long
                lines += [f"  {s}", f"    {cell(profiles[s])}"]
        else:
            lines.append(f"{title:<48}" + "".join(f"{cell(profiles[s]):>{width}}" for s in stages))
    return "\n".join(lines)
