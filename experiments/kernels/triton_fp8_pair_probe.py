"""Two K-slices a loop step for Triton's promoted FP8 GEMM: does the second slice's wgmma run while the
first is promoted, and is that faster?

    python experiments/kernels/triton_fp8_pair_probe.py                  (a Hopper GPU)
    python experiments/kernels/triton_fp8_pair_probe.py --compile-only    (any machine: TTGIR waits, registers)

Triton puts ``warp_group_dot_wait {pendings = 0}`` straight after a ``tl.dot`` whose result the loop
uses (for an add into fp32) in the same step, so one program's tensor cores idle while it promotes
each slice (experiments/JOURNAL.md, sixth session). Triton's Hopper pipeliner
(``lib/Dialect/TritonGPU/Transforms/Pipeliner/WGMMAPipeline.cpp``, ``dotCanBeProperlyAsync``, its
"rule 3b") leaves a dot in flight when every use of its previous step's result comes after the first
wait of the step. So here each step takes two slices: the even slice's dot gets the wait (which also
finishes the odd slice of the step before), the odd slice's sum is added after that wait, then the odd
slice's dot is issued and stays in flight while the even slice's sum is scaled and added. Half the
promotions then overlap a slice's wgmmas.

A stand-alone kernel shaped like ``fast_fp8.fp8_tma_tile`` / ``blockscaled_tma_tile`` (A and W through
tensor descriptors, the odd slice past K zero-filled by the copy engine; one program per tile, grouped
order), one scale per tensor or row applied once per tile, or block scales per slice. It prints the
relative error against the float64 product of the dequantized operands (C starts as NaN), then GPU
time (``do_bench`` medians) against cuBLAS with the same scaling (``fp8.cublas_fp8_for``) and against the
library's own default (``fp8_matmul`` / ``fp8_matmul_blockscaled``), all in one run. Raw output, never edited.
"""
import argparse
import sys

import torch
import triton
import triton.language as tl

if __name__ == "__main__" and "--compile-only" in sys.argv:
    from course_lib import backend
    backend.use_compile_only("the pair probe's TTGIR and registers")  # before the kernel modules
from course_lib.kernels.coalescing_and_triton.fast import grouped_tile  # noqa: E402


@triton.jit
def pair_kernel(a_ptr, w_ptr, c_ptr, sa_ptr, sw_ptr, M, N, K, stride_sa, stride_sw, stride_sam, stride_swn,
                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BLOCKS: tl.constexpr, GROUP_M: tl.constexpr):
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    row0, col0 = pid_m * BM, pid_n * BN
    a_d = tl.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK])
    w_d = tl.make_tensor_descriptor(w_ptr, [N, K], [K, 1], [BN, BK])
    rows = row0 + tl.arange(0, BM)
    KB = tl.cdiv(K, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    odd = tl.zeros((BM, BN), tl.float32)
    s_odd = tl.zeros((BM,), tl.float32)  # block scales: the odd slice's scale of each row (times W's)
    for k in range(0, K, 2 * BK):
        a = a_d.load([row0, k])
        w = w_d.load([col0, k])
        even = tl.dot(a, w.T)  # Triton waits for every wgmma in flight after this one
        if BLOCKS:
            acc += odd * s_odd[:, None]
        else:
            acc += odd
        a2 = a_d.load([row0, k + BK])  # past K: zeros
        w2 = w_d.load([col0, k + BK])
        odd = tl.dot(a2, w2.T)  # left in flight while the even slice is added
        if BLOCKS:
            kb = k // BK
            s_even = tl.load(sa_ptr + rows * stride_sam + kb, mask=rows < M, other=0.0) \
                * tl.load(sw_ptr + (col0 // 128) * stride_swn + kb)
            acc += even * s_even[:, None]
            more = kb + 1 < KB
            s_odd = tl.load(sa_ptr + rows * stride_sam + kb + 1, mask=(rows < M) & more, other=0.0) \
                * tl.load(sw_ptr + (col0 // 128) * stride_swn + kb + 1, mask=more, other=0.0)
        else:
            acc += even
    if BLOCKS:
        acc += odd * s_odd[:, None]
    else:
        acc += odd
        cols = col0 + tl.arange(0, BN)
        sa = tl.load(sa_ptr + rows * stride_sa, mask=rows < M, other=0.0)
        sw = tl.load(sw_ptr + cols * stride_sw, mask=cols < N, other=0.0)
        acc = acc * sa[:, None] * sw[None, :]
    c_d = tl.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN])
    c_d.store([row0, col0], acc.to(tl.bfloat16))


VARIANTS = [  # (BM, BN, warps, stages); 64 x 128 on 4 warps with 2 stages: two programs fit an SM
    (64, 128, 4, 2), (64, 128, 4, 3), (128, 128, 8, 2), (128, 128, 8, 3), (64, 256, 8, 2), (128, 64, 4, 3),
]


def compile_only() -> None:
    """Compile each variant for sm_90a without a GPU; print the waits in the TTGIR's loop and ptxas's
    registers and spills."""
    import os, re, subprocess, tempfile
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    sig = {n: "i32" for n in ("M", "N", "K", "stride_sa", "stride_sw", "stride_sam", "stride_swn")}
    sig.update(a_ptr="*fp8e4nv", w_ptr="*fp8e4nv", c_ptr="*bf16", sa_ptr="*fp32", sw_ptr="*fp32")
    for blocks in (False, True):
        for bm, bn, warps, stages in VARIANTS:
            if blocks and bn > 128:
                continue
            consts = dict(BM=bm, BN=bn, BK=128, BLOCKS=blocks, GROUP_M=8)
            s = dict(sig, **{n: "constexpr" for n in consts})
            ck = triton.compile(ASTSource(pair_kernel, s, consts), target=GPUTarget("cuda", 90, 32),
                                options=dict(num_warps=warps, num_stages=stages))
            loop = ck.asm["ttgir"].split("scf.for", 1)[1].split("scf.yield", 1)[0]
            waits = re.findall(r"warp_group_dot_wait .*?pendings = (\d+)", loop)
            with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
                f.write(ck.asm["ptx"]); f.flush()
                info = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                                      capture_output=True, text=True).stderr
            regs = re.search(r"Used (\d+) registers", info).group(1)
            spill = re.search(r"(\d+) bytes spill stores", info).group(1)
            print(f"{'block' if blocks else 'tensor'} {bm}x{bn} w{warps} s{stages}: dots in the loop "
                  f"{loop.count('ttng.warp_group_dot ')}, waits in the loop (pendings) {waits}, "
                  f"shared {ck.metadata.shared} B, {regs} registers, {spill} B spilled"
                  + (", ptxas: wgmma serialized" if "C7515" in info else ""))


def launch(qa, qw, c, blocks, bm, bn, warps, stages):
    M, K = qa.values.shape
    N = qw.values.shape[0]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    sa, sw = qa.scales, qw.scales
    st_sa = 0 if sa.numel() == 1 else 1
    st_sw = 0 if sw.numel() == 1 else 1
    pair_kernel[grid](qa.values, qw.values, c, sa, sw, M, N, K, st_sa, st_sw, sa.stride(0), sw.stride(0),
                      bm, bn, 128, blocks, 8, num_warps=warps, num_stages=stages)


def on_gpu() -> None:
    from course_lib import fp8
    from course_lib.kernels.coalescing_and_triton.fast_fp8 import fp8_matmul, fp8_matmul_blockscaled
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    for scaling in ("tensor", "row", "block"):
        blocks = scaling == "block"
        library = fp8_matmul_blockscaled if blocks else fp8_matmul
        for M, N, K in [(1000, 1024, 4224), (512, 384, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                        (4096, 14336, 4096), (4096, 4096, 14336)]:
            qa, qw = fp8.fp8_inputs(M, N, K, scaling, seed=1, device="cuda")
            timed = M >= 4096
            ref = qa.dequantize() @ qw.dequantize().T if M * N <= 4096 * 4096 else None
            cub = fp8.cublas_fp8_for(qa, qw) if timed else None
            ms_cub = triton.testing.do_bench(lambda: cub(qa, qw), return_mode="median") if timed else None
            ms_lib = triton.testing.do_bench(lambda: library(qa, qw), return_mode="median") if timed else None
            line = f"{scaling:6s} {M}x{N}x{K}"
            if timed:
                line += f" | library default {100 * ms_cub / ms_lib:5.1f} %"
            for bm, bn, warps, stages in VARIANTS:
                if blocks and bn > 128:
                    continue
                c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
                try:
                    run = lambda: launch(qa, qw, c, blocks, bm, bn, warps, stages)
                    run(); torch.cuda.synchronize()
                    err = ((c.double() - ref).norm() / ref.norm()).item() if ref is not None else float("nan")
                    nan = torch.isnan(c).sum().item()
                    line += f" | {bm}x{bn} w{warps} s{stages} rel {err:.1e}" + (f" NaN {nan}" if nan else "")
                    if timed:
                        line += f" {100 * ms_cub / triton.testing.do_bench(run, return_mode='median'):5.1f} %"
                except Exception as e:  # a variant that does not fit (shared memory) says so and the rest run
                    line += f" | {bm}x{bn} w{warps} s{stages} {type(e).__name__}: {str(e)[:80]}"
            print(line, flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compile-only", action="store_true")
    args = p.parse_args()
    sys.exit(compile_only() if args.compile_only else on_gpu())
