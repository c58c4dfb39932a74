"""Triton's warp specialization on Hopper for the FP8 GEMM's promoted K loop: right, and is it faster?

    python experiments/kernels/triton_fp8_ws_probe.py      (a Hopper GPU)

A stand-alone kernel shaped like ``fast_fp8.fp8_tma_tile`` without the scales (e4m3 A and W through
tensor descriptors, ``max_num_imprecise_acc`` = 128, bf16 C): the K loop as
``tl.range(..., warp_specialize=WS)``, which Triton 3.6 / 3.7 on sm_90 splits into a TMA producer and
two consumer warpgroups of BLOCK_M / 2 rows each (their TTGIR, compiled on the CPU). C stored through a
descriptor or pointers, tiles in grouped order or not. Prints the relative error against the float64
product (C starts as NaN) and the share of ``torch._scaled_mm`` (one scale per tensor, promoted) in
``do_bench`` medians. The run and what it found: experiments/runs/2026-12-06_2335_h100_triton_ws/.
"""
import torch, triton, triton.language as tl
from course_lib import fp8
from course_lib.kernels.coalescing_and_triton.fast_fp8 import grouped_tile

@triton.jit
def k(a_ptr, w_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, WS: tl.constexpr,
      STORE_PTR: tl.constexpr, GROUPED: tl.constexpr, IMP: tl.constexpr):
    if GROUPED:
        pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), 8)
    else:
        pid_m = tl.program_id(0) // tl.cdiv(N, BN); pid_n = tl.program_id(0) % tl.cdiv(N, BN)
    a_d = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    w_d = tl.make_tensor_descriptor(w_ptr, [N, K], [K, 1], [BN, BK])
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in tl.range(0, K, BK, warp_specialize=WS):
        a = a_d.load([pid_m * BM, k0]); w = w_d.load([pid_n * BN, k0])
        acc = tl.dot(a, w.T, acc, max_num_imprecise_acc=IMP)
    if STORE_PTR:
        rows = pid_m * BM + tl.arange(0, BM); cols = pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16), mask=(rows[:, None] < M) & (cols[None, :] < N))
    else:
        c_d = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
        c_d.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))

def alloc(size, align, stream):
    return torch.empty(size, dtype=torch.int8, device="cuda")
triton.set_allocator(alloc)
for M, N, K in [(256, 256, 512), (4096, 4096, 4096), (8192, 8192, 8192)]:
    qa, qw = fp8.fp8_inputs(M, N, K, "tensor", seed=1, device="cuda")
    a, w = qa.values, qw.values
    ref = (a.double() @ w.double().T) if M <= 4096 else None
    cub = triton.testing.do_bench(lambda: torch._scaled_mm(a, w.T, torch.ones((), device="cuda"), torch.ones((), device="cuda"), out_dtype=torch.bfloat16), return_mode="median") if M > 256 else None
    for BM, BN, stages, ws, sp, gr in [(128,128,3,False,False,True),(128,128,3,True,False,True),(128,128,3,True,True,True),(128,128,3,True,False,False),(128,128,3,True,True,False),(128,128,4,True,True,False),(256,128,3,True,True,False),(128,256,3,True,True,False)]:
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        run = lambda: k[grid](a, w, c, M, N, K, BM, BN, 128, ws, sp, gr, 128, num_warps=4, num_stages=stages)
        try:
            run(); torch.cuda.synchronize()
            err = ((c.double() - ref).norm() / ref.norm()).item() if ref is not None else float("nan")
            ms = triton.testing.do_bench(run, return_mode="median") if M > 256 else None
            pct = f"{100*cub/ms:5.1f} %" if ms else ""
            print(f"{M}x{N}x{K} {BM}x{BN} s{stages} ws={ws} ptrstore={sp} grouped={gr}: rel {err:.2e} nan {torch.isnan(c).sum().item()} {pct}", flush=True)
        except Exception as e:
            print(f"{M}x{N}x{K} {BM}x{BN} s{stages} ws={ws} ptrstore={sp} grouped={gr}: {type(e).__name__} {str(e)[:200]}", flush=True)
