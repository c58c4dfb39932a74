// Stage 6 - closing the gap: keep a wgmma batch in flight, and store C behind the next tile's MMAs.
//
// Three changes against stage 5, all about the moments when the tensor cores wait:
// * Mainloop: stage 5 waits for a slice's wgmmas to finish (wait_group 0) before it can release
//   the slot and issue the next batch, so the tensor core drains at every slice. Here a
//   consumer issues slice i, then waits with wait_group 1 - only slice i-1 must be done - and
//   releases i-1's slot. One batch is always queued behind the running one. A consumer now
//   holds two slots, so the ring keeps STAGES = 4.
// * Epilogue: stage 5 writes C with 4-byte stores scattered over 8 rows per instruction. Here each
//   consumer converts its accumulators to bf16, writes them with stmatrix (PTX ISA 9.7.14.5.16)
//   into a shared-memory tile laid out with the same 128-byte swizzle (conflict-free), and one
//   thread hands the tile to the copy engine (cp.async.bulk.tensor, shared -> global). The copy
//   runs on while the consumer goes on; the staging buffer is reused only after
//   cp.async.bulk.wait_group.read says the engine has read it.
//   Shared memory is tight (4 x 48 KB ring), so each consumer stages half its 64 x 256 tile at a
//   time: 2 boxes of 64 x 64 (16 KB).
// * Overlap: the accumulators are the consumer's registers, so the next tile's MMAs cannot start
//   before they are read. Here they are converted to bf16 into 64 other registers (`staged`) and
//   the next tile starts at once - its first wgmma with scale-d = 0, which overwrites the
//   accumulators, so they need no zeroing. The staged tile is stored in its two halves, the first
//   once the new tile's 2nd slice is issued and the second once its 4th is, so each half has two
//   slices of MMAs in flight to hide behind. Storing both halves after the 2nd slice made the
//   mainloop longer (measured: by ~1,600 cycles - the store outlasted the MMAs in flight); in
//   halves it is ~100-250 cycles longer and a consumer needs ~1 % fewer cycles in all. Storing
//   straight from the staged registers to global memory made the mainloop ~12 % longer.
// Producer, tile order and clusters are stage 5's.
// * Few tiles: when whole tiles would leave many clusters idle (a decode step: 16 tiles for 66
//   clusters) and K is long, the tiles of the ragged last wave are shared out by K slices
//   instead (stream-K, tc_stream_k.cuh): every cluster gets the same number of slices, and a tile
//   whose slices went to several clusters is finished by the one holding its first slice.
// * Middle shapes: the kernel is a template on the tile's width, BN. Where whole 128 x 256 tiles
//   leave more than half the clusters idle and K is too short for stream-K (1024^3: 16 cluster tiles
//   for 66 clusters, 16 K-slices) the launcher takes 128 x 128 tiles, twice as many (each consumer
//   a 64 x 128 wgmma, as in stages 2-3; its ring slots are 32 KB, so it keeps 6 of them). The
//   clusters, the epilogue and stream-K are the same code for every width, and so is the producer
//   but for one step: a 128 x 64 tile's slice of B is one box, which the cluster splits by rows of
//   K (load_slice). That tile (8 slots of 24 KB) runs when forced (block_n = 64): on an H100 it beat
//   128 x 128 by 6-7 points at 512^3-1024^3 and stayed below 75 % of cuBLAS, whose kernel there has
//   the same tile, stages and cluster (experiments/JOURNAL.md). The plan does not take it until the
//   H200 recording can be made with it.
//
// Notebooks 09, 10 and 11 print the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include "tc_decode.cuh"
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"
#include "tc_stream_k.cuh"

namespace tc {
namespace stage6 {

constexpr int BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = TILE_K;  // the stage's tile
constexpr int STAGES = 4;                                   // 48 KB ring slots
constexpr int NARROW_BLOCK_N = 128;                         // the middle shapes' tile: 128 x 128
constexpr int NARROW_STAGES = 6;                            // 32 KB ring slots
constexpr int NARROWEST_BLOCK_N = 64;                       // the small squares' tile: 128 x 64
constexpr int NARROWEST_STAGES = 8;                         // 24 KB ring slots
constexpr int CLUSTER = 2;                                  // CTAs sharing B by multicast (stage 5)
constexpr int CONSUMERS = BLOCK_M / 64;
constexpr int THREADS = (1 + CONSUMERS) * WARPGROUP;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(fits_register_pool(THREADS, PRODUCER_REGS, CONSUMER_REGS, CONSUMERS), "more than the CTA's register pool");
constexpr int C_HALF_COLS = BLOCK_N / 2;                    // columns staged per round (128 x 256 tile)
constexpr int C_HALF_BOXES = C_HALF_COLS / C_BOX;           // 2

// The shared memory of a CTA with a 128 x BN tile: the ring, each consumer's staging boxes for half
// its 64 x BN tile (2 boxes of 64 x 64 for BN = 256, one for BN = 128; for BN = 64 the whole tile in
// one box: its second half is no columns, and store_tile_tma skips it), the ring's barriers.
template <int BN>
struct Smem {
  static_assert(BN == BLOCK_N || BN == NARROW_BLOCK_N || BN == NARROWEST_BLOCK_N, "stage 6's three tiles");
  static constexpr int SLOTS = BN == BLOCK_N ? STAGES : BN == NARROW_BLOCK_N ? NARROW_STAGES : NARROWEST_STAGES;
  static constexpr int HALF_COLS = BN == NARROWEST_BLOCK_N ? C_BOX : BN / 2;  // columns of C staged per round
  bf16 a[SLOTS][BLOCK_M * BLOCK_K];
  bf16 b[SLOTS][BLOCK_K * BN];
  bf16 c[CONSUMERS][HALF_COLS / C_BOX][C_BOX * C_BOX];
  uint64_t full[SLOTS], empty[SLOTS];
};
static_assert(Smem<BLOCK_N>::HALF_COLS / C_BOX == C_HALF_BOXES, "the 128 x 256 tile's staging boxes");
template <int BN>
constexpr int smem_bytes() { return int(sizeof(Smem<BN>)) + SMEM_SLACK; }
constexpr int SMEM_BYTES = smem_bytes<BLOCK_N>();
static_assert(SMEM_BYTES <= 227 * 1024 && smem_bytes<NARROW_BLOCK_N>() <= 227 * 1024 &&
              smem_bytes<NARROWEST_BLOCK_N>() <= 227 * 1024, "Hopper's per-block shared-memory limit");

// One K slice into the ring. The 128 x 64 tile's slice of B is a single 64 x 64 box, so the
// cluster's CTAs split it by rows of K (32 each, multicast; `map_b` has boxes of 32 x 64) where the
// wider tiles give each CTA whole boxes (tma_load_slice). The halves land where one box would
// have: the 128-byte swizzle follows the shared-memory address, and 32 rows are 4 KB.
template <int BN>
__device__ __forceinline__ void load_slice(bf16* a, bf16* b, uint64_t* full, const CUtensorMap* map_a,
                                           const CUtensorMap* map_b, int ks, int m0, int n0, uint32_t rank) {
  if constexpr (BN == NARROWEST_BLOCK_N) {
    constexpr int ROWS = TILE_K / CLUSTER;
    mbar_arrive_expect_tx(full, (BLOCK_M + BN) * TILE_K * int(sizeof(bf16)));
    tma_load_2d(a, map_a, full, ks * TILE_K, m0);
    tma_load_2d_multicast(b + int(rank) * ROWS * BN, map_b, full, n0, ks * TILE_K + int(rank) * ROWS,
                          (1u << CLUSTER) - 1);
  } else {
    tma_load_slice<BLOCK_M, BN, CLUSTER>(a, b, full, map_a, map_b, ks, m0, n0, rank);
  }
}

// A consumer's 64 rows are 4 warps of 16: a warp whose rows all lie below C's last row (a decode
// step has M = 1-64) neither writes nor reads partial sums; its accumulators only hold zeros.
__device__ __forceinline__ bool warp_rows_in_c(int row0, int M) {
  return row0 + (threadIdx.x % WARPGROUP) / 32 * 16 < M;
}

// A 128 x BN tile per work unit (BN = BLOCK_N, NARROW_BLOCK_N or NARROWEST_BLOCK_N).
template <int BN>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
       const __grid_constant__ CUtensorMap map_c, TileSchedule sched, Partials partials, int M) {
  using Shared = Smem<BN>;
  constexpr int SLOTS = Shared::SLOTS, HALF_COLS = Shared::HALF_COLS;
  extern __shared__ uint8_t smem_raw[];
  Shared& s = *reinterpret_cast<Shared*>(align_smem(smem_raw));
  // Read through a shuffle, the warpgroup's index is one value for the whole warp in the compiler's
  // eyes too, so what derives from it (the consumer's descriptors) lives in uniform registers
  // (CUTLASS's canonical_warp_group_idx does the same).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / WARPGROUP, 0);
  const uint32_t rank = cluster_cta_rank();
  const int cluster_id = blockIdx.x / CLUSTER;

  // Released by each consumer warpgroup of every CTA in the cluster.
  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, CONSUMERS * CLUSTER);
  cluster_sync();

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
        sched.order.origin<CLUSTER, BLOCK_M, BN>(w.tile, rank, m0, n0);
        for (int ks = w.k_begin; ks < w.k_end; ++ks, ++it) {
          const int slot = it % SLOTS;
          mbar_wait(&s.empty[slot], ((it / SLOTS) % 2) ^ 1);
          load_slice<BN>(s.a[slot], s.b[slot], &s.full[slot], &map_a, &map_b, ks, m0, n0, rank);
        }
      }
    }
  } else {
    // ================= consumer warpgroups =================
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;
    const bool leader = threadIdx.x % WARPGROUP == 0;
    if (leader) prefetch_tensor_map(&map_c);
    float acc[BN / 2];
    // The finished tile as bf16 pairs (pair i = accumulators 2i, 2i+1), stored during the next tile.
    uint32_t staged[BN / 4];
    bool staged_waiting = false;
    int staged_row0 = 0, staged_col0 = 0;
    // The next slice's place in the ring, over all work units (tc_hopper.cuh: slot 0's descriptors
    // built once, then one add per value and slice).
    RingCursor<SLOTS, sizeof(s.a[0]) / 16, sizeof(s.b[0]) / 16> ring(
        s.full, a_descriptor(s.a[0] + cw * 64 * BLOCK_K, 0), b_descriptor(s.b[0], 0));
    static_assert(offsetof(Shared, empty) == offsetof(Shared, full) + SLOTS * 8, "the cursor's barrier layout");
    WorkCursor work(sched, cluster_id);
    for (WorkUnit w; work.next(w);) {
      int m0, n0;
      sched.order.origin<CLUSTER, BLOCK_M, BN>(w.tile, rank, m0, n0);
      uint32_t previous_empty = 0;  // 0: none yet (no barrier lies at shared address 0)
      // The staged tile's first half goes out once this unit's 2nd slice is issued, the second half
      // once its 4th is (or both earlier, if the unit has fewer slices); a 128 x 64 tile is one
      // half, out at the 2nd slice (the call for the second stores nothing).
      const int store_at = w.k_end - w.k_begin > 1 ? w.k_begin + 1 : w.k_begin;
      const int store_at2 = w.k_end - w.k_begin > 3 ? w.k_begin + 3 : w.k_end - 1;
      for (int ks = w.k_begin; ks < w.k_end; ++ks) {
        mbar_wait(ring.full, ring.phase);
        // [excerpt one-batch-in-flight]
        // The unit's first wgmma overwrites the accumulators (scale-d = 0).
        wgmma_slice_at<BN>(acc, ring, ks > w.k_begin);
        if (staged_waiting && ks == store_at)
          store_tile_tma<HALF_COLS, 0, 1>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
        if (staged_waiting && ks == store_at2) {
          store_tile_tma<HALF_COLS, 1, 1>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
          staged_waiting = false;
        }
        wgmma_wait<1>();  // the batch of the previous slice is done; this one keeps running
        if (leader && previous_empty != 0) mbar_arrive_all_ctas<CLUSTER>(previous_empty);
        previous_empty = ring.empty();
        ring.advance();
        // [/excerpt one-batch-in-flight]
      }
      wgmma_wait<0>();
      fence_accumulators(acc);
      if (leader && previous_empty != 0) mbar_arrive_all_ctas<CLUSTER>(previous_empty);
      // [excerpt stream-k-fixup]
      const bool live = warp_rows_in_c(m0 + cw * 64, M);
      if (w.k_begin > 0) {  // stream-K contributor: the owner finishes this tile
        publish_partial<BN, CONSUMERS>(acc, partials, blockIdx.x, cw, live);
        continue;
      }
      if (w.k_end < sched.slices) {  // stream-K owner: add the partial sums of the clusters after this one
        const int tile_end = sched.split_tile_end(w.tile);
        for (int c = cluster_id + 1; c < sched.clusters && sched.share_start(c) < tile_end; ++c)
          if (sched.share_start(c + 1) > sched.share_start(c))
            add_partial<BN, CONSUMERS>(acc, partials, c * CLUSTER + int(rank), cw, live);
      }
      // [/excerpt stream-k-fixup]
      // Stored during the next tile (or below, after the last one). TMA clips the rows and columns
      // that lie outside C (partial tiles, the idle half of a cluster with an odd number of tile rows).
#pragma unroll
      for (int i = 0; i < BN / 4; ++i) staged[i] = pack_bf16x2(acc[2 * i], acc[2 * i + 1]);
      staged_waiting = true, staged_row0 = m0 + cw * 64, staged_col0 = n0;
    }
    if (staged_waiting) store_tile_tma<HALF_COLS, 0, 2>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
    if (leader) bulk_wait_all();  // shared memory must outlive the stores that read it
  }
  // No CTA may leave while its partner can still arrive on its barriers.
  cluster_sync();
}

// [excerpt when-stream-k]
// Whole tiles while they keep the clusters at least 80 % busy (4096^3: 256 cluster tiles in 4
// rounds of 66 = 97 %), or when a tile has fewer than 32 K-slices (the fix-up, an fp32 tile
// written by one cluster and read by another, weighs more against a short tile). Otherwise
// stream-K over every resident cluster.
constexpr double STREAM_K_BELOW = 0.8;     // whole-tile efficiency below which stream-K is used
constexpr int STREAM_K_MIN_SLICES = 32;    // ... for tiles of at least this many K slices
constexpr bool use_stream_k(int k_slices, int cluster_tiles, int clusters) {
  return k_slices >= STREAM_K_MIN_SLICES &&
         whole_tile_efficiency(cluster_tiles, clusters) < STREAM_K_BELOW;
}
// [/excerpt when-stream-k]

// [excerpt which-tile]
// The 128 x 128 tile where whole 128 x 256 tiles would leave more than half the clusters idle
// (1024^3: 16 cluster tiles of 128 x 256 for 66 clusters, 24 % busy; 32 of 128 x 128, twice the
// CTAs at work). On the H200 (GPU time, % of cuBLAS; experiments/JOURNAL.md, stage 6's second
// tile): 1024^3 60 against 51, 1000^3 70 against 59, 768^3 67 against 57. Not where the wide
// tiles keep half the clusters busy or more (1536^3, 55 %: 71 against 53): a 128 x 128 tile does
// three quarters of the multiply-adds per byte it loads (64 against 85 FLOP/byte).
constexpr double NARROW_TILE_BELOW = 0.5;  // busy share of 128 x 256 tiles below which: 128 x 128
constexpr int cluster_tiles(int M, int N, int block_n) {
  return ceil_div(ceil_div(M, BLOCK_M), CLUSTER) * ceil_div(N, block_n);
}
// The same step once more, to 128 x 64, where even 128 x 128 tiles keep fewer than half the
// clusters busy and K is short (1024^3: 32 of 66; 128 x 64 tiles: 64). On an H100 (GPU time, %
// of cuBLAS; experiments/JOURNAL.md, stage 6's 128 x 64 tile): 512^3 65 against 59, 768^3 73
// against 66, 1024^3 67 against 61, 1000^3 77 both. Where K is long the step stops at 128 x 128,
// whole tiles or stream-K by the rule above: stream-K spreads the work however few the tiles.
// On an H100 (GPU time, % of cuBLAS; experiments/JOURNAL.md, stage 6's rule with the shorter loop),
// 128 x 128 against 128 x 256 with stream-K: 512 x 4096 x 4096 93 against 71, 768 x 2304 x 16384
// 87 against 74, 256 x 4096 x 14336 93 against 85.
constexpr int auto_block_n(int M, int N, int k_slices, int clusters) {
  const double wide = whole_tile_efficiency(cluster_tiles(M, N, BLOCK_N), clusters);
  if (wide >= NARROW_TILE_BELOW) return BLOCK_N;
  const double narrow = whole_tile_efficiency(cluster_tiles(M, N, NARROW_BLOCK_N), clusters);
  const bool long_k = k_slices >= STREAM_K_MIN_SLICES;
  return long_k || narrow >= NARROW_TILE_BELOW ? NARROW_BLOCK_N : NARROWEST_BLOCK_N;
}
// [/excerpt which-tile]


// ---- the plan: tile and schedule per shape ---------------------------------------------------------
// What the launcher below runs, as one constexpr function (course_lib/kernels/tensor_cores/model.py,
// stage6_plan, is held to it by a test that compiles both): the operands swapped for M <= DECODE_MAX_M
// (tc_decode.cuh), else the tile above and whole tiles or stream-K. `block_n` (TILE_AUTO or a tile's
// width) and `schedule` (SCHEDULE_AUTO or one of the others, tc_launch.h) force a choice; `clusters`
// (>= 1) are the 2-CTA clusters the GPU holds at once.
struct Plan {
  int tile_m, tile_n;  // the piece of C a CTA computes: 128 x 256, 128 x 128, or (swapped) T rows x 64 columns
  int schedule;        // SCHEDULE_WHOLE_TILES, SCHEDULE_STREAM_K or SCHEDULE_SWAPPED
};
// The swapped schedule's token tile: the smallest of 16, 32, 64, 96, 128 that holds M rows (128 beyond).
constexpr int token_tile(int M) { return M <= 16 ? 16 : M <= 32 ? 32 : M <= 64 ? 64 : M <= 96 ? 96 : DECODE_MAX_M; }
constexpr Plan plan(int M, int N, int K, int clusters, int block_n = TILE_AUTO, int schedule = SCHEDULE_AUTO) {
  if (schedule == SCHEDULE_SWAPPED || (schedule == SCHEDULE_AUTO && use_swapped(M)))
    return Plan{token_tile(M), DECODE_COLS, SCHEDULE_SWAPPED};
  const int bn = block_n == TILE_AUTO ? auto_block_n(M, N, ceil_div(K, BLOCK_K), clusters) : block_n;
  const bool split = schedule == SCHEDULE_STREAM_K ||
                     (schedule == SCHEDULE_AUTO && use_stream_k(ceil_div(K, BLOCK_K), cluster_tiles(M, N, bn), clusters));
  return Plan{BLOCK_M, bn, split ? SCHEDULE_STREAM_K : SCHEDULE_WHOLE_TILES};
}

// ---- decode: few rows of A, operands swapped ------------------------------------------------------
// The schedule of tc_decode.cuh (when to swap, the tile, the ring's depth, split K): each CTA computes
// a 64 (columns of C) x T (rows of C) piece of C^T = B^T A^T from 64 x 64 slices of B (read through
// TMA exactly as above) and T x 64 slices of A (a box of T rows; rows past M read as zeros), one
// producer warp and one consumer warpgroup.
template <int T>
struct DecodeSmem {
  static constexpr int STAGES = decode_stages(T);
  bf16 a[STAGES][T * TILE_K];                               // T rows of A: T x 128 B, K-major
  bf16 b[STAGES][TILE_K * DECODE_COLS];                     // one 64 x 64 box of B, N-major
  uint64_t full[STAGES], empty[STAGES];
  int last;                                                 // this CTA adds the partial sums
  static_assert(sizeof(a[0]) + sizeof(b[0]) == decode_slot_bytes(T), "the ring slot of tc_decode.cuh");
};
template <int T>
constexpr int decode_smem_bytes() { return int(sizeof(DecodeSmem<T>)) + SMEM_SLACK; }

template <int T>
__global__ void __launch_bounds__(DECODE_THREADS)
decode_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, bf16* c,
              DecodeSplits splits, int M, int N, int slices_per_range, int k_slices) {
  extern __shared__ uint8_t smem_raw[];
  DecodeSmem<T>& s = *reinterpret_cast<DecodeSmem<T>*>(align_smem(smem_raw));
  constexpr int STAGES = DecodeSmem<T>::STAGES;
  const int n0 = blockIdx.x * DECODE_COLS, m0 = blockIdx.y * T;
  const int range = blockIdx.z, ranges = gridDim.z;
  const int k_begin = range * slices_per_range;
  const int k_end = min(k_begin + slices_per_range, k_slices);
  const int tile = blockIdx.y * gridDim.x + blockIdx.x;

  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, 1);
  __syncthreads();

  if (threadIdx.x >= WARPGROUP) {
    // ---- producer warp: one thread asks TMA for the slices, STAGES ahead ------------------------
    if (threadIdx.x == WARPGROUP) {
      for (int ks = k_begin, it = 0; ks < k_end; ++ks, ++it) {
        const int slot = it % STAGES;
        mbar_wait(&s.empty[slot], ((it / STAGES) % 2) ^ 1);
        mbar_arrive_expect_tx(&s.full[slot], decode_slot_bytes(T));
        tma_load_2d(s.a[slot], &map_a, &s.full[slot], ks * TILE_K, m0);
        tma_load_2d(s.b[slot], &map_b, &s.full[slot], n0, ks * TILE_K);
      }
    }
    return;
  }

  // ---- consumer warpgroup: acc = (this range's part of) C^T[n0 .. n0+63][m0 .. m0+T-1] -------------
  float acc[T / 2];
#pragma unroll
  for (int i = 0; i < T / 2; ++i) acc[i] = 0.f;
  // The ring's place carried from slice to slice (tc_hopper.cuh's RingCursor, as in the main kernel).
  RingCursor<STAGES, sizeof(s.a[0]) / 16, sizeof(s.b[0]) / 16> ring(s.full, a_descriptor(s.a[0], 0),
                                                                     b_descriptor(s.b[0], 0));
  static_assert(offsetof(DecodeSmem<T>, empty) == offsetof(DecodeSmem<T>, full) + STAGES * 8,
                "the cursor's barrier layout");
  constexpr uint32_t A_K16 = WGMMA_K * 2 / 16, B_K16 = WGMMA_K * SWIZZLE_BYTES / 16;  // as a/b_descriptor
  uint32_t previous_empty = 0;  // 0: none yet (no barrier lies at shared address 0)
  for (int ks = k_begin; ks < k_end; ++ks) {
    mbar_wait(ring.full, ring.phase);
    // [excerpt swapped-slice]
    wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < TILE_K / WGMMA_K; ++k16)  // B's box as A', A's rows as B'
      wgmma_swapped<T>(acc, ring.b_desc(k16 * B_K16), ring.a_desc(k16 * A_K16), true);
    wgmma_commit();
    // [/excerpt swapped-slice]
    wgmma_wait<1>();  // as in the main kernel: the previous slice is done, this one keeps running
    if (threadIdx.x == 0 && previous_empty != 0) mbar_arrive(previous_empty);
    previous_empty = ring.empty();
    ring.advance();
  }
  wgmma_wait<0>();
  fence_accumulators(acc);

  // ---- split K: publish this range's sums; the last CTA of the tile adds them all ------------------
  const int tid = threadIdx.x;
  if (ranges > 1 && !decode_add_ranges<T>(acc, splits, tile, range, ranges, &s.last)) return;

  // ---- epilogue: C[m][n] = acc's C^T[n][m], bf16, element by element (C is small at decode) --------
  // [excerpt swapped-store]
  const int warp = tid / 32, lane = tid % 32;
#pragma unroll
  for (int j = 0; j < T / 8; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {          // rows lane/4 and lane/4 + 8 of the warp's 16 in C^T
      const int n = n0 + warp * 16 + lane / 4 + 8 * h;
      const int m = m0 + 8 * j + 2 * (lane % 4);
      if (n >= N) continue;
      if (m < M) c[size_t(m) * N + n] = __float2bfloat16_rn(acc[4 * j + 2 * h]);
      if (m + 1 < M) c[size_t(m + 1) * N + n] = __float2bfloat16_rn(acc[4 * j + 2 * h + 1]);
    }
  }
  // [/excerpt swapped-store]
}

template <int T>
void launch_decode(const Gemm& g, cudaStream_t stream, const Workspace& ws) {
  auto kernel = decode_kernel<T>;
  constexpr int smem = decode_smem_bytes<T>();
  const int k_slices = ceil_div(g.K, TILE_K);
  const DecodeGrid plan = decode_grid<T>(kernel, smem, g.M, g.N, k_slices, ws);
  const CUtensorMap map_a = make_tensor_map(g.a, g.M, g.K, T, TILE_K, CU_TENSOR_MAP_SWIZZLE_128B);
  kernel<<<plan.grid, DECODE_THREADS, smem, stream>>>(map_a, tensor_map_b(g), g.c, plan.splits, g.M, g.N,
                                                      plan.slices_per_range, k_slices);
  check_launch("tc_6_tma_store (decode)");
}

// The token tile for M rows (token_tile above).
inline void launch_decode_for(const Gemm& g, cudaStream_t stream, const Workspace& ws) {
  switch (token_tile(g.M)) {
    case 16: return launch_decode<16>(g, stream, ws);
    case 32: return launch_decode<32>(g, stream, ws);
    case 64: return launch_decode<64>(g, stream, ws);
    case 96: return launch_decode<96>(g, stream, ws);
    default: return launch_decode<DECODE_MAX_M>(g, stream, ws);
  }
}

// Whole tiles (a grid trimmed to the tiles, tc_schedule.cuh) or stream-K (every resident cluster) over
// 128 x BN tiles. Stream-K's partial sums and flags come from the launch's workspace, one slot of
// 128 x BN fp32 per CTA (fixup_buffers, tc_stream_k.cuh).
template <int BN>
void launch_tiles(const Gemm& g, cudaStream_t stream, const Workspace& ws, int group_m, int max_ctas, bool split) {
  auto k = kernel<BN>;
  constexpr int smem = smem_bytes<BN>();
  allow_dynamic_smem(k, smem);
  const GroupedTiles tiles{ceil_div(ceil_div(g.M, BLOCK_M), CLUSTER), ceil_div(g.N, BN), group_m};
  const int clusters = resident_clusters(k, THREADS, smem, CLUSTER, max_ctas);
  const int ctas = split ? clusters * CLUSTER : trimmed_ctas(tiles.count(), clusters, CLUSTER);
  const TileSchedule sched = make_schedule(tiles, ctas / CLUSTER, ceil_div(g.K, BLOCK_K), split);
  const Partials partials =
      sched.dp_tiles < tiles.count() ? fixup_buffers<BN, CONSUMERS>(ws, ctas) : Partials{nullptr, nullptr};
  const CUtensorMap map_c = make_tensor_map(g.c, g.M, g.N, C_BOX, C_BOX, CU_TENSOR_MAP_SWIZZLE_128B);
  // B in boxes of 64 x 64, or of 32 x 64 for the 128 x 64 tile (its two CTAs' halves of one box, load_slice)
  const CUtensorMap map_b = BN == NARROWEST_BLOCK_N
                                ? make_tensor_map(g.b, g.K, g.N, TILE_K / CLUSTER, BN, CU_TENSOR_MAP_SWIZZLE_128B)
                                : tensor_map_b(g);
  k<<<ctas, THREADS, smem, stream>>>(tensor_map_a<BLOCK_M>(g), map_b, map_c, sched, partials, g.M);
  check_launch(BN == BLOCK_N ? "tc_6_tma_store" : BN == NARROW_BLOCK_N ? "tc_6_tma_store (128 x 128 tiles)"
                                                                       : "tc_6_tma_store (128 x 64 tiles)");
}

// The plan the launcher runs at M x N x K on this GPU (the resident clusters counted), the knobs checked.
Plan launch_plan(int M, int N, int K, int max_ctas, int schedule, int block_n) {
  if (schedule < SCHEDULE_AUTO || schedule > SCHEDULE_SWAPPED)
    throw std::runtime_error("tc_6_tma_store: schedule must be SCHEDULE_AUTO (-1), SCHEDULE_WHOLE_TILES (0), "
                             "SCHEDULE_STREAM_K (1) or SCHEDULE_SWAPPED (2), not " + std::to_string(schedule));
  if (block_n != TILE_AUTO && block_n != BLOCK_N && block_n != NARROW_BLOCK_N && block_n != NARROWEST_BLOCK_N)
    throw std::runtime_error("tc_6_tma_store: block_n must be TILE_AUTO (0), 256 (128 x 256 tiles), 128 "
                             "(128 x 128 tiles) or 64 (128 x 64 tiles), not " + std::to_string(block_n));
  const bool swapped = schedule == SCHEDULE_SWAPPED || (schedule == SCHEDULE_AUTO && use_swapped(M));
  // The rule counts the clusters the 128 x 256 kernel holds at once (each tile's kernel holds one CTA
  // per SM); the decode path needs no count.
  int clusters = 0;
  if (!swapped) {
    allow_dynamic_smem(kernel<BLOCK_N>, SMEM_BYTES);  // before the occupancy API is asked about it
    clusters = resident_clusters(kernel<BLOCK_N>, THREADS, SMEM_BYTES, CLUSTER, max_ctas);
  }
  return plan(M, N, K, clusters, block_n, schedule);
}

}  // namespace stage6

std::array<int, 3> tc_6_tma_store_plan(int M, int N, int K, int max_ctas, int schedule, int block_n) {
  const stage6::Plan p = stage6::launch_plan(M, N, K, max_ctas, schedule, block_n);
  return {p.tile_m, p.tile_n, p.schedule};
}

void launch_tc_6_tma_store(const Gemm& g, cudaStream_t stream, const Workspace& ws, int group_m, int max_ctas,
                           int schedule, int block_n) {
  using namespace stage6;
  if (group_m < 1) throw std::runtime_error("tc_6_tma_store: group_m must be >= 1");
  const Plan p = launch_plan(g.M, g.N, g.K, max_ctas, schedule, block_n);
  if (p.schedule == SCHEDULE_SWAPPED) return launch_decode_for(g, stream, ws);  // forced at M > 128: tiles of 128 tokens
  const bool split = p.schedule == SCHEDULE_STREAM_K;
  if (p.tile_n == NARROW_BLOCK_N) return launch_tiles<NARROW_BLOCK_N>(g, stream, ws, group_m, max_ctas, split);
  if (p.tile_n == NARROWEST_BLOCK_N) return launch_tiles<NARROWEST_BLOCK_N>(g, stream, ws, group_m, max_ctas, split);
  return launch_tiles<BLOCK_N>(g, stream, ws, group_m, max_ctas, split);
}

}  // namespace tc
