// Stream-K scheduling for stage 6 (tc_6_tma_store.cu), on top of the tile order and persistent grid
// of tc_schedule.cuh. Stage 6 uses it only when whole tiles would leave many clusters idle.
//
// Trimming the grid (tc_schedule.cuh) hides a ragged last wave but does not remove it: 4096^3 in
// 128 x 256 tiles is 512 tiles, 3.88 waves of 132 SMs, so 4 rounds of work leave 3 % of the SMs'
// time idle whatever the grid; a decode step (M = 16, N = 4096) is 16 tiles, and whole tiles would
// leave 50 of 66 clusters idle. Stream-K (Osama et al., "Stream-K: Work-centric Parallel Decomposition for
// Dense Matrix Multiplication on the GPU", PPoPP 2023) hands out *K slices* instead of tiles:
// the tiles that fill whole waves are done as before ("data-parallel"), and the slices of the
// remaining tiles are shared out evenly, so every cluster does the same number of slices. A
// tile whose slices went to several clusters is finished by the cluster that holds its first
// slice (the "owner"); the others ("contributors") leave their fp32 partial sums in a global
// buffer and raise a flag, and the owner adds them before it stores the tile.
// Contributors work on such a tile at the *start* of their share and owners at the *end*, so
// an owner finds the partials ready. Every cluster of the grid must be resident at once (the
// grid is sized by the occupancy API, and a cluster's flag is only waited for by a resident one).
#pragma once

#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"


namespace tc {

// ---- flags between CTAs (PTX ISA "Memory Consistency Model": release/acquire at .gpu scope) ------
// A release store makes every write that came before it (in this thread, and in the threads that
// synchronised with it through a barrier) visible to a thread whose acquire load reads the value.
__device__ __forceinline__ void store_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
// Each thread adds v with release semantics (a reduction: no value comes back). Every lane's add is
// an atomic of its own, so 32 lanes adding 1 make the flag 32, never more, whatever order they land in.
__device__ __forceinline__ void add_release_gpu(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- the schedule -------------------------------------------------------------------------------
struct WorkUnit {
  int tile;     // cluster tile index (GroupedTiles order)
  int k_begin;  // first K slice
  int k_end;    // one past the last K slice
};

struct TileSchedule {
  GroupedTiles order;
  int clusters;  // clusters in the grid, all resident at once
  int slices;    // K slices per tile
  int dp_tiles;  // tiles [0, dp_tiles) are done whole, cluster c taking c, c + clusters, ...

  __host__ __device__ int split_slices() const { return (order.count() - dp_tiles) * slices; }
  // Where cluster c's share of the split tiles' slices starts (c = clusters: where the last ends),
  // counted from slice 0 of tile dp_tiles.
  __host__ __device__ int share_start(int c) const {
    return int((long long)split_slices() * c / clusters);
  }
  // Where a split tile's slices end, on the same scale as share_start.
  __host__ __device__ int split_tile_end(int tile) const { return (tile - dp_tiles + 1) * slices; }
};

// The share of the clusters' time that whole tiles keep busy: `tiles` handed out in rounds of
// `clusters` (the last round may be partly empty).
__host__ __device__ constexpr double whole_tile_efficiency(int tiles, int clusters) {
  const int rounds = ceil_div(tiles, clusters);
  return rounds > 0 ? double(tiles) / (double(rounds) * clusters) : 1.0;
}

// No stream-K: every tile whole, round robin. Stream-K: the whole waves are done whole and the
// ragged rest is split (when the tiles fill whole waves there is nothing to split).
inline TileSchedule make_schedule(GroupedTiles order, int clusters, int slices, bool stream_k) {
  const int tiles = order.count();
  const int dp_tiles = stream_k ? tiles - tiles % clusters : tiles;
  return TileSchedule{order, clusters, slices, dp_tiles};
}

// The work units of one cluster, in order. Producer and consumers walk the same sequence.
struct WorkCursor {
  TileSchedule s;
  int next_tile, pos, end;

  __device__ WorkCursor(const TileSchedule& sched, int cluster)
      : s(sched), next_tile(cluster), pos(sched.share_start(cluster)), end(sched.share_start(cluster + 1)) {}

  __device__ bool next(WorkUnit& w) {
    if (next_tile < s.dp_tiles) {
      w = WorkUnit{next_tile, 0, s.slices};
      next_tile += s.clusters;
      return true;
    }
    if (pos >= end) return false;
    const int k = pos % s.slices;
    const int k_end = k + (end - pos) < s.slices ? k + (end - pos) : s.slices;
    w = WorkUnit{s.dp_tiles + pos / s.slices, k, k_end};
    pos += k_end - k;
    return true;
  }
};

// ---- the fix-up: partial sums between clusters -----------------------------------------------------
// One slot of BLOCK_M x BLOCK_N fp32 per CTA (a CTA contributes to at most one tile that another
// finishes) and one flag per consumer warpgroup. A flag is FLAG_EMPTY until its contributor has
// written the slot, FLAG_READY after; the owner sets it back to FLAG_EMPTY as soon as it has seen it
// ready (nothing else writes that slot in this launch). So every flag is empty again when the kernel
// ends, and the next launch on the same buffers starts right without clearing them.
//
// Why not number the launches instead (flag = "the launch that last wrote the slot")? The number
// would be a kernel argument, and a CUDA graph records its kernels' arguments once: every replay of
// the graph passes the same number, so from the second replay on an owner finds the flag already
// "ready" and adds partial sums left from the replay before. A flag that the kernel itself resets
// is right however often the launch is replayed. The buffers are each launch's own (Workspace,
// tc_launch.h): two launches at once, on two streams or from two graphs, never share a flag.
// FLAG_READY is a warp's 32 lanes: the first warp raises the flag by one atomic add per lane
// (publish_partial, below).
constexpr int FLAG_EMPTY = 0, FLAG_READY = 32;

struct Partials {
  float4* data;  // [CTA][consumer][BLOCK_N / 8][WARPGROUP]: each thread's accumulators as it holds them
  int* flags;    // [CTA][consumer], FLAG_EMPTY when the kernel starts and when it ends
};

// One consumer's slot: its 64 x BLOCK_N fp32 partial sums, BLOCK_N / 8 float4s per thread.
template <int BLOCK_N>
__host__ __device__ constexpr size_t partial_slot_float4s() { return size_t(BLOCK_N / 8) * WARPGROUP; }
template <int BLOCK_N, int CONSUMERS>
__device__ __forceinline__ float4* partial_slot(const Partials& p, int cta, int cw) {
  return p.data + size_t(cta * CONSUMERS + cw) * partial_slot_float4s<BLOCK_N>();
}

// Contributor: write this consumer's fp32 partial sums (each thread its own BLOCK_N / 2 values, so a
// warp writes 512 contiguous bytes per store), then release the flag. The writes bypass L1 (st.cg)
// and the owner reads with ld.cg, so no stale L1 line can be read. A thread whose rows lie outside C
// (`live` false) writes nothing; it still takes part in the barrier.
// WARP_RELEASE: the flag raised by the first warp (below: what stage 6's ring cursor needs); false, by
// thread 0 alone (experiments/kernels/tc_6_stream_k.cu, whose SASS stays that of stage 6 before it).
template <int BLOCK_N, int CONSUMERS, bool WARP_RELEASE = true>
__device__ __forceinline__ void publish_partial(const float (&acc)[BLOCK_N / 2], const Partials& p, int cta, int cw,
                                                bool live = true) {
  const int tid = threadIdx.x % WARPGROUP;
  float4* dst = partial_slot<BLOCK_N, CONSUMERS>(p, cta, cw) + tid;
  if (live) {
#pragma unroll
    for (int i = 0; i < BLOCK_N / 8; ++i)
      __stcg(dst + i * WARPGROUP, make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]));
  }
  named_barrier_sync(1 + cw, WARPGROUP);  // all 128 threads' stores come before the flag
  // The flag is raised by the first warp, each of its 32 lanes adding 1 (FLAG_READY is 32), not by
  // thread 0 alone: a branch on `tid == 0` around the fence made ptxas keep the consumer's ring
  // cursor (tc_hopper.cuh) in vector registers and move it into uniform ones before every wgmma,
  // about 30 instructions a K slice more in stage 6's loop (nvcc 13.0); a condition it sees as the
  // same for the whole warp (the warp index read through a shuffle) does not. A store predicated on
  // lane 0 cost the same 30, and the store in a non-inlined function gave kernel<256> a stack frame.
  // Why adds and not a store of FLAG_READY by every lane: the CUDA programming guide leaves open how
  // many writes one warp instruction's stores to one word make, and a second write landing after the
  // owner has emptied the flag would raise it for the next launch. Atomic adds are counted each: the
  // flag reaches 32 once, when the last lane's add lands, and nothing adds after that.
  if (WARP_RELEASE ? __shfl_sync(0xffffffffu, tid / 32, 0) == 0 : tid == 0) {
    __threadfence();
    int* flag = p.flags + cta * CONSUMERS + cw;
    if (WARP_RELEASE)
      add_release_gpu(flag, 1);
    else
      store_release_gpu(flag, FLAG_READY);
  }
}

// Owner: wait for one contributor's flag, empty it for the next launch, then add its partial sums to
// the accumulators.
template <int BLOCK_N, int CONSUMERS>
__device__ __forceinline__ void add_partial(float (&acc)[BLOCK_N / 2], const Partials& p, int cta, int cw,
                                            bool live = true) {
  const int tid = threadIdx.x % WARPGROUP;
  if (tid == 0) {
    int* flag = p.flags + cta * CONSUMERS + cw;
    while (load_acquire_gpu(flag) != FLAG_READY) __nanosleep(32);
    *reinterpret_cast<volatile int*>(flag) = FLAG_EMPTY;  // read by the next launch, after this one ends
  }
  named_barrier_sync(1 + cw, WARPGROUP);
  if (!live) return;
  const float4* src = partial_slot<BLOCK_N, CONSUMERS>(p, cta, cw) + tid;
#pragma unroll
  for (int i = 0; i < BLOCK_N / 8; ++i) {
    const float4 v = __ldcg(src + i * WARPGROUP);
    acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
  }
}

// The fix-up buffers of one launch of `ctas` CTAs of `consumers` warpgroups, each CTA with
// `tile_floats` fp32 partial sums, from the launch's workspace.
inline Partials fixup_buffers(const Workspace& ws, int ctas, int consumers, size_t tile_floats) {
  return Partials{static_cast<float4*>(ws.scratch(size_t(ctas) * tile_floats * sizeof(float))),
                  ws.zeroed(size_t(ctas) * consumers)};
}
// The same, sized from the slots the kernel addresses (partial_slot): CONSUMERS slots of 64 x BLOCK_N
// per CTA, so a tile of any width gets the bytes its kernel writes.
template <int BLOCK_N, int CONSUMERS>
inline Partials fixup_buffers(const Workspace& ws, int ctas) {
  return fixup_buffers(ws, ctas, CONSUMERS, size_t(CONSUMERS) * partial_slot_float4s<BLOCK_N>() * 4);
}

}  // namespace tc
