// Stage 3 - a ring of shared-memory slots on mbarriers: copies run several slices ahead.
//
// Stage 2 waits for every copy. Here shared memory holds STAGES slices, each with two mbarriers:
//   full[s]  completes when the copy engine has delivered slot s (1 arrival + the bytes);
//   empty[s] completes when every warpgroup has finished reading slot s (CONSUMERS arrivals).
// The same thread that multiplies also refills: after a warpgroup's wgmmas on slot s are done
// it arrives on empty[s]; thread 0 waits for empty[s] and immediately asks for the slice
// STAGES ahead into slot s. During use number u of a slot (u = slice / STAGES) the readers wait
// for parity u % 2 of full[s], and thread 0, before it copies use u + 1's slice, for parity u % 2
// of empty[s] (the release of use u) - the ring's only bookkeeping. Copies now overlap the tensor
// cores, but thread 0 still stalls its warpgroup while it waits to refill; stage 4 gives that job
// to a warp of its own.
//
// Notebook 09 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"

namespace tc {
namespace stage3 {

constexpr int BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = TILE_K;
constexpr int STAGES = 5;                               // 5 x 32 KB of the 227 KB
constexpr int CONSUMERS = BLOCK_M / 64;
constexpr int THREADS = CONSUMERS * WARPGROUP;

struct Smem {
  bf16 a[STAGES][BLOCK_M * BLOCK_K];
  bf16 b[STAGES][BLOCK_K * BLOCK_N];
  uint64_t full[STAGES], empty[STAGES];
};
constexpr int SMEM_BYTES = sizeof(Smem) + SMEM_SLACK;

// Slice ks into ring slot `slot` (tma_load_slice: tc_hopper.cuh).
__device__ __forceinline__ void issue_slice(Smem& s, const CUtensorMap* map_a, const CUtensorMap* map_b, int slot,
                                            int ks, int m0, int n0) {
  tma_load_slice<BLOCK_M, BLOCK_N>(s.a[slot], s.b[slot], &s.full[slot], map_a, map_b, ks, m0, n0);
}

__global__ void __launch_bounds__(THREADS)
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, bf16* c, int M, int N,
       int K) {
  extern __shared__ uint8_t smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(align_smem(smem_raw));
  const int wg = threadIdx.x / WARPGROUP;
  const bool wg_leader = threadIdx.x % WARPGROUP == 0;
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;
  const int k_slices = ceil_div(K, BLOCK_K);

  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, CONSUMERS);  // released by each consumer warpgroup
  __syncthreads();

  // ---- prologue: fill the ring --------------------------------------------------------------
  if (threadIdx.x == 0)
    for (int ks = 0; ks < STAGES && ks < k_slices; ++ks) issue_slice(s, &map_a, &map_b, ks, ks, m0, n0);

  float acc[BLOCK_N / 2];
#pragma unroll
  for (int i = 0; i < BLOCK_N / 2; ++i) acc[i] = 0.f;

  // [excerpt ring-k-loop]
  for (int ks = 0; ks < k_slices; ++ks) {
    const int slot = ks % STAGES;
    const uint32_t parity = (ks / STAGES) % 2;
    mbar_wait(&s.full[slot], parity);

    wgmma_slice<BLOCK_N>(acc, s.a[slot] + wg * 64 * BLOCK_K, s.b[slot]);
    wgmma_wait<0>();
    fence_accumulators(acc);

    // ---- hand the slot back, and refill it with the slice STAGES ahead -----------------------
    if (wg_leader) mbar_arrive(&s.empty[slot]);
    if (threadIdx.x == 0 && ks + STAGES < k_slices) {
      mbar_wait(&s.empty[slot], parity);  // the other warpgroup may still be reading it
      issue_slice(s, &map_a, &map_b, slot, ks + STAGES, m0, n0);
    }
  }

  store_accumulators<BLOCK_N>(acc, c, M, N, m0 + wg * 64, n0);
  // [/excerpt ring-k-loop]
}

}  // namespace stage3

void launch_tc_3_pipeline(const Gemm& g, cudaStream_t stream) {
  using namespace stage3;
  launch_tile_per_cta<BLOCK_M, BLOCK_N>(kernel, THREADS, SMEM_BYTES, g, stream, "tc_3_pipeline");
}

}  // namespace tc
