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
#include "tc_schedule.cuh"

namespace tc {

// ---- flags between CTAs (PTX ISA "Memory Consistency Model": release/acquire at .gpu scope) ------
// A release store makes every write that came before it (in this thread, and in the threads that
// synchronised with it through a barrier) visible to a thread whose acquire load reads the value.
__device__ __forceinline__ void store_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
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
__host__ __device__ inline double whole_tile_efficiency(int tiles, int clusters) {
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

}  // namespace tc
