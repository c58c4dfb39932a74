"""triton_fast's one-program-per-tile kernel with its tensor descriptors made on the host: what do the
descriptors that every program makes for itself cost at the small and mid-size squares (issue 38)?

    source tools/gpu_env.sh && python3 experiments/kernels/triton_host_descriptors.py   (a Hopper GPU)

``course_lib.kernels.coalescing_and_triton.fast.fast_matmul_kernel`` makes its three descriptors in the
kernel (``tl.make_tensor_descriptor``). Compiled for sm_90a (Triton 3.7.1, on the CPU), each program then
fills three 128-byte tensor maps in shared memory (13 ``tensormap.replace`` each), copies each to global
memory with ``tensormap.cp_fenceproxy ... release.gpu`` and waits on ``fence.proxy.tensormap::generic
.acquire.gpu`` before its first TMA load: three trips to global memory before any data moves. cuBLAS and
stage 6 pass their tensor maps as kernel parameters. Here the same kernel takes
``triton.tools.tensor_descriptor.TensorDescriptor`` arguments made on the host (Triton's launcher
encodes them at each launch), so the programs start loading at once.

The persistent kernel makes its descriptors once per program, so the same question holds for it; a
persistent twin takes given descriptors too. Per shape (bf16 squares 256-3072 and a misaligned 1000^3
and 3000^3) and configuration (the autotuner's 16-bit candidates, C in one box), both kernels are checked against the float64 product (C first filled
with NaN) and timed in GPU time with the course's timer (``course_lib.timing.time_fn``: L2 flushed,
the host's launch kept out), with cuBLAS (``torch.matmul``) in the same alternating rounds. Prints one
line per shape and configuration; the run and what it found go to experiments/runs/ and the journal.
"""

from __future__ import annotations

import statistics

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import course_lib
from course_lib.gemm import relative_error
from course_lib.kernels.coalescing_and_triton.fast import grouped_tile
from course_lib.kernels.coalescing_and_triton.fast_configs import FastConfig, persistent_programs
from course_lib.kernels.coalescing_and_triton.fast_launch import fast_matmul
from course_lib.timing import time_fn


@triton.jit
def host_descriptor_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # fast_matmul_kernel's tile (B read N-major, C stored in one box), the descriptors given.
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([row0, k0]), b_desc.load([k0, col0]), acc)
    c_desc.store([row0, col0], acc.to(c_desc.dtype))


@triton.jit
def host_descriptor_persistent_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # persistent_matmul_kernel's tile loop (B read N-major, C stored in one box), the descriptors given.
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, tl.num_programs(0), flatten=True):
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        row0 = pid_m * BLOCK_M
        col0 = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            acc = tl.dot(a_desc.load([row0, k0]), b_desc.load([k0, col0]), acc)
        c_desc.store([row0, col0], acc.to(c_desc.dtype))


def host_descriptor_matmul(a: torch.Tensor, b: torch.Tensor, cfg: FastConfig, c: torch.Tensor | None = None):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=a.dtype, device=a.device) if c is None else c
    tiles = triton.cdiv(M, cfg.block_m) * triton.cdiv(N, cfg.block_n)
    kernel = host_descriptor_persistent_kernel if cfg.persistent else host_descriptor_kernel
    kernel[(min(tiles, persistent_programs()) if cfg.persistent else tiles,)](
        TensorDescriptor.from_tensor(a, [cfg.block_m, cfg.block_k]),
        TensorDescriptor.from_tensor(b, [cfg.block_k, cfg.block_n]),
        TensorDescriptor.from_tensor(c, [cfg.block_m, cfg.block_n]),
        M, N, K, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return c


SIZES = (256, 512, 1000, 1024, 2048, 3000, 3072)
CONFIGS = (FastConfig(128, 128, 64, num_warps=4, num_stages=6), FastConfig(128, 128, 64, num_warps=8, num_stages=4),
           FastConfig(64, 128, 128, num_warps=4, num_stages=4), FastConfig(128, 256, 64, num_warps=8, num_stages=3),
           FastConfig(128, 128, 64, num_warps=4, num_stages=6, persistent=True),
           FastConfig(64, 128, 128, num_warps=4, num_stages=4, persistent=True),
           FastConfig(128, 256, 64, num_warps=8, num_stages=3, persistent=True))
ROUNDS = 3


def main() -> int:
    course_lib.describe()
    for n in SIZES:
        a, b = course_lib.random_inputs(n, n, n, "bf16", seed=0)
        ref = a.double() @ b.double()
        for cfg in CONFIGS:
            device_made = lambda: fast_matmul(a, b, "bf16", cfg)  # noqa: E731
            host_made = lambda: host_descriptor_matmul(a, b, cfg)  # noqa: E731
            poisoned = torch.full((n, n), float("nan"), dtype=a.dtype, device=a.device)
            errs = (relative_error(device_made(), ref), relative_error(host_descriptor_matmul(a, b, cfg, poisoned), ref))
            if not max(errs) < 1e-2:
                print(f"{n}^3 {cfg.label}: WRONG, relative errors {errs[0]:.2e} / {errs[1]:.2e}; not timed", flush=True)
                continue
            t = {"cublas": [], "device": [], "host": []}
            for _ in range(ROUNDS):
                for name, fn in (("cublas", lambda: torch.matmul(a, b)), ("device", device_made), ("host", host_made)):
                    t[name].append(time_fn(fn, budget_ms=30).median_ms)
            us = {k: 1e3 * statistics.median(v) for k, v in t.items()}
            print(f"{n}^3 {cfg.label:<22} cuBLAS {us['cublas']:7.2f} us | made in the kernel {us['device']:7.2f} us "
                  f"{100 * us['cublas'] / us['device']:5.1f} % | made on the host {us['host']:7.2f} us "
                  f"{100 * us['cublas'] / us['host']:5.1f} % | errors {errs[0]:.1e} {errs[1]:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
