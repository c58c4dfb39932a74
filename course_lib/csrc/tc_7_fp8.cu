// Stage 7 - FP8: stage 6's kernel on e4m3 inputs, and the scales that make eight bits usable.
//
// What changes against stage 6 (whole tiles here; for M <= 128 the swapped decode schedule is
// tc_7_decode.cuh, and stream-K is not repeated):
// * Operands: A (M x K) and W (N x K, the weight of nn.Linear) are e4m3, one byte each. wgmma on
//   8-bit types takes both operands K-major (tc_hopper.cuh, "FP8"), so W's tile is loaded and
//   described exactly like A's. A 128-byte swizzled row now holds 128 of K, so a slice of K is 128
//   wide and each slice is 4 wgmmas of k = 32. Per slice the bytes are stage 6's (48 KB for a
//   128 x 256 tile) and the multiply-adds twice as many: the tensor cores run FP8 at twice the rate.
// * The sum over K. The FP8 tensor cores keep fewer bits in their accumulator than fp32 (about 14
//   below its largest exponent: course_lib/fp8.py's model, measured on the H200 in notebook 12), so
//   a long sum left in wgmma's accumulator loses digits ("fast accumulation", cuBLAS's
//   use_fast_accum). By default each slice's wgmmas start from zero, and once they are done the
//   consumer adds the slice's sums into a third set of fp32 registers (`total`): promotion, every
//   128 of K, as DeepGEMM does (tc_fp8.cuh). Two sets of accumulators take turns, so that a slice is
//   promoted while the next slice's wgmmas run: a consumer issues slice k + 1 into one set, waits
//   for all but that batch (wait_group 1) and promotes slice k from the other. The sets and `total`
//   (3 x 64 registers) must fit a consumer's 232, so a promoting tile is 128 x 128; fast
//   accumulation keeps stage 6's 128 x 256 tile and its one wgmma batch in flight.
// * ptxas keeps the wgmmas asynchronous only where no set is in flight across a loop's back edge
//   (otherwise it serialises every wgmma: warning C7514). So slices go in groups of PROMOTE_GROUP,
//   straight code that ends with nothing in flight; the slices that store the last tile (1 and 3),
//   and any left over after the groups, go one at a time.
// * Every instruction of the loop runs 32 times per tile at K = 4096: `total` starts at zero once
//   per tile (no test per slice), the slot's barrier address and descriptor words are carried from
//   slice to slice (one add each, in uniform registers: the warpgroup index is read through a
//   shuffle), block scales are loaded while the slice's wgmmas run. Per slice one at a time, a
//   promoting consumer warp runs 125 instructions per tensor or row (64 of them the promotion's
//   FADDs), 134 with block scales (tc_7 SASS, nvcc 13.0; 164 and 186 before those two changes).
// * Scales per tensor or per row (and column) of C do not change along K: the epilogue multiplies
//   each sum by scale_a[row] * scale_w[column] as it converts it to bf16.
// * Block scales (DeepSeek-V3's recipe: A per 1 x 128, W per 128 x 128 blocks) change every 128 of
//   K, i.e. every slice: the promotion multiplies the slice's sums by the slice's scales before it
//   adds them (a 128 x 128 tile meets one block of W per slice).
// Producer, clusters (W's rows multicast), grouped tile order and the TMA-store epilogue overlapped
// with the next tile's mainloop are stage 6's.
#include "tc_7_decode.cuh"
#include "tc_fp8.cuh"
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"

namespace tc {
namespace stage7 {

using e4m3 = uint8_t;  // the bytes; wgmma reads them as .e4m3
constexpr int BLOCK_M = 128, BLOCK_K = SWIZZLE_BYTES;  // a slice: 128 e4m3 of K, one swizzled row
#ifndef TC7_FAST_BLOCK_N
#define TC7_FAST_BLOCK_N 256
#endif
constexpr int BLOCK_N = TC7_FAST_BLOCK_N;              // fast accumulation: the sums stay in wgmma's accumulator
                                                       // (experiments build it with 128: the promoted tile)
constexpr int BLOCK_N_PROMOTED = 128;                  // promoted sums (and one 128 x 128 block of W per tile)
#ifndef TC7_GROUP
constexpr int PROMOTE_GROUP = 4;  // slices per group of the overlapped promotion (tc_fp8.cuh)
#else
constexpr int PROMOTE_GROUP = TC7_GROUP;  // experiments: 1 = one slice at a time
#endif
constexpr int SCALE_K = 128;                           // K covered by one block scale
static_assert(SCALE_K == BLOCK_K, "one block scale per slice of K");
constexpr int CLUSTER = 2;                             // CTAs sharing W's slices by multicast
constexpr int CONSUMERS = BLOCK_M / 64;
constexpr int THREADS = (1 + CONSUMERS) * WARPGROUP;
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(fits_register_pool(THREADS, PRODUCER_REGS, CONSUMER_REGS, CONSUMERS), "more than the CTA's register pool");
constexpr int STAGES = 4;                              // 48 KB slots (as stage 6)
constexpr int STAGES_PROMOTED = 6;                     // 32 KB slots
template <int BN>
struct Smem {
  static constexpr int SLOTS = BN == BLOCK_N ? STAGES : STAGES_PROMOTED;
  static constexpr int HALF_COLS = BN / 2;  // columns of C staged per round of the epilogue
  e4m3 a[SLOTS][BLOCK_M * BLOCK_K];
  e4m3 w[SLOTS][BN * BLOCK_K];
  bf16 c[CONSUMERS][HALF_COLS / C_BOX][C_BOX * C_BOX];
  uint64_t full[SLOTS], empty[SLOTS];
};
template <int BN>
constexpr int smem_bytes() { return int(sizeof(Smem<BN>)) + SMEM_SLACK; }
static_assert(smem_bytes<BLOCK_N>() <= 227 * 1024, "Hopper's per-block shared-memory limit");
static_assert(smem_bytes<BLOCK_N_PROMOTED>() <= 227 * 1024, "Hopper's per-block shared-memory limit");

using fp8::Scales;

template <int BN, bool PROMOTE, bool BLOCKS>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(THREADS, 1)
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_w,
       const __grid_constant__ CUtensorMap map_c, Scales scales, GroupedTiles tiles, int M, int N, int K) {
  using S = Smem<BN>;
  constexpr int SLOTS = S::SLOTS, HALF_COLS = S::HALF_COLS;
  constexpr int W_ROWS = BN / CLUSTER;  // rows of W's slice each CTA of the cluster loads and multicasts
  extern __shared__ uint8_t smem_raw[];
  S& s = *reinterpret_cast<S*>(align_smem(smem_raw));
  // Read through a shuffle, the warpgroup's index is one value for the whole warp in the compiler's
  // eyes too: what is derived from it (the consumer's descriptors) lives in uniform registers
  // instead of being moved into them before every wgmma (CUTLASS's canonical_warp_group_idx).
  const int wg = __shfl_sync(0xffffffffu, threadIdx.x / WARPGROUP, 0);
  const uint32_t rank = cluster_cta_rank();
  const int first_tile = blockIdx.x / CLUSTER, tile_step = gridDim.x / CLUSTER;
  const int k_slices = ceil_div(K, BLOCK_K);

  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, CONSUMERS * CLUSTER);
  cluster_sync();

  if (wg == 0) {
    // ================= producer warpgroup =================
    setmaxnreg_dec<PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      prefetch_tensor_map(&map_a);
      prefetch_tensor_map(&map_w);
      int it = 0;
      for (int t = first_tile; t < tiles.count(); t += tile_step) {
        int m0, n0;
        tiles.origin<CLUSTER, BLOCK_M, BN>(t, rank, m0, n0);
        for (int ks = 0; ks < k_slices; ++ks, ++it) {
          const int slot = it % SLOTS;
          mbar_wait(&s.empty[slot], ((it / SLOTS) % 2) ^ 1);
          // A's 128 rows; this CTA's half of W's rows, multicast: all of W's slice arrives in both CTAs.
          mbar_arrive_expect_tx(&s.full[slot], (BLOCK_M + BN) * BLOCK_K);
          tma_load_2d(s.a[slot], &map_a, &s.full[slot], ks * BLOCK_K, m0);
          tma_load_2d_multicast(s.w[slot] + rank * W_ROWS * BLOCK_K, &map_w, &s.full[slot], ks * BLOCK_K,
                                n0 + int(rank) * W_ROWS, (1u << CLUSTER) - 1);
        }
      }
    }
  } else {
    // ================= consumer warpgroups =================
    setmaxnreg_inc<CONSUMER_REGS>();
    const int cw = wg - 1;
    const bool leader = threadIdx.x % WARPGROUP == 0;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % WARPGROUP) / 32;
    if (leader) prefetch_tensor_map(&map_c);
    // The next slice's place in the ring (tc_hopper.cuh): slot 0's descriptors (this consumer's 64
    // rows of A; W's BN rows) built once, then its `full` barrier's address and its tiles' descriptor
    // low words carried from slice to slice by one add each.
    RingCursor<SLOTS, sizeof(s.a[0]) / 16, sizeof(s.w[0]) / 16> ring(
        s.full, kmajor_descriptor(s.a[0] + cw * 64 * BLOCK_K, 0), kmajor_descriptor(s.w[0], 0));
    static_assert(offsetof(S, empty) == offsetof(S, full) + SLOTS * 8, "the cursor's barrier layout");
    float acc[BN / 2];
    float total[PROMOTE ? BN / 2 : 1];  // the promoted fp32 sums
    uint32_t staged[BN / 4];            // the finished tile as bf16 pairs, stored during the next tile
    bool staged_waiting = false;
    int staged_row0 = 0, staged_col0 = 0;
    for (int t = first_tile; t < tiles.count(); t += tile_step) {
      int m0, n0;
      tiles.origin<CLUSTER, BLOCK_M, BN>(t, rank, m0, n0);
      const int row0 = m0 + cw * 64;
      const fp8::ThreadRows rows = fp8::thread_rows(row0, warp, lane, M);  // the thread's two rows of C
      const int store_at = k_slices > 1 ? 1 : 0;                 // as stage 6: the staged tile's halves
      const int store_at2 = k_slices > 3 ? 3 : k_slices - 1;     // go out behind slices 2 and 4
      // [excerpt fp8-slice]
      // One slice of K into the accumulators d: four wgmmas of k = 32, each 32 bytes further along
      // the slot's rows. `from_zero`: the first overwrites d (scale-d = 0) instead of adding to it.
      const auto issue_slice = [&](float (&d)[BN / 2], bool from_zero) {
        mbar_wait(ring.full, ring.phase);
        wgmma_fence();
#pragma unroll
        for (int k32 = 0; k32 < BLOCK_K / FP8_WGMMA_K; ++k32)
          wgmma_fp8<BN>(d, ring.a_desc(k32 * FP8_WGMMA_K / 16), ring.b_desc(k32 * FP8_WGMMA_K / 16),
                        !from_zero || k32 > 0);
        wgmma_commit();
      };
      // [/excerpt fp8-slice]
      // The last tile's halves go out behind this tile's slices 2 and 4 (as stage 6).
      const auto store_staged = [&](int ks) {
        if (staged_waiting && ks == store_at)
          store_tile_tma<HALF_COLS, 0, 1>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
        if (staged_waiting && ks == store_at2) {
          store_tile_tma<HALF_COLS, 1, 1>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
          staged_waiting = false;
        }
      };
      if constexpr (PROMOTE) {
        // [excerpt promote]
        // A slice's wgmmas start from zero in one of two accumulator sets (acc, acc1); `start`
        // returns the slot to free once they are done, which `retire` waits for (leaving the newest
        // `in_flight` batches running) before freeing it. tc_fp8.cuh promotes each slice (total +=
        // acc, times the slice's block scales if any) while the next slice's wgmmas run.
        float acc1[BN / 2];
        const auto start = [&](int, float (&d)[BN / 2]) {
          issue_slice(d, true);
          const uint32_t empty = ring.empty();
          ring.advance();
          return empty;
        };
        const auto start_and_store = [&](int ks, float (&d)[BN / 2]) {
          const uint32_t empty = start(ks, d);
          store_staged(ks);
          return empty;
        };
        const auto retire = [&](float (&d)[BN / 2], uint32_t empty, auto in_flight) {
          wgmma_wait<decltype(in_flight)::value>();
          fence_accumulators(d);
          if (leader) mbar_arrive_all_ctas<CLUSTER>(empty);
        };
        const fp8::BlockScaleRows block_scales = fp8::block_scale_rows(scales, rows, n0 / BN);
        if constexpr (PROMOTE_GROUP > 1) {
          // The slices that store the last tile go one at a time, so that `staged` (32 registers) is
          // never live beside both sets and `total` (192): 224 of the 232 before any address or scale.
          fp8::promoted_sum_overlapped<BLOCKS, PROMOTE_GROUP>(total, acc, acc1, k_slices,
                                                              staged_waiting ? store_at2 + 1 : 0, block_scales,
                                                              start_and_store, start, retire);
        } else {  // one slice at a time (experiments: -DTC7_GROUP=1)
          fp8::promoted_sum<BLOCKS>(total, acc, k_slices, block_scales, [&](int ks) {
            retire(acc, start_and_store(ks, acc), fp8::InFlight<0>{});
          });
        }
        // [/excerpt promote]
      } else {
        // Fast accumulation, as stage 6: one batch stays in flight; a slot is freed a slice later.
        uint32_t previous_empty = 0;  // 0: none yet (no barrier lies at shared address 0)
        for (int ks = 0; ks < k_slices; ++ks) {
          issue_slice(acc, ks == 0);
          store_staged(ks);
          wgmma_wait<1>();  // the previous slice is done, this one keeps running
          if (leader && previous_empty != 0) mbar_arrive_all_ctas<CLUSTER>(previous_empty);
          previous_empty = ring.empty();
          ring.advance();
        }
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (leader && previous_empty != 0) mbar_arrive_all_ctas<CLUSTER>(previous_empty);
      }
      // [excerpt epilogue-scales]
      // Scales per tensor or row: C[row][col] = sum * scale_a[row] * scale_w[col], as it turns bf16.
      const auto scale_and_stage = [&](const float (&sums)[BN / 2]) {
        const float a_lo = scales.a[rows.lo * scales.a_step], a_hi = scales.a[rows.hi * scales.a_step];
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {  // columns col, col + 1 of C (N is a multiple of 8)
          const int col = min(n0 + 8 * j + 2 * (lane % 4), N - 2);
          const float w0 = scales.w[col * scales.w_step], w1 = scales.w[(col + 1) * scales.w_step];
          staged[2 * j] = pack_bf16x2(sums[4 * j] * (a_lo * w0), sums[4 * j + 1] * (a_lo * w1));
          staged[2 * j + 1] = pack_bf16x2(sums[4 * j + 2] * (a_hi * w0), sums[4 * j + 3] * (a_hi * w1));
        }
      };
      // [/excerpt epilogue-scales]
      if constexpr (BLOCKS) {  // already scaled, slice by slice
#pragma unroll
        for (int i = 0; i < BN / 4; ++i) staged[i] = pack_bf16x2(total[2 * i], total[2 * i + 1]);
      } else if constexpr (PROMOTE) {
        scale_and_stage(total);
      } else {
        scale_and_stage(acc);
      }
      staged_waiting = true, staged_row0 = row0, staged_col0 = n0;
    }
    if (staged_waiting) store_tile_tma<HALF_COLS, 0, 2>(staged, s.c[cw][0], &map_c, 1 + cw, staged_row0, staged_col0);
    if (leader) bulk_wait_all();  // shared memory must outlive the stores that read it
  }
  // No CTA may leave while its partner can still arrive on its barriers.
  cluster_sync();
}

template <int BN, bool PROMOTE, bool BLOCKS>
void launch(const Fp8Gemm& g, cudaStream_t stream, int group_m, int max_ctas) {
  auto k = kernel<BN, PROMOTE, BLOCKS>;
  constexpr int smem = smem_bytes<BN>();
  allow_dynamic_smem(k, smem);
  const GroupedTiles tiles{ceil_div(ceil_div(g.M, BLOCK_M), CLUSTER), ceil_div(g.N, BN), group_m};
  const int ctas = persistent_ctas(k, THREADS, smem, CLUSTER, tiles.count(), max_ctas);
  const CUtensorMap map_a =
      make_tensor_map(g.a, g.M, g.K, BLOCK_M, BLOCK_K, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_DATA_TYPE_UINT8);
  const CUtensorMap map_w =
      make_tensor_map(g.w, g.N, g.K, BN / CLUSTER, BLOCK_K, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_DATA_TYPE_UINT8);
  const CUtensorMap map_c = make_tensor_map(g.c, g.M, g.N, C_BOX, C_BOX, CU_TENSOR_MAP_SWIZZLE_128B);
  const int step = g.scaling == SCALING_ROW ? 1 : 0;
  const Scales scales{g.scale_a, g.scale_w, step, step, ceil_div(g.K, SCALE_K)};
  k<<<ctas, THREADS, smem, stream>>>(map_a, map_w, map_c, scales, tiles, g.M, g.N, g.K);
  check_launch("tc_7_fp8");
}

}  // namespace stage7

void launch_tc_7_fp8(const Fp8Gemm& g, cudaStream_t stream, const Workspace& ws, int group_m, int max_ctas,
                     int schedule) {
  using namespace stage7;
  if (group_m < 1) throw std::runtime_error("tc_7_fp8: group_m must be >= 1");
  if (g.scaling != SCALING_TENSOR && g.scaling != SCALING_ROW && g.scaling != SCALING_BLOCK)
    throw std::runtime_error("tc_7_fp8: scaling must be SCALING_TENSOR, SCALING_ROW or SCALING_BLOCK");
  if (g.scaling == SCALING_BLOCK && g.fast_accumulation)
    throw std::runtime_error("tc_7_fp8: block scales are applied per K slice, so the sums are always promoted");
  if (schedule != SCHEDULE_AUTO && schedule != SCHEDULE_WHOLE_TILES && schedule != SCHEDULE_SWAPPED)
    throw std::runtime_error("tc_7_fp8: schedule must be SCHEDULE_AUTO (-1), SCHEDULE_WHOLE_TILES (0) or "
                             "SCHEDULE_SWAPPED (2): stage 7 has no stream-K");
  // A decode step: the operands swapped, W's rows on wgmma's 64-row side (tc_7_decode.cuh).
  if (schedule == SCHEDULE_SWAPPED || (schedule == SCHEDULE_AUTO && use_swapped(g.M)))
    return stage7_decode::launch_swapped(g, stream, ws);
  if (g.scaling == SCALING_BLOCK) return launch<BLOCK_N_PROMOTED, true, true>(g, stream, group_m, max_ctas);
  if (g.fast_accumulation) return launch<BLOCK_N, false, false>(g, stream, group_m, max_ctas);
  return launch<BLOCK_N_PROMOTED, true, false>(g, stream, group_m, max_ctas);
}

}  // namespace tc
