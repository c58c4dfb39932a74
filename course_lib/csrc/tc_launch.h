// The launchers of the tensor-core stages: one plain C++ function per stage, named for it
// (launch_tc_2_wgmma_tma launches the kernel of tc_2_wgmma_tma.cu).
//
// Every launcher computes C = A * B for row-major bf16 matrices A (M x K), B (K x N) and C (M x N)
// with fp32 accumulation, on `stream`, and throws std::runtime_error with the CUDA error text if
// the launch fails. The caller guarantees: the pointers are device pointers aligned to 16 bytes and
// M, N, K are multiples of 8 (the course's Python wrapper checks both before it calls) - except
// for stage 0, which reads one element at a time and takes any shape, and stage 6, which takes any M.
//
// Nothing here includes torch: the stage files compile on their own with nvcc (the course's
// compile test does that), and tc_binding.cu is the one file that knows about torch tensors.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace tc {

// The operands of one GEMM, in device memory.
struct Gemm {
  const __nv_bfloat16* a;  // M x K
  const __nv_bfloat16* b;  // K x N
  __nv_bfloat16* c;        // M x N
  int M, N, K;
};

// Stage 0: one mma.sync per warp and K step, its fragments loaded straight from global memory;
// the only stage that takes any M, N and K (and any 2-byte alignment); sm_80 and newer.
void launch_tc_0_mma_sync_minimal(const Gemm& g, cudaStream_t stream);

// Stage 1: warp-level mma.sync (m16n8k16) fed by ldmatrix from shared memory; sm_80 and newer.
void launch_tc_1_mma_sync(const Gemm& g, cudaStream_t stream);

// Stages 2-6 need sm_90a (wgmma, setmaxnreg) and are compiled only for Hopper.
void launch_tc_2_wgmma_tma(const Gemm& g, cudaStream_t stream);
void launch_tc_3_pipeline(const Gemm& g, cudaStream_t stream);
void launch_tc_4_warp_specialized(const Gemm& g, cudaStream_t stream);
// Persistent stages (clusters of 2 CTAs): `group_m` is the number of cluster rows of tiles walked
// together (L2 reuse), `max_ctas` caps the grid (0: as many clusters as fit on the GPU at once).
void launch_tc_5_persistent(const Gemm& g, cudaStream_t stream, int group_m = 8, int max_ctas = 0);
// Stage 6 picks a schedule by the shape: whole tiles; stream-K (tiles shared out by K slices) when
// whole tiles leave clusters idle; for M <= 128 (a decode step) the operands swapped, C^T = B^T A^T.
// `schedule` SCHEDULE_AUTO decides by the shape; the others force one (for the tests and experiments;
// forced, the swapped schedule takes any M, in token tiles of 128). Stage 6 takes any M; N and K
// multiples of 8 (16-byte rows for TMA).
constexpr int SCHEDULE_AUTO = -1, SCHEDULE_WHOLE_TILES = 0, SCHEDULE_STREAM_K = 1, SCHEDULE_SWAPPED = 2;
void launch_tc_6_tma_store(const Gemm& g, cudaStream_t stream, int group_m = 8, int max_ctas = 0,
                           int schedule = SCHEDULE_AUTO);

}  // namespace tc
