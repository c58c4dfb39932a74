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

#include <array>
#include <cstddef>
#include <cstdint>
#include <cuda_bf16.h>
#include <functional>
#include <cuda_runtime_api.h>

namespace tc {

// The operands of one GEMM, in device memory.
struct Gemm {
  const __nv_bfloat16* a;  // M x K
  const __nv_bfloat16* b;  // K x N
  __nv_bfloat16* c;        // M x N
  int M, N, K;
};

// Device memory a launch needs besides its operands: stream-K's and split-K's fp32 partial sums, and
// the flags or counters by which one CTA tells another that its partial sums are written. The caller
// provides it on the launch's stream, each launch its own (tc_binding.h takes it from PyTorch's
// caching allocator), so that launches on two streams at once, or replays of two CUDA graphs, never
// share a byte of it.
struct Workspace {
  std::function<void*(size_t bytes)> scratch;  // `bytes` for this launch; read only after written
  std::function<int*(size_t count)> zeroed;    // `count` ints, zero at the start; the kernel leaves them zero
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
// Stage 6 picks a tile and a schedule by the shape (tc_6_tma_store.cu, plan): 128 x 256 tiles, or
// 128 x 128 tiles where whole 128 x 256 tiles keep fewer than half the clusters busy and K has fewer
// than 32 slices; whole tiles, or stream-K (tiles shared out by K slices) where whole tiles of the
// chosen size keep fewer than 80 % of the clusters busy and K has at least 32 slices; for M <= 128
// (a decode step) the operands swapped, C^T = B^T A^T.
// `schedule` SCHEDULE_AUTO decides by the shape; the others force one (for the tests and experiments;
// forced, the swapped schedule takes any M, in token tiles of 128). `block_n` TILE_AUTO decides the
// tile by the shape; 256, 128 or 64 forces 128 x 256, 128 x 128 or 128 x 64 tiles (ignored by the swapped
// schedule; the shape never picks 128 x 64, an experiment's tile so far).
// Stage 6 takes any M; N and K multiples of 8 (16-byte rows for TMA). Stream-K and the swapped
// schedule's split-K take their partial sums and flags from `ws`.
constexpr int SCHEDULE_AUTO = -1, SCHEDULE_WHOLE_TILES = 0, SCHEDULE_STREAM_K = 1, SCHEDULE_SWAPPED = 2;
constexpr int TILE_AUTO = 0;
void launch_tc_6_tma_store(const Gemm& g, cudaStream_t stream, const Workspace& ws, int group_m = 8,
                           int max_ctas = 0, int schedule = SCHEDULE_AUTO, int block_n = TILE_AUTO);
// What launch_tc_6_tma_store runs at M x N x K with these knobs on this GPU: {tile rows, tile columns,
// schedule} (the swapped schedule's tile is T tokens x 64 columns of C); bad knobs throw as there.
std::array<int, 3> tc_6_tma_store_plan(int M, int N, int K, int max_ctas = 0, int schedule = SCHEDULE_AUTO,
                                       int block_n = TILE_AUTO);

// Stage 7: C = (A W^T) scaled, from e4m3 A (M x K) and W (N x K, the weight of nn.Linear; both
// K-major, as wgmma requires for 8-bit inputs), bf16 C (M x N). The scales are fp32:
//   SCALING_TENSOR: scale_a[0], scale_w[0]            - applied to each tile once, after the sum
//   SCALING_ROW:    scale_a[M], scale_w[N]            - the same, per row of C and per column
//   SCALING_BLOCK:  scale_a[M][ceil(K/128)] (1 x 128 blocks), scale_w[ceil(N/128)][ceil(K/128)]
//                   (128 x 128 blocks)                - applied to each 128-wide K slice's partial
//                   sums as they are added into fp32 registers
// The sums are promoted into fp32 registers every 128 of K unless `fast_accumulation` (per tensor or
// row only): then they stay in the tensor core's accumulator for all of K.
// Any M; K a multiple of 16 and N of 8 (16-byte rows for TMA).
// `schedule` (SCHEDULE_* above): SCHEDULE_AUTO takes the operands swapped for M <= 128, a decode step
// (tc_7_decode.cuh: 64 rows of W x T tokens per CTA, K split into ranges where the tiles are few, the
// ranges' partial sums and counters from `ws`), and whole tiles otherwise; SCHEDULE_WHOLE_TILES and
// SCHEDULE_SWAPPED force one (forced, the swapped schedule takes any M, in token tiles of 128). Stage 7
// has no stream-K. `group_m` and `max_ctas` are the whole-tile kernel's (as stage 5's).
constexpr int SCALING_TENSOR = 0, SCALING_ROW = 1, SCALING_BLOCK = 2;
struct Fp8Gemm {
  const uint8_t* a;       // M x K e4m3
  const uint8_t* w;       // N x K e4m3
  const float* scale_a;
  const float* scale_w;
  __nv_bfloat16* c;       // M x N
  int M, N, K;
  int scaling;
  bool fast_accumulation;
};
void launch_tc_7_fp8(const Fp8Gemm& g, cudaStream_t stream, const Workspace& ws, int group_m = 8, int max_ctas = 0,
                     int schedule = SCHEDULE_AUTO);

}  // namespace tc
