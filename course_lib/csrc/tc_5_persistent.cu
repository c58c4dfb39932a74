// Stage 5 - a persistent kernel: one CTA per SM walks many tiles, and pairs of CTAs (a cluster)
// share each slice of B through TMA multicast.
//
// Stage 4 launches one CTA per tile; each CTA fills its pipeline from empty, drains it, writes its
// tile and leaves, so the copy engine idles at every tile boundary. Here about one CTA per SM is
// launched and each walks a list of tiles (tc_schedule.cuh). The ring of slots and its
// barriers live on across tiles: the producer starts on the next tile's slices while the
// consumers still write the last tile's results. The slot counter `it` runs over all slices the
// CTA ever handles, so the parity formulas of stage 4 stay unchanged.
//
// Clusters (sm_90): CLUSTER = 2 CTAs on two SMs of one GPC (the hardware places a cluster's CTAs in
// one GPC) compute tiles (2p, n) and (2p+1, n), which need the same slices of B. Each CTA loads half
// of B's boxes with .multicast::cluster, and the copy engine writes them into both CTAs' shared
// memory and signals both CTAs' full barriers: B is read from L2 once for the two CTAs. The price: a slot may be refilled only when the consumers of
// *both* CTAs are done with it, so each consumer warpgroup arrives on empty[s] in every CTA of
// the cluster (mapa + remote arrive) and empty[s] counts CONSUMERS * CLUSTER arrivals.
//
// Notebook 09 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"

namespace tc {
namespace stage5 {

constexpr int BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = TILE_K;
constexpr int STAGES = 4;
constexpr int CLUSTER = 2;                                  // CTAs sharing B by multicast
constexpr int CONSUMERS = BLOCK_M / 64;
constexpr int THREADS = (1 + CONSUMERS) * WARPGROUP;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(fits_register_pool(THREADS, PRODUCER_REGS, CONSUMER_REGS, CONSUMERS), "more than the CTA's register pool");

struct Smem {
  bf16 a[STAGES][BLOCK_M * BLOCK_K];
  bf16 b[STAGES][BLOCK_K * BLOCK_N];
  uint64_t full[STAGES], empty[STAGES];
};
constexpr int SMEM_BYTES = sizeof(Smem) + SMEM_SLACK;

__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, bf16* c, int M, int N,
       int K, GroupedTiles tiles) {
  extern __shared__ uint8_t smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(align_smem(smem_raw));
  const int wg = threadIdx.x / WARPGROUP;
  const uint32_t rank = cluster_cta_rank();
  const int first_tile = blockIdx.x / CLUSTER, tile_step = gridDim.x / CLUSTER;
  const int k_slices = ceil_div(K, BLOCK_K);

  // Released by each consumer warpgroup of every CTA in the cluster.
  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, CONSUMERS * CLUSTER);
  cluster_sync();  // the peer's barriers must be initialised before our first multicast or remote arrive

  if (wg == 0) {
    // ================= producer warpgroup =================
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&map_a);
      prefetch_tensor_map(&map_b);
      int it = 0;  // slices issued so far, over all tiles
      for (int t = first_tile; t < tiles.count(); t += tile_step) {
        int m0, n0;
        tiles.origin<CLUSTER, BLOCK_M, BLOCK_N>(t, rank, m0, n0);
        for (int ks = 0; ks < k_slices; ++ks, ++it) {
          const int slot = it % STAGES;
          // [excerpt producer-multicast]
          mbar_wait(&s.empty[slot], ((it / STAGES) % 2) ^ 1);
          // A, and this CTA's half of B's boxes multicast to both CTAs: all of B arrives here.
          tma_load_slice<BLOCK_M, BLOCK_N, CLUSTER>(s.a[slot], s.b[slot], &s.full[slot], &map_a, &map_b, ks, m0,
                                                    n0, rank);
          // [/excerpt producer-multicast]
        }
      }
    }
  } else {
    // ================= consumer warpgroups =================
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;
    const bool leader = threadIdx.x % WARPGROUP == 0;
    float acc[BLOCK_N / 2];
    int it = 0;
    for (int t = first_tile; t < tiles.count(); t += tile_step) {
      int m0, n0;
      tiles.origin<CLUSTER, BLOCK_M, BLOCK_N>(t, rank, m0, n0);
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i) acc[i] = 0.f;

      for (int ks = 0; ks < k_slices; ++ks, ++it) {
        const int slot = it % STAGES;
        mbar_wait(&s.full[slot], (it / STAGES) % 2);
        // [excerpt consumer-release]
        wgmma_slice<BLOCK_N>(acc, s.a[slot] + cw * 64 * BLOCK_K, s.b[slot]);
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (leader) mbar_arrive_all_ctas<CLUSTER>(&s.empty[slot]);  // free in both CTAs' rings
        // [/excerpt consumer-release]
      }
      // Rows of a cluster's second tile may lie below M (odd number of tile rows): that CTA still
      // multicast its half of B for its partner, and its own rows are simply not written.
      store_accumulators<BLOCK_N>(acc, c, M, N, m0 + cw * 64, n0);
    }
  }
  // No CTA may leave while its partner can still arrive on its barriers.
  cluster_sync();
}

}  // namespace stage5

void launch_tc_5_persistent(const Gemm& g, cudaStream_t stream, int group_m, int max_ctas) {
  using namespace stage5;
  launch_persistent<CLUSTER, BLOCK_M, BLOCK_N>(kernel, THREADS, SMEM_BYTES, g, group_m, max_ctas, stream,
                                               "tc_5_persistent", tensor_map_a<BLOCK_M>(g), tensor_map_b(g), g.c, g.M,
                                               g.N, g.K);
}

}  // namespace tc
