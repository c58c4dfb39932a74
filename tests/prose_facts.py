"""What a number typed in a notebook's markdown is checked against (tests/test_prose_numbers.py).

A number that comes from a results file carries a marker right after it, ``99 %<!--=EXPR-->``, an
HTML comment the learner never sees. ``EXPR`` is a Python expression evaluated in :func:`namespace`:
the helpers below read the H200 recording and the summaries in ``course_lib/results/``, so when a
recording changes, the test names every sentence that no longer says what the file says.

The helpers read the reference recording (``nvidia_h200.json``) directly, never a learner's own
recording: the prose quotes the H200. A named fact too long for one space-free expression is a
function in the section of the notebook that quotes it (bottom of this file).
"""

from __future__ import annotations

import json
import math
from functools import cache

from course_lib import results
from course_lib.model_shapes import MODEL_SHAPES

SASS_FILE = results.RESULTS_DIR / "numba_kernels_sm90.json"


@cache
def recording() -> results.Results:
    return results.load(results.DEFAULT_GPU_FILE)


def _shape(shape) -> tuple[int, int, int]:
    """4096 -> (4096, 4096, 4096); (M, N, K) as is; a model-shape label ('gpt2 qkv 2k') -> its shape."""
    if isinstance(shape, int):
        return (shape, shape, shape)
    if isinstance(shape, str):
        found = [s.shape for s in MODEL_SHAPES if s.label == shape]
        if not found:
            raise KeyError(f"no model shape labelled {shape!r}; labels: {[s.label for s in MODEL_SHAPES]}")
        return tuple(found[0])
    return tuple(int(v) for v in shape)


def rec(stage: str, dtype: str, shape) -> dict:
    """The H200 record of ``stage`` in ``dtype`` at ``shape``."""
    rows = recording().select(stage, dtype, [_shape(shape)])
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} records of {stage} ({dtype}) at {_shape(shape)} in the H200 recording")
    return rows[0]


def pct(stage: str, dtype: str, shape) -> float:
    """The stage's speed as % of cuBLAS measured in the same call (GPU time)."""
    return 100 * rec(stage, dtype, shape)["ratio_to_cublas"]


def tflops(stage: str, dtype: str, shape) -> float:
    return rec(stage, dtype, shape)["tflops"]


def ms(stage: str, dtype: str, shape) -> float:
    return rec(stage, dtype, shape)["ms"]


def us(stage: str, dtype: str, shape) -> float:
    return 1e3 * rec(stage, dtype, shape)["ms"]


def span(*values) -> tuple[float, float]:
    """(lowest, highest) of the values (or of one iterable): for a range such as 91–95 %."""
    if len(values) == 1 and not isinstance(values[0], (int, float)):
        values = tuple(values[0])
    return (min(values), max(values))


def gmean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def prof(stage: str) -> dict:
    """Nsight Compute's profile of ``stage`` at 4096^3 (the stage_profiles summary)."""
    return results.summary("stage_profiles")["profiles"][stage]


def summary(topic: str) -> dict:
    return results.summary(topic)


@cache
def _sass() -> dict:
    return json.loads(SASS_FILE.read_text())["kernels"]


def sass(kernel: str) -> dict:
    """A numba kernel compiled for sm_90 without a GPU: registers, stack, spills, SASS counts."""
    return _sass()[kernel]


def namespace() -> dict:
    """Everything a marker's expression may use."""
    from course_lib import model_shapes
    from course_lib.kernels import coalescing_and_triton as c04
    from course_lib.kernels import shared_memory_tiling as tiling
    from course_lib.kernels import tensor_cores as tc
    from course_lib.kernels import thread_coarsening as coarsening
    from course_lib.model import waves

    ns = {name: obj for name, obj in globals().items() if callable(obj) and not name.startswith("_")}
    ns.update(
        math=math, waves=waves, tc=tc, c04=c04, coarsening=coarsening, tiling=tiling, model_shapes=model_shapes,
        recorded=recording(), ceil=recording().ceilings, MODEL_SHAPES=MODEL_SHAPES,
        min=min, max=max, abs=abs, round=round, sum=sum, len=len, sorted=sorted,
    )
    return ns


# ---- 00, 01, source_articles


# ---- 02, 03, register_tiling_lab
RT_WARP_FFMA = 4096**3 // 32  # warp-wide multiply-adds (FFMA) of a 4096^3 GEMM
RT_SMS = 132


def rt_profiled_tflops(stage: str) -> float:
    """The rate of ``stage`` in its Nsight Compute profile at 4096^3 (TFLOP/s)."""
    return 2 * 4096**3 / (prof(stage)["time_ms"] * 1e-3) / 1e12


def rt_per_ffma(stage: str, key: str) -> float:
    """A profile count of ``stage`` per warp-wide multiply-add of the 4096^3 GEMM."""
    return prof(stage)[key] / RT_WARP_FFMA


def rt_wavefronts_per_ffma(stage: str = "shared_memory_tiling") -> float:
    """Shared-memory wavefronts (loads and stores) per warp-wide multiply-add."""
    p = prof(stage)
    return (p["shared_load_wavefronts"] + p["shared_store_wavefronts"]) / RT_WARP_FFMA


def rt_wavefronts_per_lds128() -> float:
    """In the tiled kernel: load wavefronts left after one per scalar load of B (one per FFMA),
    per 16-byte load of A."""
    p = prof("shared_memory_tiling")
    return (p["shared_load_wavefronts"] - RT_WARP_FFMA) / (p["shared_load_instructions"] - RT_WARP_FFMA)


def rt_shared_cap_tflops(wavefronts_per_ffma: float | None = None) -> float:
    """What shared memory allows at one wavefront per clock per SM, with the tiled kernel's clock."""
    w = rt_wavefronts_per_ffma() if wavefronts_per_ffma is None else wavefronts_per_ffma
    return RT_SMS * prof("shared_memory_tiling")["sm_clock_ghz"] * 1e9 * 64 / w / 1e12


def rt_share_of_cap(wavefronts_per_ffma: float | None = None) -> float:
    """The tiled kernel's profiled rate as % of the shared-memory cap."""
    return 100 * rt_profiled_tflops("shared_memory_tiling") / rt_shared_cap_tflops(wavefronts_per_ffma)


def rt_time_ratio(stage: str, base: str, shape=4096) -> float:
    """Recorded time of ``stage`` / time of ``base`` (fp32)."""
    return ms(stage, "fp32", shape) / ms(base, "fp32", shape)


def rt_speedup(stage: str, base: str, shape=4096) -> float:
    """Recorded speed of ``stage`` / speed of ``base`` (fp32)."""
    return ms(base, "fp32", shape) / ms(stage, "fp32", shape)


def rt_cublas_ncu() -> dict:
    """Nsight Compute on cuBLAS's fp32 kernel at 4096^3 (recorded with the Triton experiments)."""
    return results.summary("triton")["ncu_fp32"]["cublas_fp32"]


def rt_cublas_instructions() -> float:
    """cuBLAS fp32 at 4096^3: instructions, billions."""
    return rt_cublas_ncu()["smsp__inst_executed.sum"] / 1e9


def rt_cublas_other_instructions() -> float:
    """cuBLAS fp32 at 4096^3: instructions that are not the GEMM's warp-wide multiply-adds, billions."""
    return (rt_cublas_ncu()["smsp__inst_executed.sum"] - RT_WARP_FFMA) / 1e9


def rt_cublas_issue_pct() -> float:
    return rt_cublas_ncu()["smsp__issue_active.avg.pct_of_peak_sustained_active"]


def rt_cublas_occupancy_pct() -> float:
    """Warps of cuBLAS's resident block(s) per SM as % of 64 (one block per SM)."""
    n = rt_cublas_ncu()
    return 100 * n["Block Limit Registers"] * n["Block Size"] / 32 / 64


def rt_instruction_ratio() -> float:
    """cuBLAS's instructions / register_tiling's (4096^3)."""
    return rt_cublas_ncu()["smsp__inst_executed.sum"] / prof("register_tiling")["instructions"]


def rt_issue_ratio() -> float:
    """How busy register_tiling's schedulers are / how busy cuBLAS's are."""
    return prof("register_tiling")["issue_active_pct"] / rt_cublas_issue_pct()


def rt_depth_tflops(stage: str) -> float:
    """The tiling-depth experiment (tiles reaching 64 or 128 deep along K): TFLOP/s at 4096^3."""
    rec_ = results.load(results.RESULTS_DIR / "nvidia_h200_tiling_depth_experiment.json")
    return rec_.select(stage, "fp32")[0]["tflops"]


# ---- 04, 05, triton_lab
def _triton() -> dict:
    return results.summary("triton")


def tr_article(variant: str, dtype: str, block: int) -> dict:
    """A row of the article's experiment (8192 x 6144 @ 6144 x 4096): variant "plain", "transposed"
    or "transposed+copy", dtype "fp32" (ieee) or "tf32"; keys tflops, ratio_to_cublas."""
    rows = [r for r in _triton()["article_experiment"]
            if (r["variant"], r["dtype"], r["block_size"]) == (variant, dtype, block)]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} article rows for {(variant, dtype, block)}")
    return rows[0]


def tr_speedup(dtype: str, block: int, variant: str = "transposed") -> float:
    """TFLOP/s of the pre-transposed kernel over the plain one (below 1: slower)."""
    return tr_article(variant, dtype, block)["tflops"] / tr_article("plain", dtype, block)["tflops"]


def _repeat_row(dtype: str, size: int) -> dict:
    """The six repeats of triton_fast and of cuBLAS against itself at size^3 (fractions of cuBLAS)."""
    rows = [r for r in _triton()["repeat"] if (r["dtype"], r["size"]) == (dtype, size)]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} repeat rows for {dtype} {size}")
    return rows[0]


def tr_repeat(dtype: str, size: int, who: str = "triton_fast", stat: str = "median") -> float:
    """A repeat statistic in %: who "triton_fast" or "cublas", stat "median", "min" or "max"."""
    return 100 * _repeat_row(dtype, size)[who][stat]


def tr_repeat_span(dtype: str, size: int, who: str = "triton_fast") -> tuple[float, float]:
    """(lowest, highest) of the repeats, in % of cuBLAS."""
    return (tr_repeat(dtype, size, who, "min"), tr_repeat(dtype, size, who, "max"))


def tr_copy(what: str) -> dict:
    """The first transpose-copy measurement whose label is ``what`` (keys ms, gbs)."""
    return next(r for r in _triton()["transpose_copy"] if r["what"] == what)


def tr_copy_span(prefix: str) -> tuple[float, float]:
    """(lowest, highest) TB/s of the transpose-copy measurements whose label starts with ``prefix``."""
    return span(r["gbs"] / 1000 for r in _triton()["transpose_copy"] if r["what"].startswith(prefix))


def tr_tf32_copy(copy: str, size: int) -> float:
    """triton_fast TF32 as % of cuBLAS at size^3 with B^T made by ``copy`` ("b.T.contiguous()" or
    "transpose kernel") inside every call."""
    row = next(r for r in _triton()["tf32_transpose_effect"] if r["copy"] == copy)
    return 100 * row[f"ratio_{size}"]


def tr_tried(dtype: str) -> list[dict]:
    """The configuration families tried for triton_fast in ``dtype``, best first."""
    return _triton()["tried"][dtype]


def tr_tried_pct(dtype: str, family: str, size: int = 4096) -> float:
    """% of cuBLAS of the best configuration of one family tried for triton_fast."""
    row = next(r for r in tr_tried(dtype) if r["family"] == family)
    return 100 * row[f"ratio_{size}"]


def tr_best_without(dtype: str, word: str, size: int = 4096) -> float:
    """The best % of cuBLAS among the families tried whose name does not contain ``word``."""
    return max(100 * r[f"ratio_{size}"] for r in tr_tried(dtype) if word not in r["family"])


def tr_ncu(kernel: str, key: str) -> float:
    """A value of the Nsight Compute comparisons of triton_fast with cuBLAS (fp32 or 16-bit)."""
    t = _triton()
    for part in ("ncu_fp32", "ncu_16bit", "ncu_fp32_before"):
        if kernel in t[part]:
            return t[part][kernel][key]
    raise KeyError(kernel)



# ---- 06, 07, hopper_lab
def tc_factor(stage: str, before: str, n: int) -> float:
    """A step of the staircase: TFLOP/s of ``stage`` / TFLOP/s of ``before`` at n^3 (bf16)."""
    return tflops(stage, "bf16", n) / tflops(before, "bf16", n)


def tc_loss(stage: str, before: str, n: int) -> float:
    """How much slower ``stage`` is than ``before`` at n^3, in % (negative: faster)."""
    return 100 * (1 - tc_factor(stage, before, n))


def tc_cublas_band(dtype: str = "bf16", min_m: int = 1024) -> tuple[float, float]:
    """cuBLAS timed against itself in the recording (its ``cublas`` rows with M >= ``min_m``), % ."""
    return span(100 * r["ratio_to_cublas"] for r in recording().select("cublas", dtype) if r["M"] >= min_m)


# deep_dives/hopper_lab: the stage-6 experiments (nvidia_h200_tensor_core_summary.json)
def _hl() -> dict:
    return results.summary("tensor_core")


def hl_stream_k(stream_k: bool, cluster: int, group_m: int, n: int) -> tuple[float, float]:
    """The scheduling experiment at n^3: (lowest, highest) % of cuBLAS over the setting's runs."""
    got = [100 * r["ratio_to_cublas"] for r in _hl()["stream_k"]
           if (r["stream_k"], r["cluster"], r["group_m"], r["M"]) == (stream_k, cluster, group_m, n)]
    return span(got)


def hl_ncu(kernel: str, key: str) -> float:
    """Nsight Compute at 4096^3: kernel "tc6", "tc6_sk" or "cublas16"."""
    return _hl()["ncu_4096"][kernel][key]


def hl_active_more() -> float:
    """% more SM active cycles (averaged over all 132 SMs) with the K-slice schedule than with whole tiles."""
    key = "SM Active Cycles (cycle)"
    return 100 * (hl_ncu("tc6_sk", key) / hl_ncu("tc6", key) - 1)


def hl_tl(n: int, key: str) -> float:
    """The stage-6 timeline at n^3 (medians over consumers and tiles)."""
    return next(s for s in _hl()["timeline"]["sizes"] if s["shape"][0] == n)[key]


def hl_mainloop_over_ideal(n: int) -> float:
    """% by which a tile's mainloop exceeds the tensor cores' ideal count of cycles."""
    return 100 * (hl_tl(n, "mainloop_cycles") / hl_tl(n, "ideal_mainloop_cycles") - 1)


def hl_between_tiles_share(n: int) -> float:
    """Staging and the gap to the next tile, as % of a tile's mainloop."""
    return 100 * (hl_tl(n, "epilogue_cycles") + hl_tl(n, "gap_to_next_tile_cycles")) / hl_tl(n, "mainloop_cycles")


def hl_clock_tflops(n: int, mhz: float | None = None) -> float:
    """TFLOP/s a consumer's lifetime in cycles gives at ``mhz`` (default: clock64 / globaltimer)."""
    mhz = hl_tl(n, "sm_clock_mhz") if mhz is None else mhz
    return 2 * n**3 / (hl_tl(n, "consumer_lifetime_cycles") / (mhz * 1e6)) / 1e12


def hl_smi_mhz() -> tuple[float, float]:
    """nvidia-smi's SM clock over the sustained epilogue runs."""
    return span(r["sm_clock_mhz_smi"] for r in _hl()["epilogue_overlap"])


def hl_epi(n: int, variant: str, key: str) -> list[float]:
    """A value of the epilogue experiment at n^3 for each round ("tc6", "overlap", "split", "cublas")."""
    return [r[key] for r in _hl()["epilogue_overlap"] if (r["size"], r["variant"]) == (n, variant)]


def hl_epi_sustained(n: int, variant: str) -> tuple[float, float]:
    return span(hl_epi(n, variant, "sustained_tflops"))


def hl_between(variant: str) -> tuple[float, float]:
    """Cycles between tiles (staging + gap) of a variant, over both sizes and rounds."""
    return span(e + g for n in (4096, 8192) for e, g in zip(hl_epi(n, variant, "epilogue_cycles"),
                                                                 hl_epi(n, variant, "gap_to_next_tile_cycles")))


def hl_mainloop_growth(variant: str) -> tuple[float, float]:
    """Cycles a variant's mainloop grew against the serial epilogue's, round by round, both sizes."""
    return span(v - b for n in (4096, 8192) for v, b in zip(hl_epi(n, variant, "mainloop_cycles"),
                                                               hl_epi(n, "tc6", "mainloop_cycles")))


def hl_fewer_cycles(n: int, variant: str = "split") -> float:
    """% fewer cycles per consumer than the serial epilogue (mean of the rounds)."""
    pairs = list(zip(hl_epi(n, variant, "consumer_lifetime_cycles"), hl_epi(n, "tc6", "consumer_lifetime_cycles")))
    return 100 * sum(1 - v / b for v, b in pairs) / len(pairs)


def hl_sustained_gain(n: int, variant: str = "split") -> float:
    """% more sustained TFLOP/s than the serial epilogue (mean of the rounds)."""
    pairs = list(zip(hl_epi(n, variant, "sustained_tflops"), hl_epi(n, "tc6", "sustained_tflops")))
    return 100 * sum(v / b - 1 for v, b in pairs) / len(pairs)


def hl_power_span(skip_first: bool = True) -> tuple[float, float]:
    """Average power of the sustained runs, W (without the first run, started from an idle GPU)."""
    runs = [r["power_w"] for r in _hl()["epilogue_overlap"]]
    return span(runs[1:] if skip_first else runs)


def hl_power_first() -> float:
    return _hl()["epilogue_overlap"][0]["power_w"]


def hl_power_sample(key: str, how=max) -> float:
    """Over the power probe's samples: how (max/min) of ``key``."""
    return how(s[key] for s in _hl()["power_sampling"]["samples"])


def hl_power_at(t: float, key: str) -> float:
    """The power probe's sample nearest ``t`` seconds after the GEMMs began."""
    return min(_hl()["power_sampling"]["samples"], key=lambda s: abs(s["t_s"] - t))[key]


def hl_smi_ghz() -> tuple[float, float]:
    lo, hi = hl_smi_mhz()
    return (lo / 1000, hi / 1000)


def hl_smi_overstatement() -> tuple[float, float]:
    """% by which nvidia-smi's SM clock exceeded clock64 / globaltimer's (both sizes' timelines)."""
    lo, hi = hl_smi_mhz()
    base = [hl_tl(n, "sm_clock_mhz") for n in (4096, 8192)]
    return (100 * (lo / max(base) - 1), 100 * (hi / min(base) - 1))


def hl_direct_stores() -> float:
    """% longer mainloop with direct global stores instead of TMA (4096^3)."""
    d = _hl()["epilogue_direct_stores_4096"]
    return 100 * (d["direct_mainloop_cycles"] / d["serial_mainloop_cycles"] - 1)




# ---- 08, real_shapes_lab, how_we_measure

def _model(label: str):
    return next(s for s in MODEL_SHAPES if s.label == label)


def _label(shape) -> str:
    """A model shape's label from its label or its (M, N, K) (markers are written without spaces)."""
    from course_lib.model_shapes import find

    return shape if isinstance(shape, str) else find(tuple(shape)).label


def _decode_labels() -> list[str]:
    return [s.label for s in MODEL_SHAPES if s.phase == "decode"]


def best_rate(stage: str, dtype: str) -> float:
    """The stage's best TFLOP/s in ``dtype`` anywhere in the H200 recording."""
    return max(r["tflops"] for r in recording().select(stage, dtype))


def pct_of_best(stage: str, dtype: str, shape) -> float:
    """The stage's rate at ``shape`` as % of its own best rate (same denominator as a bound on busy SMs)."""
    return 100 * tflops(stage, dtype, shape) / best_rate(stage, dtype)


def cublas_pct_of_best(stage: str, dtype: str, shape) -> float:
    """cuBLAS's rate in the same call as ``stage`` at ``shape``, as % of cuBLAS's best rate."""
    return 100 * rec(stage, dtype, shape)["cublas_tflops"] / recording().ceilings["cublas_peak_tflops"][dtype]


def busy_bound(M: int, N: int, tile_m: int = 128, tile_n: int = 256) -> float:
    """% of the time whole tiles can keep 132 SMs busy: tiles / (rounds x 132)."""
    from course_lib.model import waves

    w = waves.gemm_waves(M, N, tile_m, tile_n, occupancy=1)
    return 100 * w.blocks / (w.waves * w.sms)


def ridge(dtype: str) -> float:
    """FLOP per byte where the recording's two roofs meet (best cuBLAS / copy bandwidth)."""
    c = recording().ceilings
    return c["cublas_peak_tflops"][dtype] * 1e3 / c["copy_bandwidth_gbs"]


def shape_gmean(stage: str, dtype: str, without=None) -> float:
    """Geometric mean of % of cuBLAS over the model-shape table (rows the stage has), less ``without``."""
    skip = _label(without) if without is not None else None
    rows = recording().select(stage, dtype, [s.shape for s in MODEL_SHAPES if s.label != skip])
    return 100 * gmean(r["ratio_to_cublas"] for r in rows)


def roof_pct(stage: str, dtype: str, shape) -> float:
    """% of the recording's copy bandwidth: the least bytes (A, B read once, C written once) / time."""
    M, N, K = _shape(shape)
    nbytes = least_bytes(M, N, K, dtype)
    return 100 * nbytes / (ms(stage, dtype, shape) * 1e-3) / (recording().ceilings["copy_bandwidth_gbs"] * 1e9)


def least_bytes(M: int, N: int, K: int, dtype: str) -> int:
    """The least bytes an M x N x K product in ``dtype`` moves: A and B read once, C written once.
    Element sizes from the course's dtypes (course_lib.model.hardware.itemsize: ValueError naming them
    for any other); e4m3's products give C in bf16."""
    from course_lib import dtypes
    from course_lib.model import hardware
    from course_lib.model_shapes import bytes_moved

    d = dtypes.get(dtype)
    if d.operands == "fp8":
        return (M * K + K * N) * hardware.itemsize(d) + M * N * hardware.itemsize("bf16")
    return bytes_moved(M, N, K, hardware.itemsize(d))


def intensity(shape, dtype: str = "bf16") -> float:
    """FLOP per byte of the least traffic (A, B read once, C written once) at a model shape."""
    M, N, K = _shape(shape)
    return 2 * M * N * K / least_bytes(M, N, K, dtype)


def bound_pct(stage: str, dtype: str, shape) -> float:
    """% of the attainable bound: the larger of the memory time (least bytes / copy bandwidth) and
    the compute time (2MNK / the best cuBLAS rate in ``dtype``), over the stage's time."""
    M, N, K = _shape(shape)
    compute_ms = 2 * M * N * K / (recording().ceilings["cublas_peak_tflops"][dtype] * 1e9)
    return max(roof_pct(stage, dtype, shape), 100 * compute_ms / ms(stage, dtype, shape))


def decode_span(stage: str, dtype: str, what: str) -> tuple[float, float]:
    """Over the decode rows the stage has: ``what`` = "roof" (% of the copy roof), "bound" (% of the
    larger of the two bounds) or "cublas" (% of cuBLAS)."""
    have = [lb for lb in _decode_labels() if recording().select(stage, dtype, [_model(lb).shape])]
    f = {"roof": roof_pct, "bound": bound_pct, "cublas": pct}[what]
    return span(f(stage, dtype, lb) for lb in have)


def called_gmean(stage: str, dtype: str) -> float:
    """Geometric mean over the model-shape table of the ratio to cuBLAS as called, %."""
    rows = recording().select(stage, dtype, [s.shape for s in MODEL_SHAPES])
    return 100 * gmean(r["ratio_to_cublas_as_called"] for r in rows)


def flush_saving_span(kernels=("cublas", "triton_fast")) -> tuple[float, float]:
    """% less time at the decode rows when the flush only reads (L2 left clean) instead of writing."""
    f = results.summary("shape_table")["flush_ms"]
    return span(100 * (1 - f[lb][k]["read"] / f[lb][k]["write"]) for lb in _decode_labels() if lb in f
                for k in kernels if k in f[lb])


def flush_change_span(kernel: str = "tc_6_tma_store") -> tuple[float, float]:
    """|read - write| / write, in %, at the decode rows ``kernel`` has."""
    f = results.summary("shape_table")["flush_ms"]
    return span(100 * abs(f[lb][kernel]["read"] / f[lb][kernel]["write"] - 1) for lb in _decode_labels()
                if lb in f and kernel in f[lb])


def flush_roof_span(kernel: str, how: str) -> tuple[float, float]:
    """% of the summary's copy roof at the decode rows, timed after a ``how`` ("write"/"read") flush."""
    from course_lib.model_shapes import bytes_moved

    s = results.summary("shape_table")
    bw = s["flush_copy_bandwidth_gbs"] * 1e9
    out = []
    for lb in _decode_labels():
        f = s["flush_ms"].get(lb, {})
        if kernel in f:
            out.append(100 * bytes_moved(f["M"], f["N"], f["K"], 2) / (f[kernel][how] * 1e-3) / bw)
    return span(out)


def candidate_pct(shape, config: str, dtype: str = "bf16") -> float:
    """A triton_fast candidate's speed at a model shape as % of cuBLAS (the recording's cuBLAS row);
    ``config`` is its label with ``_`` for spaces ("128x128x64_g8_w4_s4_persistent")."""
    label = _label(shape)
    t = next(t for t in results.summary("shape_table")["triton_fast_tuning"] if t["dtype"] == dtype and t["label"] == label)
    return 100 * ms("cublas", dtype, label) / t["candidates_ms"][config.replace("_", " ")]


def schedule_pct(shape, which: str) -> float:
    """Stage 6 at a model shape with ``which`` = "whole_tiles" or "stream_k" forced, % of cuBLAS."""
    return 100 * results.summary("shape_table")["stage6_schedules"][_label(shape)][which]


def variant_pct(shape, variant: str) -> float:
    """A stage-6 variant of the experiments (e.g. "cluster=1,stream_k,n128"), % of cuBLAS."""
    return 100 * results.summary("shape_table")["stage6_variant"][_label(shape)][variant]


def cublas_self_span(dtype: str | None = None, short: bool = False) -> tuple[float, float]:
    """cuBLAS timed against itself in the recording (the ``cublas`` rows), %: runs of under 20 us
    (``short``) or of 20 us and more."""
    rows = [r for r in recording().select("cublas", dtype) if (r["cublas_ms"] < 0.02) == short]
    return span(100 * r["ratio_to_cublas"] for r in rows)


def repeat_cublas_span(dtypes=("fp16", "bf16")) -> tuple[float, float]:
    """The lowest and highest of cuBLAS against itself over the six repeats of ``dtypes``, %."""
    rows = [r for r in results.summary("triton")["repeat"] if r["dtype"] in dtypes]
    return (100 * min(r["cublas"]["min"] for r in rows), 100 * max(r["cublas"]["max"] for r in rows))


def flush_ratio_shift(decode: bool = True) -> float:
    """The largest change, in points of %, of cuBLAS's time / triton_fast's between the two flushes."""
    f = results.summary("shape_table")["flush_ms"]
    labels = [lb for lb in f if (lb in _decode_labels()) == decode]
    return max(abs(100 * (f[lb]["cublas"]["read"] / f[lb]["triton_fast"]["read"]
                          - f[lb]["cublas"]["write"] / f[lb]["triton_fast"]["write"])) for lb in labels)


def flush_large_span(kernels=("cublas", "triton_fast", "tc_6_tma_store")) -> tuple[float, float]:
    """% less time after a read flush than after a write flush at the table's rows that are not decode."""
    f = results.summary("shape_table")["flush_ms"]
    return span(100 * (1 - f[lb][k]["read"] / f[lb][k]["write"]) for lb in f if lb not in _decode_labels()
                for k in kernels if k in f[lb])


def decode_mb_span() -> tuple[float, float]:
    """The least bytes (A, B read once, C written once) of the table's decode rows in bf16, in MB."""
    from course_lib.model_shapes import bytes_moved

    return span(bytes_moved(s.M, s.N, s.K, 2) / 1e6 for s in MODEL_SHAPES if s.phase == "decode")


def host_us(name: str) -> float:
    """Host time per call of the small product (µs), e.g. host_us('triton_fast bf16')."""
    return results.summary("host_time")["host_us_per_call"][name]


def host_decode_span(stage: str, what: str) -> tuple[float, float]:
    """Over the decode rows timed for the host-time summary: ``what`` = "called" (% of cuBLAS, both as
    called), "gpu" (% of cuBLAS, both in GPU time) or "slower" (how many times cuBLAS's time as called)."""
    rows = [d for d in results.summary("host_time")["decode"] if d["stage"] == stage]
    f = {"called": lambda d: 100 * d["as_called_ratio"], "gpu": lambda d: 100 * d["gpu_time_ratio"],
         "slower": lambda d: 1 / d["as_called_ratio"]}[what]
    return span(f(d) for d in rows)


def decode_called_us(stage: str, beside: str = "triton_fast") -> tuple[float, float]:
    """Over the decode rows, ``stage``'s time as called (µs; for "cublas", the cuBLAS time recorded
    beside ``beside``'s bf16 records)."""
    rows = recording().select(beside if stage == "cublas" else stage, "bf16", [_model(lb).shape for lb in _decode_labels()])
    return span(1e3 * r["cublas_ms_as_called" if stage == "cublas" else "ms_as_called"] for r in rows)


def decode_gpu_us(stage: str, beside: str = "triton_fast") -> tuple[float, float]:
    """Over the decode rows, ``stage``'s GPU time (µs; "cublas" as in :func:`decode_called_us`)."""
    rows = recording().select(beside if stage == "cublas" else stage, "bf16", [_model(lb).shape for lb in _decode_labels()])
    return span(1e3 * r["cublas_ms" if stage == "cublas" else "ms"] for r in rows)


def cublas_decode_called_span() -> tuple[float, float]:
    """cuBLAS's time at the decode rows as called (µs)."""
    rows = {d["label"]: d["cublas_as_called_us"] for d in results.summary("host_time")["decode"]}
    return span(rows.values())


# ---- notebook 12: FP8 (course_lib/results/nvidia_h200_fp8_summary.json) ---------------------------

def fp8_row(shape) -> dict:
    """The recorded cuBLAS FP8 / bf16 row of one shape."""
    rows = [r for r in results.summary("fp8")["speed"] if tuple(r["shape"]) == _shape(shape)]
    assert len(rows) == 1, f"no single FP8 row for {shape}"
    return rows[0]


def fp8_tflops(shape, key: str) -> float:
    """TFLOP/s in GPU time, key "bf16", "tensor", "tensor fast", "row", "row fast" or "block"."""
    return fp8_row(shape)[f"{key} tflops"]


def fp8_speedup(shape, key: str, over: str = "bf16") -> float:
    return fp8_tflops(shape, key) / fp8_tflops(shape, over)


def fp8_speedup_span(key: str, over: str = "bf16", shapes=None) -> tuple[float, float]:
    """fp8_speedup's lowest and highest over the large shapes (or ``shapes``)."""
    return span(*(fp8_speedup(s, key, over) for s in (shapes or FP8_LARGE)))


def fp8_scaling_cost_span(key: str, shapes=None) -> tuple[float, float]:
    """% of its per-tensor speed cuBLAS loses with scaling ``key`` ("row", "block"), least and most
    over the large shapes (or ``shapes``)."""
    lo, hi = fp8_speedup_span(key, "tensor", shapes)
    return (100 * (1 - hi), 100 * (1 - lo))


def fp8_accum(data: str, K: int, fast: bool) -> float:
    """cuBLAS's recorded relative error at K (fp32 output), data "normal" or "uniform 0-1"."""
    rows = [r for r in results.summary("fp8")["accumulation"] if r["data"] == data and r["K"] == K]
    return rows[0][f"fast_accum={fast}"]


def outlier_pct(factor: float, fmt: str, scaling: str, block=None) -> float:
    """% error of the ordinary channels next to outlier channels ``factor`` times larger (computed)."""
    from course_lib import fp8

    return 100 * fp8.outlier_error(factor, fmt, scaling, tuple(block) if block else None)


def outlier_span(fmt: str, scaling: str, factors) -> tuple[float, float]:
    return span(*(outlier_pct(f, fmt, scaling) for f in factors))


def fp8_triton(shape, key: str = "best tflops") -> float:
    """The Triton FP8 kernel's recorded row: "best tflops", "best fast tflops", "cublas tflops", ..."""
    rows = [r for r in results.summary("fp8")["triton"]["shapes"] if tuple(r["shape"]) == _shape(shape)]
    assert len(rows) == 1, f"no single Triton FP8 row for {shape}"
    return rows[0][key]


def fp8_triton_pct(shape, fast: bool = False) -> float:
    """% of cuBLAS FP8 (promoted against promoted, fast against fast)."""
    if fast:
        return 100 * fp8_triton(shape, "best fast tflops") / fp8_triton(shape, "cublas fast tflops")
    return 100 * fp8_triton(shape, "best tflops") / fp8_triton(shape, "cublas tflops")


def fp8_triton_pct_span(shapes, fast: bool = False) -> tuple[float, float]:
    return span(*(fp8_triton_pct(s, fast) for s in shapes))


def fp8_triton_accum(K: int, fast: bool) -> float:
    rows = [r for r in results.summary("fp8")["triton"]["accumulation"] if r["K"] == K]
    return rows[0][f"fast={fast}"]


def fp8_model_split(data: str, K: int, pieces: int, size: int = 32) -> float:
    """The model's relative error (course_lib.model.fp8_accumulator, no promotion) when K is cut into
    ``pieces`` ranges of whole 128-wide slices, each summed on its own and the sums added exactly:
    split-K. The inputs are notebook 12's (``size`` x K and K x ``size``, seeded with K); pieces=1 is
    the notebook's "model, fast" column."""
    import torch

    from course_lib import fp8
    from course_lib.gemm import relative_error
    from course_lib.model import fp8_accumulator

    if pieces < 1 or K % 128:
        raise ValueError(f"fp8_model_split cuts K (a multiple of 128) into pieces >= 1; got K={K}, pieces={pieces}")
    g = torch.Generator().manual_seed(K)
    draw = torch.randn if data == "normal" else torch.rand
    a = fp8.quantize(draw(size, K, generator=g)).values.double()
    b = fp8.quantize(draw(K, size, generator=g)).values.double()
    step = 128 * -(-K // 128 // pieces)
    parts = [fp8_accumulator.limited_sum_matmul(a[:, k:k + step], b[k:k + step]) for k in range(0, K, step)]
    assert len(parts) == pieces, f"K={K} does not cut into {pieces} pieces of whole slices"
    return relative_error(sum(parts), a @ b)


def fp8_accum_max(fast: bool) -> float:
    """The largest of cuBLAS's recorded accumulation errors, both kinds of data, every K."""
    return max(r[f"fast_accum={fast}"] for r in results.summary("fp8")["accumulation"])


FP8_LARGE = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 6144, 4096), (4096, 14336, 4096), (4096, 4096, 14336),
             (8192, 4608, 3584)]


def fp8_fast_gain_span(who: str) -> tuple[float, float]:
    """% gained by fast accumulation at the large shapes: who = "triton" (the same tile) or "cublas"."""
    rows = [r for r in results.summary("fp8")["triton"]["shapes"] if tuple(r["shape"]) in FP8_LARGE]
    if who == "triton":
        return span(*(100 * (r["best fast tflops"] / r["best tflops"] - 1) for r in rows))
    return span(*(100 * (r["cublas fast tflops"] / r["cublas tflops"] - 1) for r in rows))


def fp8_cublas_fast_gain_span(shapes=None) -> tuple[float, float]:
    """% cuBLAS gains with fast accumulation, per tensor, in section 4's run (notebook 12's speed
    table), least and most over the large shapes (or ``shapes``); negative where it loses."""
    lo, hi = fp8_speedup_span("tensor fast", "tensor", shapes)
    return (100 * (lo - 1), 100 * (hi - 1))


def fp8_block(shape, key: str) -> float:
    """The block-scaled Triton kernel's recorded row: "best tflops", "cublas block tflops", ..."""
    rows = [r for r in results.summary("fp8")["triton"]["blockscaled"] if tuple(r["shape"]) == _shape(shape)]
    return rows[0][key]


def fp8_block_span(key: str = "best tflops") -> tuple[float, float]:
    return span(*(fp8_block(s, key) for s in FP8_LARGE))


def fp8_block_pct_span() -> tuple[float, float]:
    return span(*(100 * fp8_block(s, "best tflops") / fp8_block(s, "cublas block tflops") for s in FP8_LARGE))


def fp8_large() -> list:
    return FP8_LARGE


def fp8_triton_tma_gain_span() -> tuple[float, float]:
    """% the sweep's best configuration with tensor descriptors (``_tma``) gains over its best with
    pointer loads, at the large shapes (deep_dives/fp8_lab)."""
    gains = []
    for r in results.summary("fp8")["triton"]["shapes"]:
        if tuple(r["shape"]) in FP8_LARGE:
            tma = max(v for k, v in r["configs tflops"].items() if k.endswith("_tma"))
            pointers = max(v for k, v in r["configs tflops"].items() if not k.endswith("_tma"))
            gains.append(100 * (tma / pointers - 1))
    return span(gains)


def fp8_recorded_pct(stage: str, scaling: str, shape) -> float:
    """% of cuBLAS with the same scaling, as ``bench`` recorded ``stage`` in e4m3 (GPU time): the
    stage with its default configuration."""
    rows = recording().select(stage, "e4m3", [_shape(shape)], scaling=scaling)
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} records of {stage} (e4m3, {scaling}) at {_shape(shape)} in the H200 recording")
    return 100 * rows[0]["ratio_to_cublas"]


def fp8_h100_pct(stage: str, scaling: str, shape, key: str = "pct") -> float:
    """% of cuBLAS with the same scaling in bench's recording of the FP8 stages on an H100
    (results.summary("fp8")["h100_record"]): "pct" GPU time, "pct as called"."""
    rows = [r for r in results.summary("fp8")["h100_record"]["rows"]
            if (r["stage"], r["scaling"], tuple(r["shape"])) == (stage, scaling, _shape(shape))]
    if len(rows) != 1:
        raise KeyError(f"{len(rows)} rows of {stage} ({scaling}) at {_shape(shape)} in the H100 recording")
    return rows[0][key]


def fp8_h100_block_default(which: str, shape) -> float:
    """The Triton sweep on the H100: % of cuBLAS block-scaled of the block-scaled default ``which``
    ("before" or "now") at a large shape."""
    return results.summary("fp8")["h100_record"]["triton_block_large"][which]["pct"][" x ".join(map(str, _shape(shape)))]


def fp8_triton_two_per_sm(which: str, shape=None) -> float:
    """Triton FP8 per tensor on an H100, % of cuBLAS: the configuration ``which`` ("one per SM", "two per
    SM", "before") at a quick sweep's ``shape``, or, without one, its geometric mean over the large class."""
    d = results.summary("fp8")["triton_two_per_sm"]
    if shape is None:
        return d["large"][which]["geomean"]
    return d["quick"][which][" x ".join(map(str, _shape(shape)))]


# ---- stage 7: the CUDA FP8 kernel (bench's recording; results.summary("fp8")["stage7"]: the evidence) ----
def tc7_recorded_span(scaling: str, shapes=None) -> tuple[float, float]:
    """Stage 7 as bench recorded it (its defaults: promoted), % of cuBLAS with the same scaling."""
    return span(*(fp8_recorded_pct("tc_7_fp8", scaling, s) for s in (shapes or FP8_LARGE)))


def _tc7_loop(run: str = "loop") -> list[dict]:
    """The loop experiment's rows: "loop" (the H200, 2026-12-04), "shorter_loop" (the H100, 2026-12-05) or
    "two_sets" (an H100, 2026-12-06: the course's groups of slices over two accumulator sets as base)."""
    return results.summary("fp8")["stage7"][run]["shapes"]


def tc7_loop_pct_span(build: str, against: str = "tensor", run: str = "loop") -> tuple[float, float]:
    """In the mainloop's runs: ``build`` ("base tensor", "before tensor", "base tensor fast", "fast n128
    tensor fast", "base block", ...) as % of cuBLAS's ``against`` ("tensor": promoted, "tensor fast"),
    same run; ``run`` as :func:`_tc7_loop`."""
    return span(*(100 * r[f"{build} tflops"] / r[f"cublas {against} tflops"] for r in _tc7_loop(run)))


def tc7_drop_share_span(part: str) -> tuple[float, float]:
    """Of stage 7's drop from fast accumulation on its 128 x 256 tile to its promoted 128 x 128
    default (the mainloop's run, TFLOP/s), the % that ``part`` costs: "tile" (fast, 128 x 256 ->
    128 x 128) or "promotion" (128 x 128, fast -> promoted); least and most over the run's shapes."""
    if part not in ("tile", "promotion"):
        raise ValueError(f"tc7_drop_share_span: part is 'tile' or 'promotion', not {part!r}")
    shares = []
    for r in _tc7_loop():
        fast, n128, promoted = r["base tensor fast tflops"], r["fast n128 tensor fast tflops"], r["base tensor tflops"]
        shares.append(100 * ((fast - n128) if part == "tile" else (n128 - promoted)) / (fast - promoted))
    return span(shares)


def _tc7_ncu(run: str) -> dict:
    s7 = results.summary("fp8")["stage7"]
    return s7["ncu_4096"] if run == "loop" else s7[run]["ncu_4096"]


def tc7_busy(what: str, run: str = "loop") -> float:
    """Nsight Compute's busiest pipeline (the tensor pipe), % of cycles at 4096^3: tc7, tc7_before, cublas
    (run "loop"); tc7, tc7_block, cublas (run "shorter_loop", on the H100)."""
    return _tc7_ncu(run)[what]["busiest pipeline pct"]


def tc7_instructions(what: str, run: str = "loop") -> float:
    """Instructions executed at 4096^3 (Nsight Compute), in millions, as :func:`tc7_busy`."""
    return _tc7_ncu(run)[what]["instructions"] / 1e6


def tc7_stall(who: str, what: str) -> float:
    """Stage 7's promoted loop at 4096^3 per tensor on the H100 of the two-sets run: the % of a warp's
    sampled stalls spent on ``what`` ("wgmma wait", "slot wait", "promotion"), for ``who`` ("group1": one
    slice at a time, "group4": the course's groups, "cublas")."""
    return results.summary("fp8")["stage7"]["two_sets"]["stalls"][who][what]


def tc7_l2_sector_ratio() -> float:
    """L2 sectors read for the SMs by stage 7 (groups of 4) over cuBLAS's at 4096^3 per tensor (Nsight
    Compute's lts__t_sectors_srcunit_tex_op_read, an H100)."""
    n = results.summary("fp8")["stage7"]["two_sets"]["l2_read_sectors"]
    return n["tc7"] / n["cublas"]


def tc7_accum(data: str, K: int, who: str = "tc_7", fast: bool = False) -> float:
    rows = [r for r in results.summary("fp8")["stage7"]["accumulation"] if r["data"] == data and r["K"] == K]
    return rows[0][f"{who} fast_accum={fast}"]


def tc7_constant(name: str) -> int | float:
    """A constexpr of stage 7's source (tc_7_fp8.cu and its headers), as the build compiles it."""
    from course_lib.kernels.tensor_cores import csrc

    return csrc.constant(csrc.CSRC / "tc_7_fp8.cu", name)


def tc7_same_as_cublas_up_to(fast: bool = True) -> int:
    """The largest K up to which stage 7's recorded errors equal cuBLAS's exactly, on both kinds of
    data and at every recorded K below it (stage 7's accumulation run)."""
    rows = sorted(results.summary("fp8")["stage7"]["accumulation"], key=lambda r: r["K"])
    same = 0
    for K in sorted({r["K"] for r in rows}):
        at_k = [r for r in rows if r["K"] == K]
        if any(r[f"tc_7 fast_accum={fast}"] != r[f"cublas fast_accum={fast}"] for r in at_k):
            break
        same = K
    return same




def as_called_us(label: str, key: str) -> float:
    """torch.matmul (bf16) at ``label`` in the as-called experiment (experiments/gpu_as_called.py), µs:
    ``key`` "gpu_us", "host_us", "called_one_by_one_us", "called_no_flush_us", "called_idle_us", or
    as called in the rounds "alone" / beside "tc_6" / beside "triton_fast"."""
    r = results.summary("host_time")["as_called"]["rows"][label]
    return r["called_us"][key] if key in r["called_us"] else r[key]
