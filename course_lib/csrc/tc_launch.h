// The launchers of the tensor-core stages: one plain C++ function per stage, named for it
// (launch_tc_2_wgmma_tma launches the kernel of tc_2_wgmma_tma.cu).
//
// Every launcher computes C = A * B for row-major bf16 matrices A (M x K), B (K x N) and C (M x N)
// with fp32 accumulation, on `stream`, and throws std::runtime_error with the CUDA error text if
// the launch fails. The caller guarantees: the pointers are device pointers aligned to 16 bytes and
// M, N, K are multiples of 8 (the course's Python wrapper checks both before it calls).
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

// Stage 1: warp-level mma.sync (m16n8k16) fed by ldmatrix from shared memory; sm_80 and newer.
void launch_tc_1_mma_sync(const Gemm& g, cudaStream_t stream);

// Stages 2-6 need sm_90a (wgmma, setmaxnreg) and are compiled only for Hopper.
void launch_tc_2_wgmma_tma(const Gemm& g, cudaStream_t stream);
void launch_tc_3_pipeline(const Gemm& g, cudaStream_t stream);
void launch_tc_4_warp_specialized(const Gemm& g, cudaStream_t stream);
// Persistent stages: `cluster` is 1 or 2 (CTAs sharing one B tile by TMA multicast), `group_m`
// the number of tile rows walked together (L2 reuse), `max_ctas` caps the grid (0: one wave of
// the whole GPU). Stage 6 also takes `stream_k`: share the ragged last wave out by K slices
// (tc_schedule.cuh). Defaults are what the course records; the knobs are for experiments.
void launch_tc_5_persistent(const Gemm& g, cudaStream_t stream, int cluster = 2, int group_m = 8, int max_ctas = 0);
void launch_tc_6_tma_store(const Gemm& g, cudaStream_t stream, int cluster = 2, int group_m = 8, int max_ctas = 0,
                           bool stream_k = false);

#ifdef TC_TIMELINE
// Stage 6's per-tile timeline (tc_6_tma_store.cu; only in builds with -DTC_TIMELINE).
void read_tc6_timeline(long long* host, size_t count);
void clear_tc6_timeline();
size_t tc6_timeline_shape(int dim);
#endif

}  // namespace tc
