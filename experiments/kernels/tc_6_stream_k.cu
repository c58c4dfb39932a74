// Stage 6 with its experiment knobs - the kernel that was measured on the H200 as the course's stage 6
// until the course kept only its default path (course_lib/csrc/tc_6_tma_store.cu). Its SASS without
// TC_TIMELINE is instruction for instruction that kernel's (experiments/runs/
// 2026-12-01_sass_restructure_cuda/comparison.md). On top of the course's stage 6 it has:
// * `cluster` 1 or 2 (the course compiles 2 only), `group_m` and `max_ctas` as in the course;
// * `block_n` 256 (the course's tile) or 128: twice the tiles of half the width, for shapes whose
//   tiles fill the waves badly;
// * stream_k: the ragged last wave is shared out by K slices (course_lib/csrc/tc_stream_k.cuh
//   explains stream-K; the course's stage 6 uses it since 2026-12-01 for shapes with few tiles);
//   a consumer that did only part of a tile's K either publishes its fp32 partial sums
//   (publish_partial) or, if it holds the tile's first slice, adds the others' (add_partial)
//   before the usual epilogue. Measured slower than whole tiles at the squares, faster where tiles
//   are few and K is long (experiments/JOURNAL.md, 2026-11-29 and 2026-12-01);
// * with -DTC_TIMELINE, a per-tile timeline of clock64 stamps (experiments/gpu_tc_timeline.py).
// The kernel is the course's stage 6 but for the work loop (WorkCursor instead of a tile loop)
// and the stream-K fix-up after it; the comments of tc_6_tma_store.cu explain the rest.
#include "tc_6_stream_k.h"
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_stream_k.cuh"

#include <vector>

namespace tc {
namespace stage6_stream_k {

constexpr int BLOCK_M = 128, BLOCK_K = TILE_K;
constexpr int CONSUMERS = BLOCK_M / 64;
constexpr int THREADS = (1 + CONSUMERS) * WARPGROUP;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;

// The tile's width is a knob here: 256 (the course's) or 128, with a deeper ring in the same
// shared memory (6 slots of 32 KB against 4 of 48 KB).
template <int BLOCK_N>
struct Smem {
  static constexpr int STAGES = BLOCK_N == 256 ? 4 : 6;
  static constexpr int C_HALF_COLS = BLOCK_N / 2;           // columns staged per round
  static constexpr int C_HALF_BOXES = C_HALF_COLS / C_BOX;  // 2 (BLOCK_N 256) or 1
  bf16 a[STAGES][BLOCK_M * BLOCK_K];
  bf16 b[STAGES][BLOCK_K * BLOCK_N];
  bf16 c[CONSUMERS][C_HALF_BOXES][C_BOX * C_BOX];
  uint64_t full[STAGES], empty[STAGES];
};
template <int BLOCK_N>
constexpr int SMEM_BYTES = sizeof(Smem<BLOCK_N>) + SMEM_SLACK;
static_assert(SMEM_BYTES<256> <= 227 * 1024 && SMEM_BYTES<128> <= 227 * 1024, "Hopper's per-block shared-memory limit");

// Optional per-tile timeline, compiled only with -DTC_TIMELINE (experiments/gpu_tc_timeline.py builds such
// a copy of the extension): each consumer's leader thread stamps clock64 (this SM's cycles) when a
// tile's first slice has arrived, when its last wgmma is done and when its result is staged (in
// registers as bf16; it is stored during the next tile's first slices, i.e. inside that tile's
// mainloop), plus clock64 and globaltimer (ns) at the consumer's start and end. Without
// the define the stamps compile to nothing, and the SASS is the one measured.
#ifdef TC_TIMELINE
constexpr int TIMELINE_CTAS = 264, TIMELINE_TILES = 64, TIMELINE_ENTRIES = 4 + 3 * TIMELINE_TILES;
__device__ long long timeline[TIMELINE_CTAS][CONSUMERS][TIMELINE_ENTRIES];
__device__ __forceinline__ long long global_ns() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void stamp(bool leader, int cw, int entry, long long value) {
  if (leader && blockIdx.x < TIMELINE_CTAS && entry < TIMELINE_ENTRIES) timeline[blockIdx.x][cw][entry] = value;
}
#define TC_STAMP_START(leader, cw) (stamp(leader, cw, 0, clock64()), stamp(leader, cw, 1, global_ns()))
#define TC_STAMP_END(leader, cw) (stamp(leader, cw, 2, clock64()), stamp(leader, cw, 3, global_ns()))
#define TC_STAMP_TILE(leader, cw, tile, event) stamp(leader, cw, 4 + 3 * (tile) + (event), clock64())
// It waits for the first slice before the K loop (a stamp inside the loop, or a branch around this
// wait, makes ptxas serialise the wgmmas: warning C7515); every work unit has a slice without
// stream-K, and the timeline is taken without it.
#define TC_STAMP_FIRST_SLICE(leader, cw, tile, full, parity) (mbar_wait(full, parity), TC_STAMP_TILE(leader, cw, tile, 0))
#else
#define TC_STAMP_FIRST_SLICE(leader, cw, tile, full, parity)
#define TC_STAMP_START(leader, cw)
#define TC_STAMP_END(leader, cw)
#define TC_STAMP_TILE(leader, cw, tile, event)
#endif

template <int BLOCK_N, int CLUSTER>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
       const __grid_constant__ CUtensorMap map_c, TileSchedule sched, Partials partials) {
  constexpr int STAGES = Smem<BLOCK_N>::STAGES;
  extern __shared__ uint8_t smem_raw[];
  Smem<BLOCK_N>& s = *reinterpret_cast<Smem<BLOCK_N>*>(align_smem(smem_raw));
  const int wg = threadIdx.x / WARPGROUP;
  const uint32_t rank = CLUSTER > 1 ? cluster_cta_rank() : 0;
  const int cluster_id = blockIdx.x / CLUSTER;

  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, CONSUMERS * CLUSTER);  // released by each consumer warpgroup of every CTA in the cluster
  if constexpr (CLUSTER > 1) cluster_sync(); else __syncthreads();

  if (wg == 0) {
    // ================= producer warpgroup (as in stage 5) =================
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&map_a);
      prefetch_tensor_map(&map_b);
      int it = 0;
      WorkCursor work(sched, cluster_id);
      for (WorkUnit w; work.next(w);) {
        int m0, n0;
        sched.order.origin<CLUSTER, BLOCK_M, BLOCK_N>(w.tile, rank, m0, n0);
        for (int ks = w.k_begin; ks < w.k_end; ++ks, ++it) {
          const int slot = it % STAGES;
          mbar_wait(&s.empty[slot], ((it / STAGES) % 2) ^ 1);
          tma_load_slice<BLOCK_M, BLOCK_N, CLUSTER>(s.a[slot], s.b[slot], &s.full[slot], &map_a, &map_b, ks, m0,
                                                    n0, rank);
        }
      }
    }
  } else {
    // ================= consumer warpgroups =================
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;
    const bool leader = threadIdx.x % WARPGROUP == 0;
    if (leader) prefetch_tensor_map(&map_c);
    float acc[BLOCK_N / 2];
    // The finished tile as bf16 pairs (pair i = accumulators 2i, 2i+1), stored during the next tile.
    uint32_t staged[BLOCK_N / 4];
    bool staged_waiting = false;
    int staged_row0 = 0, staged_col0 = 0;
    int it = 0, done = 0;  // slices and work units this consumer has finished
    TC_STAMP_START(leader, cw);
    WorkCursor work(sched, cluster_id);
    for (WorkUnit w; work.next(w); ++done) {
      int m0, n0;
      sched.order.origin<CLUSTER, BLOCK_M, BLOCK_N>(w.tile, rank, m0, n0);
      int previous_slot = -1;
      // The staged tile's first half goes out once this tile's 2nd slice is issued, the second half
      // once the 4th is (or both earlier, if the tile has fewer slices).
      const int store_at = w.k_end - w.k_begin > 1 ? w.k_begin + 1 : w.k_begin;
      const int store_at2 = w.k_end - w.k_begin > 3 ? w.k_begin + 3 : w.k_end - 1;
      TC_STAMP_FIRST_SLICE(leader, cw, done, &s.full[it % STAGES], (it / STAGES) % 2);
      for (int ks = w.k_begin; ks < w.k_end; ++ks, ++it) {
        const int slot = it % STAGES;
        mbar_wait(&s.full[slot], (it / STAGES) % 2);
        // The tile's first wgmma overwrites the accumulators (scale-d = 0).
        wgmma_slice<BLOCK_N>(acc, s.a[slot] + cw * 64 * BLOCK_K, s.b[slot], ks > w.k_begin);
        if (staged_waiting && ks == store_at)
          store_tile_tma<Smem<BLOCK_N>::C_HALF_COLS, 0, 1>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0,
                                                          staged_col0);
        if (staged_waiting && ks == store_at2) {
          store_tile_tma<Smem<BLOCK_N>::C_HALF_COLS, 1, 1>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0,
                                                          staged_col0);
          staged_waiting = false;
        }
        wgmma_wait<1>();  // the batch of the previous slice is done; this one keeps running
        if (leader && previous_slot >= 0) mbar_arrive_all_ctas<CLUSTER>(&s.empty[previous_slot]);
        previous_slot = slot;
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
      TC_STAMP_TILE(leader, cw, done, 1);
      if (leader && previous_slot >= 0) mbar_arrive_all_ctas<CLUSTER>(&s.empty[previous_slot]);
      if (w.k_begin > 0) {  // stream-K contributor: the owner finishes this tile
        publish_partial<BLOCK_N, CONSUMERS, false>(acc, partials, blockIdx.x, cw);
        continue;
      }
      if (w.k_end < sched.slices) {  // stream-K owner: add the partials of the clusters after this one
        const int tile_end = sched.split_tile_end(w.tile);
        for (int c = cluster_id + 1; c < sched.clusters && sched.share_start(c) < tile_end; ++c)
          if (sched.share_start(c + 1) > sched.share_start(c))
            add_partial<BLOCK_N, CONSUMERS>(acc, partials, c * CLUSTER + int(rank), cw);
      }
      // Stored during the next tile (or below, after the last one). TMA clips the rows and columns
      // that lie outside C (partial tiles, the idle half of a cluster with an odd number of tile rows).
#pragma unroll
      for (int i = 0; i < BLOCK_N / 4; ++i) staged[i] = pack_bf16x2(acc[2 * i], acc[2 * i + 1]);
      staged_waiting = true, staged_row0 = m0 + cw * 64, staged_col0 = n0;
      TC_STAMP_TILE(leader, cw, done, 2);
    }
    if (staged_waiting)
      store_tile_tma<Smem<BLOCK_N>::C_HALF_COLS, 0, 2>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
    if (leader) bulk_wait_all();  // shared memory must outlive the stores that read it
    TC_STAMP_END(leader, cw);
  }
  if constexpr (CLUSTER > 1) cluster_sync();
}

template <int BLOCK_N, int CLUSTER>
void launch(const Gemm& g, const Workspace& ws, int group_m, int max_ctas, bool stream_k, cudaStream_t stream) {
  const int M = g.M, N = g.N, K = g.K;
  constexpr auto kern = kernel<BLOCK_N, CLUSTER>;
  constexpr int SMEM = SMEM_BYTES<BLOCK_N>;
  const CUtensorMap map_a = tensor_map_a<BLOCK_M>(g), map_b = tensor_map_b(g);
  const CUtensorMap map_c = make_tensor_map(g.c, M, N, C_BOX, C_BOX, CU_TENSOR_MAP_SWIZZLE_128B);
  allow_dynamic_smem(kern, SMEM);
  const GroupedTiles tiles{ceil_div(ceil_div(M, BLOCK_M), CLUSTER), ceil_div(N, BLOCK_N), group_m};
  // Stream-K needs every resident cluster (the split work fills them all); without it, the grid
  // is trimmed so that the waves come out even.
  const int ctas = stream_k ? resident_clusters(kern, THREADS, SMEM, CLUSTER, max_ctas) * CLUSTER
                            : persistent_ctas(kern, THREADS, SMEM, CLUSTER, tiles.count(), max_ctas);
  const TileSchedule sched = make_schedule(tiles, ctas / CLUSTER, ceil_div(K, BLOCK_K), stream_k);
  Partials partials{nullptr, nullptr};
  if (sched.dp_tiles < tiles.count()) partials = fixup_buffers(ws, ctas, CONSUMERS, size_t(BLOCK_M) * BLOCK_N);
  kern<<<ctas, THREADS, SMEM, stream>>>(map_a, map_b, map_c, sched, partials);
  check_launch("tc_6_stream_k");
}

}  // namespace stage6_stream_k

#ifdef TC_TIMELINE
void read_tc_6_timeline(long long* host, size_t count) {
  using stage6_stream_k::timeline;
  if (count != sizeof(timeline) / sizeof(long long)) throw std::runtime_error("read_tc_6_timeline: wrong buffer size");
  check_cuda(cudaMemcpyFromSymbol(host, timeline, sizeof(timeline)), "cudaMemcpyFromSymbol(timeline)");
}
void clear_tc_6_timeline() {
  using stage6_stream_k::timeline;
  const std::vector<long long> zeros(sizeof(timeline) / sizeof(long long), 0);
  check_cuda(cudaMemcpyToSymbol(timeline, zeros.data(), sizeof(timeline)), "cudaMemcpyToSymbol(timeline)");
}
size_t tc_6_timeline_shape(int dim) {
  using namespace stage6_stream_k;
  const size_t shape[3] = {TIMELINE_CTAS, CONSUMERS, TIMELINE_ENTRIES};
  return shape[dim];
}
#endif

void launch_tc_6_stream_k(const Gemm& g, cudaStream_t stream, const Workspace& ws, int cluster, int group_m,
                          int max_ctas, bool stream_k, int block_n) {
  using namespace stage6_stream_k;
  if (group_m < 1) throw std::runtime_error("tc_6_stream_k: group_m must be >= 1");
  if (cluster != 1 && cluster != 2) throw std::runtime_error("tc_6_stream_k: cluster must be 1 or 2");
  if (block_n != 128 && block_n != 256) throw std::runtime_error("tc_6_stream_k: block_n must be 128 or 256");
  if (block_n == 256)
    cluster == 1 ? launch<256, 1>(g, ws, group_m, max_ctas, stream_k, stream)
                 : launch<256, 2>(g, ws, group_m, max_ctas, stream_k, stream);
  else
    cluster == 1 ? launch<128, 1>(g, ws, group_m, max_ctas, stream_k, stream)
                 : launch<128, 2>(g, ws, group_m, max_ctas, stream_k, stream);
}

}  // namespace tc
