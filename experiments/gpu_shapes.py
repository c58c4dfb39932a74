"""The final kernels on the model shape table (course_lib.model_shapes), every candidate timed.

For each shape of the table (and 4096^3), each course dtype of triton_fast: cuBLAS, then every
candidate triton_fast's heuristic names for the shape (plus EXTRA candidates at the squares), each
timed with the course's timer (CUDA events, L2 flushed) and checked against cuBLAS; cuBLAS again at
the end, the ratio taken against the mean of its two timings. Stage 6: its automatic schedule,
whole tiles and stream-K. Writes $OUT/shapes_explore.json; prints one line per measurement.
Options: ``--extra`` (more candidates for small M and few tiles), ``--flush`` (cuBLAS, triton_fast's pick and
stage 6 timed after a write flush and after a read flush), ``--tc6-variants`` (the stage-6 variant's
tile widths, cluster sizes and schedules).

    COURSE_BACKEND=gpu python3 experiments/gpu_shapes.py --out DIR [--dtypes bf16,fp32] [--budget S]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from course_lib import backend, bench
from course_lib.gemm import flops, random_inputs
from course_lib.kernels import coalescing_and_triton as c04
from course_lib.kernels.coalescing_and_triton import autotune
from course_lib.kernels import tensor_cores as tc
from course_lib.model_shapes import MODEL_SHAPES
from course_lib.registry import get_stage
from course_lib.timing import time_fn

F = c04.FastConfig
# Candidates tried at the squares beside FAST_CONFIGS (closing the last points to cuBLAS).
EXTRA = {
    "fp16": (F(128, 256, 64, group_m=16, num_warps=8, num_stages=4, persistent=True, epilogue_split=2),
             F(128, 256, 64, group_m=4, num_warps=8, num_stages=4, persistent=True, epilogue_split=2),
             F(256, 128, 64, group_m=8, num_warps=8, num_stages=3, persistent=True, epilogue_split=2),
             F(256, 128, 64, group_m=8, num_warps=8, num_stages=4, persistent=True, epilogue_split=2),
             F(128, 256, 64, group_m=8, num_warps=8, num_stages=4, epilogue_split=2),
             F(128, 128, 64, group_m=8, num_warps=4, num_stages=5, persistent=True, epilogue_split=2)),
    "fp32": (F(64, 64, 64, group_m=8, num_warps=4, num_stages=2, epilogue_split=2),
             F(64, 64, 64, group_m=16, num_warps=4, num_stages=3, epilogue_split=2),
             F(64, 128, 32, group_m=16, num_warps=4, num_stages=3, epilogue_split=2),
             F(128, 64, 32, group_m=16, num_warps=4, num_stages=3),
             F(64, 64, 64, group_m=16, num_warps=4, num_stages=2, persistent=True, epilogue_split=2),
             F(128, 128, 32, group_m=8, num_warps=8, num_stages=3)),
}
EXTRA["bf16"] = EXTRA["fp16"]
EXTRA["tf32"] = (F(128, 256, 32, group_m=16, num_warps=8, num_stages=4, b_layout="nk", persistent=True, epilogue_split=2),
                 F(256, 128, 32, group_m=8, num_warps=8, num_stages=3, b_layout="nk", persistent=True, epilogue_split=2))


# Candidates tried beside the heuristic's: for M <= 64 (longer K-slices, other depths and widths),
# and for C of one to two waves of big tiles (smaller tiles, persistent or two programs per SM).
def extra_decode(dtype: str, M: int) -> list:
    bm = max(16, 1 << (M - 1).bit_length()) if M > 1 else 16
    bk = 256 if dtype in ("fp16", "bf16") else 128
    out = []
    for bn in (32, 64):
        for split in (1, 2, 4, 8):
            out.append(F(bm, bn, bk, group_m=1, num_warps=4, num_stages=3, split_k=split))
        out.append(F(bm, bn, bk // 2, group_m=1, num_warps=4, num_stages=6, split_k=4))
        out.append(F(bm, bn, bk // 2, group_m=1, num_warps=8, num_stages=4, split_k=4))
    return out


def extra_small(dtype: str) -> list:
    bk = 64 if dtype in ("fp16", "bf16") else 32
    nk = "nk" if dtype == "tf32" else "kn"
    return [F(128, 128, 2 * bk, group_m=8, num_warps=8, num_stages=3, b_layout=nk, persistent=True),
            F(128, 128, 2 * bk, group_m=8, num_warps=4, num_stages=3, b_layout=nk, persistent=True),
            F(128, 128, bk, group_m=8, num_warps=8, num_stages=4, b_layout=nk, persistent=True),
            F(128, 128, bk, group_m=8, num_warps=4, num_stages=3, b_layout=nk),
            F(128, 128, bk, group_m=8, num_warps=4, num_stages=4, b_layout=nk, persistent=True, epilogue_split=2),
            F(128, 128, bk, group_m=8, num_warps=8, num_stages=4, b_layout=nk, persistent=True, epilogue_split=2),
            F(64, 256, bk, group_m=8, num_warps=4, num_stages=4, b_layout=nk, persistent=True, epilogue_split=2),
            F(128, 64, bk, group_m=8, num_warps=4, num_stages=4, b_layout=nk, persistent=True),
            F(64, 128, bk, group_m=8, num_warps=4, num_stages=4, b_layout=nk, persistent=True),
            F(128, 128, bk, group_m=8, num_warps=8, num_stages=2, b_layout=nk),
            F(128, 128, bk, group_m=8, num_warps=8, num_stages=4, b_layout=nk, split_k=2)]


def rel_err(c: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.norm(c.double() - ref.double()) / torch.linalg.norm(ref.double()))


def flush_study(a, b, dtype: str, M: int, N: int, K: int) -> dict:
    """Median ms of cuBLAS, triton_fast (its autotuned pick) and stage 6 (bf16, shapes of multiples
    of 8) after a write flush (L2 left dirty, the course's timer) and after a read flush (L2 left
    clean), each twice in alternation."""
    fns = {"cublas": get_stage("cublas").gemm(dtype), "triton_fast": get_stage("triton_fast").gemm(dtype)}
    if dtype == "bf16" and all(d % 8 == 0 for d in (M, N, K)):
        fns["tc_6_tma_store"] = get_stage("tc_6_tma_store").gemm(dtype)
    out = {name: {"write": [], "read": []} for name in fns}
    for _ in range(2):
        for name, fn in fns.items():
            for how in ("write", "read"):
                out[name][how].append(time_fn(lambda: fn(a, b), budget_ms=40, flush=how).median_ms)
    return out


def tc6_variants(M: int, N: int, K: int, sms: int) -> dict:
    """The stage-6 variant (experiments/kernels/tc_6_stream_k.cu) with each tile width, cluster size
    and schedule, one CTA per SM at most, checked and timed against cuBLAS (bf16)."""
    import tc_6_stream_k as variant

    a, b = random_inputs(M, N, K, "bf16")
    cublas = get_stage("cublas").gemm("bf16")
    ref = cublas(a, b)
    c1 = time_fn(lambda: cublas(a, b), budget_ms=40).median_ms
    res = {}
    for block_n in (256, 128):
        for cluster in (2, 1):
            for stream_k in (False, True):
                fn = variant.persistent_variant(cluster=cluster, group_m=8, max_ctas=sms, stream_k=stream_k,
                                                block_n=block_n)
                try:
                    err = rel_err(fn(a, b), ref)
                    res[fn.__name__] = {"ms": time_fn(lambda: fn(a, b), budget_ms=40).median_ms, "err": err}
                except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                    res[fn.__name__] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
    c2 = time_fn(lambda: cublas(a, b), budget_ms=40).median_ms
    cms = (c1 + c2) / 2
    print(f"{M}x{N}x{K} stage-6 variant: " + ", ".join(
        f"{k.split('[', 1)[1][:-1]}: {100 * cms / v['ms']:.1f} % err {v['err']:.1e}" if "ms" in v else f"{k}: {v['error']}"
        for k, v in res.items()), flush=True)
    return {"M": M, "N": N, "K": K, "dtype": "bf16", "stage": "tc_6_stream_k variant", "cublas_ms": [c1, c2],
            "candidates": res}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dtypes", default="bf16,fp16,tf32,fp32")
    p.add_argument("--budget", type=float, default=400, help="stop starting new shapes after this many seconds")
    p.add_argument("--tc6", action="store_true", help="also stage 6's schedules (bf16)")
    p.add_argument("--tc6-variants", action="store_true",
                   help="also the stage-6 variant: tiles 128 x 256 / 128 x 128, clusters 1 / 2, with and without stream-K")
    p.add_argument("--squares", action="store_true", help="EXTRA candidates at 4096^3")
    p.add_argument("--extra", action="store_true", help="extra candidates for small M and few tiles")
    p.add_argument("--flush", action="store_true",
                   help="also time cuBLAS, triton_fast's pick and stage 6 with a read flush (L2 left clean)")
    p.add_argument("--only", default="", help="comma-separated labels of model shapes, spaces as dashes, square-4096 for 4096^3 (default: all + 4096^3)")
    args = p.parse_args()
    t0 = time.time()
    out = {"provenance": bench.provenance("experiments/gpu_shapes.py"), "copy_bandwidth_gbs": bench.copy_bandwidth_gbs(),
           "rows": []}
    print(f"copy bandwidth {out['copy_bandwidth_gbs']:.0f} GB/s", flush=True)
    shapes = [(4096, 4096, 4096)] + [s.shape for s in MODEL_SHAPES]
    if args.only:
        only = args.only.split(",")
        shapes = [(4096, 4096, 4096)] * ("square-4096" in only) + [
            s.shape for s in MODEL_SHAPES if s.label.replace(" ", "-") in only]
    sms = backend.sm_count()
    for shape in shapes:
        if time.time() - t0 > args.budget:
            print("budget reached", flush=True)
            break
        M, N, K = shape
        for dtype in args.dtypes.split(","):
            a, b = random_inputs(M, N, K, dtype)
            cublas = get_stage("cublas").gemm(dtype)
            ref = cublas(a, b)
            c1 = time_fn(lambda: cublas(a, b), budget_ms=40).median_ms
            cands = list(c04.shape_candidates(dtype, M, N, K, sms))
            if shape == (4096, 4096, 4096) and args.squares:
                cands += [c for c in EXTRA[dtype] if c not in cands]
            if args.extra and M <= autotune.SMALL_M:
                cands += [c for c in extra_decode(dtype, M) if c not in cands]
            big = c04.FAST_CONFIGS[dtype][0]
            if args.extra and M > autotune.SMALL_M and -(-M // big.block_m) * -(-N // big.block_n) < 2 * sms:
                cands += [c for c in extra_small(dtype) if c not in cands and dtype != "fp32"]
            res = {}
            for cfg in cands:
                try:
                    c = c04.fast_matmul(a, b, dtype, cfg)
                    err = rel_err(c, ref)
                    ms = time_fn(lambda: c04.fast_matmul(a, b, dtype, cfg), budget_ms=40).median_ms
                    res[cfg.label] = {"ms": ms, "err": err}
                except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                    res[cfg.label] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            c2 = time_fn(lambda: cublas(a, b), budget_ms=40).median_ms
            cms = (c1 + c2) / 2
            row = {"M": M, "N": N, "K": K, "dtype": dtype, "cublas_ms": [c1, c2], "candidates": res}
            if args.flush:
                row["flush"] = flush_study(a, b, dtype, M, N, K)
                print(f"    flush study: {row['flush']}", flush=True)
            out["rows"].append(row)
            ok = {k: v for k, v in res.items() if "ms" in v}
            best = min(ok, key=lambda k: ok[k]["ms"]) if ok else None
            print(f"{M}x{N}x{K} {dtype}: cuBLAS {cms * 1e3:.1f} us ({flops(M, N, K) / cms / 1e9:.0f} TF); best "
                  f"{best} {100 * cms / ok[best]['ms']:.1f} %" if best else f"{M}x{N}x{K} {dtype}: no candidate ran", flush=True)
            for k, v in res.items():
                print(f"    {k:48s} " + (f"{100 * cms / v['ms']:6.1f} %  err {v['err']:.1e}" if "ms" in v else v["error"]),
                      flush=True)
            del a, b, ref
        if args.tc6 and all(d % 8 == 0 for d in shape):
            a, b = random_inputs(M, N, K, "bf16")
            cublas = get_stage("cublas").gemm("bf16")
            ref = cublas(a, b)
            c1 = time_fn(lambda: cublas(a, b), budget_ms=40).median_ms
            res = {}
            for sk in (-1, 0, 1):
                fn = tc.make_gemm("tc_6_tma_store", shape_multiple=get_stage("tc_6_tma_store").shape_multiple,
                                  group_m=8, max_ctas=sms, schedule=sk)
                try:
                    err = rel_err(fn(a, b), ref)
                    ms = time_fn(lambda: fn(a, b), budget_ms=40).median_ms
                    res[str(sk)] = {"ms": ms, "err": err}
                except Exception as e:  # noqa: BLE001
                    res[str(sk)] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
            c2 = time_fn(lambda: cublas(a, b), budget_ms=40).median_ms
            cms = (c1 + c2) / 2
            out["rows"].append({"M": M, "N": N, "K": K, "dtype": "bf16", "stage": "tc_6_tma_store",
                                "cublas_ms": [c1, c2], "candidates": res,
                                "auto_schedule": tc.stage6_schedule(M, N, K)})
            print(f"{M}x{N}x{K} tc_6 ({tc.stage6_schedule(M, N, K)}): " + ", ".join(
                f"sk={k}: {100 * cms / v['ms']:.1f} % err {v['err']:.1e}" if "ms" in v else f"sk={k}: {v['error']}"
                for k, v in res.items()), flush=True)
        if args.tc6_variants and all(d % 8 == 0 for d in shape):
            out["rows"].append(tc6_variants(M, N, K, sms))
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "shapes_explore.json").write_text(json.dumps(out, indent=1))
    print(f"done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
