// Stage 7 at decode: a few token rows of e4m3 A (M <= 128) times an e4m3 weight W, operands swapped.
//
// The schedule is tc_decode.cuh's (stage 6's decode path): C^T = W A^T, so each CTA computes a
// 64 x T piece of C^T - 64 rows of W on wgmma's M side, T tokens (16, 32, 64, 96 or 128) on its N side -
// from one producer warp and one consumer warpgroup, with K split into ranges where the column tiles
// are too few to fill the GPU. What FP8 changes:
// * No transposes. wgmma on 8-bit inputs reads both operands K-major, and both already are (A is
//   M x K, W is N x K): W's 64 x 128-byte box is wgmma's A, the T token rows of A are its B, both
//   described by kmajor_descriptor (tc_hopper.cuh, wgmma_fp8_swapped). A slice of K is 128 e4m3 (one
//   swizzled row, one block scale), four wgmmas of k = 32.
// * The accumulators hold C^T: a thread's rows are rows of W (columns n of C), its columns are tokens
//   (rows m of C). Every scale indexed by a row of C in the big kernel is indexed here by an
//   accumulator's *column*, and the other way round (tc_fp8_decode.cuh: decode_token, decode_w_row).
// * Promotion, as the big kernel: each slice's four wgmmas start from zero and, once done, their
//   sums are added into fp32 registers (`total`); with block scales the slice's sums are first
//   multiplied by scale_a[m][ks] * scale_w[n / 128][ks]. A CTA's 64 rows of W lie in one 128-row
//   block of W's scales (its first row is a multiple of 64), so scale_w is one number per slice,
//   and scale_a one per token: T / 4 per thread. They are read one slice ahead.
//   Each slice waits for its own wgmmas (wait_group 0) before it promotes: at decode the tensor
//   cores wait for the weights, not the other way round, and the two or three CTAs an SM holds
//   overlap one's promotion with another's wgmmas (as the big kernel's two consumers do).
// * Fast accumulation (per tensor or row): the sums stay in wgmma's accumulator for the whole range
//   of K, with one batch of wgmmas in flight behind the running one, as stage 6's decode kernel.
// * Split K adds the ranges' fp32 sums (promoted ones, or the accumulators of fast accumulation).
//   Scales per tensor or row are applied after that, in the epilogue: C[m][n] = sum * sa[m] * sw[n];
//   block scales are already in the sums.
// * C is written element by element (2-byte stores, rows past M and columns past N skipped): at
//   decode C is small next to W, and C^T's fragments lie across C's rows.
#pragma once

#include "tc_decode.cuh"
#include "tc_fp8.cuh"
#include "tc_fp8_decode.cuh"
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"

namespace tc {
namespace stage7_decode {

using e4m3 = uint8_t;                    // the bytes; wgmma reads them as .e4m3
constexpr int SLICE_K = SWIZZLE_BYTES;   // a slice of K: 128 e4m3, one swizzled row, one block scale
constexpr int W_SCALE_ROWS = 128;        // rows of W per block scale (DeepSeek-V3's 128 x 128 blocks)
static_assert(W_SCALE_ROWS % DECODE_COLS == 0, "a CTA's rows of W share one block scale per slice");

template <int T>
struct Smem {
  static constexpr int STAGES = decode_stages(T);
  e4m3 a[STAGES][T * SLICE_K];            // T token rows of A, 128 bytes of K each (K-major)
  e4m3 w[STAGES][DECODE_COLS * SLICE_K];  // 64 rows of W, 128 bytes of K each (K-major)
  uint64_t full[STAGES], empty[STAGES];
  int last;                               // split K: this CTA adds the ranges' sums
  static_assert(sizeof(a[0]) + sizeof(w[0]) == decode_slot_bytes(T), "the ring slot of tc_decode.cuh");
  static_assert(sizeof(a[0]) % SWIZZLE_ATOM == 0, "every swizzled tile starts on a 1024-byte boundary");
};
template <int T>
constexpr int smem_bytes() { return int(sizeof(Smem<T>)) + SMEM_SLACK; }

// ---- the kernel -------------------------------------------------------------------------------------
// Grid: (column tiles of 64, token tiles of T, ranges of K). PROMOTE: sums promoted every slice;
// BLOCKS: block scales (promoted); neither: fast accumulation, scales per tensor or row.
template <int T, bool PROMOTE, bool BLOCKS>
__global__ void __launch_bounds__(DECODE_THREADS)
decode_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_w, bf16* c,
              fp8::Scales scales, DecodeSplits splits, int M, int N, int slices_per_range, int k_slices) {
  static_assert(PROMOTE || !BLOCKS, "block scales change every slice: their sums are promoted");
  constexpr int STAGES = Smem<T>::STAGES;
  extern __shared__ uint8_t smem_raw[];
  Smem<T>& s = *reinterpret_cast<Smem<T>*>(align_smem(smem_raw));
  const int n0 = blockIdx.x * DECODE_COLS, m0 = blockIdx.y * T;
  const int range = blockIdx.z, ranges = gridDim.z;
  const int k_begin = range * slices_per_range;
  const int k_end = min(k_begin + slices_per_range, k_slices);  // never empty (decode_grid)
  const int tile = blockIdx.y * gridDim.x + blockIdx.x;

  if (threadIdx.x == 0) mbar_init_ring(s.full, s.empty, 1);
  __syncthreads();

  if (threadIdx.x >= WARPGROUP) {
    // ---- producer warp: one thread asks TMA for the slices, STAGES ahead ------------------------
    if (threadIdx.x == WARPGROUP) {
      for (int ks = k_begin, it = 0; ks < k_end; ++ks, ++it) {
        const int slot = it % STAGES;
        mbar_wait(&s.empty[slot], ((it / STAGES) % 2) ^ 1);
        // Rows of A past M and of W past N, and K past the end, arrive as zeros (and count as bytes).
        mbar_arrive_expect_tx(&s.full[slot], decode_slot_bytes(T));
        tma_load_2d(s.a[slot], &map_a, &s.full[slot], ks * SLICE_K, m0);
        tma_load_2d(s.w[slot], &map_w, &s.full[slot], ks * SLICE_K, n0);
      }
    }
    return;
  }

  // ---- consumer warpgroup: (this range's part of) C^T[n0 .. n0+63][m0 .. m0+T-1] ---------------------
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float acc[T / 2];
  float total[PROMOTE ? T / 2 : 1];  // the promoted fp32 sums
  int slot = 0;        // the ring slot of the next slice, and
  uint32_t phase = 0;  // the parity its `full` barrier completes with this time round
  // [excerpt decode-slice]
  // One slice: W's 64 rows as wgmma's A, the T tokens as its B, four k = 32 steps along the slot's
  // 128-byte rows. `from_zero`: the first wgmma overwrites acc (scale-d = 0) instead of adding.
  const auto issue_slice = [&](bool from_zero) {
    mbar_wait(&s.full[slot], phase);
    wgmma_fence();
#pragma unroll
    for (int k32 = 0; k32 < SLICE_K / FP8_WGMMA_K; ++k32)
      wgmma_fp8_swapped<T>(acc, kmajor_descriptor(s.w[slot], k32), kmajor_descriptor(s.a[slot], k32),
                           !from_zero || k32 > 0);
    wgmma_commit();
  };
  // [/excerpt decode-slice]
  const auto next_slot = [&] {
    if (++slot == STAGES) slot = 0, phase ^= 1;
  };
  if constexpr (PROMOTE) {
    fp8::decode_promoted_sum<T, BLOCKS>(total, acc, k_begin, k_end, scales, m0, lane, M, n0 / W_SCALE_ROWS, [&](int) {
      issue_slice(true);
      wgmma_wait<0>();  // this slice's sums are needed now
      fence_accumulators(acc);
      if (threadIdx.x == 0) mbar_arrive(&s.empty[slot]);
      next_slot();
    });
  } else {
    int previous_slot = -1;
    for (int ks = k_begin; ks < k_end; ++ks) {
      issue_slice(ks == k_begin);
      wgmma_wait<1>();  // the previous slice is done, this one keeps running
      if (threadIdx.x == 0 && previous_slot >= 0) mbar_arrive(&s.empty[previous_slot]);
      previous_slot = slot;
      next_slot();
    }
    wgmma_wait<0>();
    fence_accumulators(acc);
  }

  // ---- split K, then the epilogue (by the last CTA of the tile) --------------------------------------
  const auto finish = [&](float (&sums)[T / 2]) {
    if (ranges > 1 && !decode_add_ranges<T>(sums, splits, tile, range, ranges, &s.last)) return;
    fp8::decode_epilogue<T, !BLOCKS>(sums, scales, m0, n0, warp, lane, M, N,
                                [&](int m, int n, float v) { c[size_t(m) * N + n] = __float2bfloat16_rn(v); });
  };
  if constexpr (PROMOTE)
    finish(total);
  else
    finish(acc);
}

// ---- launch -------------------------------------------------------------------------------------------
template <int T, bool PROMOTE, bool BLOCKS>
void launch(const Fp8Gemm& g, cudaStream_t stream, const Workspace& ws) {
  auto kernel = decode_kernel<T, PROMOTE, BLOCKS>;
  constexpr int smem = smem_bytes<T>();
  const int k_slices = ceil_div(g.K, SLICE_K);
  const DecodeGrid plan = decode_grid<T>(kernel, smem, g.M, g.N, k_slices, ws);
  const CUtensorMap map_a =
      make_tensor_map(g.a, g.M, g.K, T, SLICE_K, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_DATA_TYPE_UINT8);
  const CUtensorMap map_w =
      make_tensor_map(g.w, g.N, g.K, DECODE_COLS, SLICE_K, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_DATA_TYPE_UINT8);
  const int step = g.scaling == SCALING_ROW ? 1 : 0;
  const fp8::Scales scales{g.scale_a, g.scale_w, step, step, k_slices};  // block scales: one per slice of K
  kernel<<<plan.grid, DECODE_THREADS, smem, stream>>>(map_a, map_w, g.c, scales, plan.splits, g.M, g.N,
                                                      plan.slices_per_range, k_slices);
  check_launch("tc_7_fp8 (decode)");
}

// The token tile for M rows: the smallest of 16, 32, 64, 96, 128 that holds them (tiles of 128 above).
template <bool PROMOTE, bool BLOCKS>
void launch_tokens(const Fp8Gemm& g, cudaStream_t stream, const Workspace& ws) {
  if (g.M <= 16) return launch<16, PROMOTE, BLOCKS>(g, stream, ws);
  if (g.M <= 32) return launch<32, PROMOTE, BLOCKS>(g, stream, ws);
  if (g.M <= 64) return launch<64, PROMOTE, BLOCKS>(g, stream, ws);
  if (g.M <= 96) return launch<96, PROMOTE, BLOCKS>(g, stream, ws);
  return launch<128, PROMOTE, BLOCKS>(g, stream, ws);
}

// Stage 7's three variants on the swapped schedule; the caller has checked the scaling.
inline void launch_swapped(const Fp8Gemm& g, cudaStream_t stream, const Workspace& ws) {
  if (g.scaling == SCALING_BLOCK) return launch_tokens<true, true>(g, stream, ws);
  if (g.fast_accumulation) return launch_tokens<false, false>(g, stream, ws);
  return launch_tokens<true, false>(g, stream, ws);
}

}  // namespace stage7_decode
}  // namespace tc
