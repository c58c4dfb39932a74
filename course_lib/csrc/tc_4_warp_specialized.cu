// Stage 4 - warp specialisation: a producer warpgroup that only copies, consumer warpgroups that
// only multiply, and registers moved from the first to the second with setmaxnreg.
//
// In stage 3 the thread that refills the ring also multiplies, so every wait for a free slot
// stalls a quarter of the tensor-core work. Here warpgroup 0 is the producer: one of its threads
// walks the K slices, waits for empty[s] and issues the copies; it never touches an accumulator.
// Warpgroups 1 and 2 are consumers: wait for full[s], multiply, arrive on empty[s]. The producer
// needs almost no registers, so it gives them back (setmaxnreg.dec to 40) and the consumers take
// them (setmaxnreg.inc to 232; PTX ISA 9.7.19.5). Registers move within the CTA's pool: what each
// thread got at launch times the threads, 168 x 384 = 64,512 here (tc_hopper.cuh,
// registers_at_launch), and 128*40 + 256*232 = 64,512 uses all of it.
// That headroom pays for a tile twice as wide: 128 x 256, each consumer holding a 64 x 256
// accumulator (128 fp32 registers per thread) and issuing m64n256k16. Per multiply-add a consumer's
// wgmma then reads 1/256 + 1/64 operand elements from shared memory instead of 1/128 + 1/64 (17 %
// fewer: A's share does not shrink), and the CTA copies 25 % fewer bytes into shared memory
// ((128 + 256) / (128 * 256) against (128 + 128) / (128 * 128)).
//
// Notebook 09 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"

namespace tc {
namespace stage4 {

constexpr int BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = TILE_K;
constexpr int STAGES = 4;                                   // 4 x 48 KB
constexpr int CONSUMERS = BLOCK_M / 64;                     // 2 consumer warpgroups
constexpr int THREADS = (1 + CONSUMERS) * WARPGROUP;        // + 1 producer warpgroup = 384
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(fits_register_pool(THREADS, PRODUCER_REGS, CONSUMER_REGS, CONSUMERS), "more than the CTA's register pool");

struct Smem {
  bf16 a[STAGES][BLOCK_M * BLOCK_K];
  bf16 b[STAGES][BLOCK_K * BLOCK_N];
  uint64_t full[STAGES], empty[STAGES];
};
constexpr int SMEM_BYTES = sizeof(Smem) + SMEM_SLACK;

__global__ void __launch_bounds__(THREADS, 1)  // the ", 1" caps registers at entry: setmaxnreg needs it
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, bf16* c, int M, int N,
       int K) {
  extern __shared__ uint8_t smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(align_smem(smem_raw));
  const int wg = threadIdx.x / WARPGROUP;
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;
  const int k_slices = ceil_div(K, BLOCK_K);

  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, CONSUMERS);  // released by each consumer warpgroup
  __syncthreads();

  // [excerpt producer-and-consumers]
  if (wg == 0) {
    // ================= producer warpgroup =================
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&map_a);
      prefetch_tensor_map(&map_b);
      for (int ks = 0; ks < k_slices; ++ks) {
        const int slot = ks % STAGES;
        // Use u = ks / STAGES of the slot needs the consumers' release of use u - 1: parity
        // (u - 1) % 2 = (u % 2) ^ 1. For u = 0 that is parity 1 of a fresh barrier: no wait.
        mbar_wait(&s.empty[slot], ((ks / STAGES) % 2) ^ 1);
        tma_load_slice<BLOCK_M, BLOCK_N>(s.a[slot], s.b[slot], &s.full[slot], &map_a, &map_b, ks, m0, n0);
      }
    }
  } else {
    // ================= consumer warpgroups =================
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;  // which 64 rows of the tile
    float acc[BLOCK_N / 2];
#pragma unroll
    for (int i = 0; i < BLOCK_N / 2; ++i) acc[i] = 0.f;

    for (int ks = 0; ks < k_slices; ++ks) {
      const int slot = ks % STAGES;
      mbar_wait(&s.full[slot], (ks / STAGES) % 2);
      wgmma_slice<BLOCK_N>(acc, s.a[slot] + cw * 64 * BLOCK_K, s.b[slot]);
      wgmma_wait<0>();
      fence_accumulators(acc);
      if (threadIdx.x % WARPGROUP == 0) mbar_arrive(&s.empty[slot]);
    }
    store_accumulators<BLOCK_N>(acc, c, M, N, m0 + cw * 64, n0);
  // [/excerpt producer-and-consumers]
  }
}

}  // namespace stage4

void launch_tc_4_warp_specialized(const Gemm& g, cudaStream_t stream) {
  using namespace stage4;
  launch_tile_per_cta<BLOCK_M, BLOCK_N>(kernel, THREADS, SMEM_BYTES, g, stream, "tc_4_warp_specialized");
}

}  // namespace tc
