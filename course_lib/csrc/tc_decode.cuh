// The swapped decode schedule, the parts that do not depend on the input type: how stage 7's decode
// path (tc_7_decode.cuh, e4m3) covers C, written so that stage 6's (tc_6_tma_store.cu, bf16) can
// share them.
//
// A decode step multiplies a few token rows (M = 1-128) by a weight matrix. The big kernels' tiles
// have 128 rows of M (and their clusters pair two tiles along M), so at M <= 128 most of every
// wgmma would multiply rows that are not there. Computing C^T = W A^T instead puts the weights on
// wgmma's 64-row side and the T tokens on its N side (T = 16, 32, 64, 96 or 128): each CTA
// computes a DECODE_COLS x T piece of C^T. Reading the weights once at memory speed is the whole
// job, so the CTA is simple: one producer warp keeps a ring of slices in flight, one consumer
// warpgroup multiplies. Where the column tiles are fewer than the CTAs the GPU holds at once, K is
// split into ranges, one CTA each, and the last CTA of a tile to finish adds the ranges' fp32 sums.
//
// Both input types fill a ring slot with the same bytes: 128 bytes of K (64 bf16 or 128 e4m3) for T
// rows of A and DECODE_COLS rows of the weights. So the ring's depth, the tile and the split-K rule
// are the same for both, and are written once here.
#pragma once

#include <unordered_map>

#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"

namespace tc {

constexpr int DECODE_COLS = 64;                 // columns of C per CTA (rows of the weights): wgmma's M side
constexpr int DECODE_THREADS = WARPGROUP + 32;  // a consumer warpgroup and a producer warp
constexpr int DECODE_MAX_M = 128;               // the largest token tile (wgmma n = 128)
constexpr int DECODE_MIN_SLICES = 4;            // K slices per range, at least

// [excerpt decode-when-swapped]
// The operands swapped for every M up to 128: a 128-row tile of the big kernels would hold M real
// rows (at M <= 64 it is at least half empty), and with its cluster's partner tile (rows 128-255)
// entirely empty, at most M / 256 of its multiply-adds would count.
constexpr bool use_swapped(int M) { return M <= DECODE_MAX_M; }
// [/excerpt decode-when-swapped]

// A ring slot: 128 bytes of K for T rows of A and DECODE_COLS rows of the weights.
constexpr int decode_slot_bytes(int T) { return (T + DECODE_COLS) * SWIZZLE_BYTES; }
// Slots per token tile: about 100 KB of shared memory (two CTAs per SM, or three for T <= 32),
// enough bytes of the weights in flight to keep reading at memory speed.
constexpr int decode_stages(int T) { return T <= 64 ? 6 : T <= 96 ? 5 : 4; }

// [excerpt decode-split-ranges]
// How many ranges of K: as many CTAs as fit on the GPU at once (`resident`: SMs x CTAs per SM) in
// one wave - a second, partial wave would leave SMs idle at the end - with at least
// DECODE_MIN_SLICES slices per range. Tiles that fill the GPU by themselves are not split.
constexpr int decode_ranges(int tiles, int k_slices, int resident) {
  const int wanted = resident / tiles > 1 ? resident / tiles : 1;
  const int most = k_slices / DECODE_MIN_SLICES > 1 ? k_slices / DECODE_MIN_SLICES : 1;
  const int ranges = wanted < most ? wanted : most;
  return ceil_div(k_slices, ceil_div(k_slices, ranges));  // none empty after rounding
}
// [/excerpt decode-split-ranges]

// Split-K's fp32 partial sums, [tile][range][T / 8][WARPGROUP] float4s (each thread's accumulators
// as it holds them), and one arrival counter per tile, zero when the launch starts and again when it
// ends (the last CTA of a tile resets it, so a CUDA graph's replay finds it zero); both the launch's
// own (Workspace, tc_launch.h): two streams, or two graphs, never share them.
struct DecodeSplits {
  float4* partials;
  int* counters;
};

// [excerpt decode-add-ranges]
// Split K, in the consumer warpgroup (threads 0-127) of the CTA computing range `range` of tile
// `tile`: publish this range's sums, count the arrival; the last CTA of the tile to arrive adds
// every range's sums into `sums`, in range order (the same sum whoever finishes last), and returns
// true: it writes the tile. The others return false. `last` is a flag in shared memory.
template <int T>
__device__ __forceinline__ bool decode_add_ranges(float (&sums)[T / 2], const DecodeSplits& splits, int tile,
                                                  int range, int ranges, int* last) {
  const int tid = threadIdx.x;
  float4* mine = splits.partials + (size_t(tile) * ranges + range) * (T / 8) * WARPGROUP + tid;
#pragma unroll
  for (int i = 0; i < T / 8; ++i)
    __stcg(mine + i * WARPGROUP, make_float4(sums[4 * i], sums[4 * i + 1], sums[4 * i + 2], sums[4 * i + 3]));
  __threadfence();  // our partial sums before our arrival (release)
  named_barrier_sync(1, WARPGROUP);
  if (tid == 0) {
    const int arrived = atomicAdd(splits.counters + tile, 1);
    *last = arrived == ranges - 1;
    if (*last) splits.counters[tile] = 0;  // ready for the next launch (or the graph's next replay)
    __threadfence();                        // (acquire) the others' partial sums are visible after this
  }
  named_barrier_sync(1, WARPGROUP);
  if (!*last) return false;
#pragma unroll
  for (int i = 0; i < T / 2; ++i) sums[i] = 0.f;
  for (int r = 0; r < ranges; ++r) {
    const float4* src = splits.partials + (size_t(tile) * ranges + r) * (T / 8) * WARPGROUP + tid;
#pragma unroll
    for (int i = 0; i < T / 8; ++i) {
      const float4 v = __ldcg(src + i * WARPGROUP);
      sums[4 * i] += v.x, sums[4 * i + 1] += v.y, sums[4 * i + 2] += v.z, sums[4 * i + 3] += v.w;
    }
  }
  return true;
}
// [/excerpt decode-add-ranges]

// ---- host: the grid of a decode launch --------------------------------------------------------------
// CTAs of `kernel` one SM holds at once (shared memory and registers decide), asked once per kernel.
template <typename Kernel>
inline int decode_ctas_per_sm(Kernel kernel, int smem_bytes) {
  static std::unordered_map<const void*, int> known;  // several kernels share one C++ type
  const void* key = reinterpret_cast<const void*>(kernel);
  auto it = known.find(key);
  if (it != known.end()) return it->second;
  int per_sm = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, DECODE_THREADS, smem_bytes),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  if (per_sm < 1) throw std::runtime_error("a decode kernel does not fit on an SM (shared memory or registers)");
  known.emplace(key, per_sm);
  return per_sm;
}

// The grid: (column tiles, token tiles of T, ranges of K); the slices of K each range takes; and,
// where K is split, the partial sums and counters from the launch's workspace.
struct DecodeGrid {
  dim3 grid;
  int slices_per_range;
  DecodeSplits splits;
};
template <int T, typename Kernel>
inline DecodeGrid decode_grid(Kernel kernel, int smem_bytes, int M, int N, int k_slices, const Workspace& ws) {
  allow_dynamic_smem(kernel, smem_bytes);
  const int cols = ceil_div(N, DECODE_COLS), token_tiles = ceil_div(M, T), tiles = cols * token_tiles;
  int ranges = decode_ranges(tiles, k_slices, decode_ctas_per_sm(kernel, smem_bytes) * device_sm_count());
  const int per_range = ceil_div(k_slices, ranges);
  ranges = ceil_div(k_slices, per_range);
  const DecodeSplits splits =
      ranges > 1 ? DecodeSplits{static_cast<float4*>(
                                    ws.scratch(size_t(tiles) * ranges * (T / 8) * WARPGROUP * sizeof(float4))),
                                ws.zeroed(size_t(tiles))}
                 : DecodeSplits{nullptr, nullptr};
  return DecodeGrid{dim3(cols, token_tiles, ranges), per_range, splits};
}

}  // namespace tc
