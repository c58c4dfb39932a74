// Stage 7's sum over K, promoted: which scales a consumer thread reads and how it adds each slice's
// sums into fp32. Plain arithmetic, no GPU instruction, so it is written once for the GPU (tc_7_fp8.cu
// calls it with a lambda that runs the slice's wgmmas) and for the CPU (tests/test_tc_fp8_host.py
// compiles a host program that calls it with a model of the wgmmas and checks every element).
#pragma once

#include <cmath>
#include <cstddef>

namespace tc {
namespace fp8 {

// The fp32 scales, as the launcher found them (tc_launch.h): per tensor the steps are 0, per row 1;
// block scales are [rows][k_blocks] arrays (A: one row per row of A; W: one row per 128 rows of W).
struct Scales {
  const float* a;
  const float* w;
  int a_step, w_step;
  int k_blocks;
};

// The two rows of a warpgroup's 64 that a thread's accumulators hold (tc_hopper.cuh, "Accumulator
// layout"): d[4j], d[4j+1] lie on row 16 w + lane / 4, d[4j+2], d[4j+3] eight rows further.
__host__ __device__ constexpr int fragment_row(int warp, int lane, bool high) {
  return 16 * warp + lane / 4 + (high ? 8 : 0);
}
__host__ __device__ constexpr bool on_high_row(int i) { return i % 4 >= 2; }

// Those two rows of C for a warpgroup whose first row is row0, kept inside A (row M - 1 at most) for
// reading scales: a row past M is computed from TMA's zeros and never stored.
struct ThreadRows {
  int lo, hi;
};
__host__ __device__ inline ThreadRows thread_rows(int row0, int warp, int lane, int M) {
  return {min(row0 + fragment_row(warp, lane, false), M - 1), min(row0 + fragment_row(warp, lane, true), M - 1)};
}

// Where one thread's block scales lie: its two rows of scale_a and the row of scale_w for W's
// 128-row block `w_block`. Slice ks reads element ks of each.
struct BlockScaleRows {
  const float* lo;
  const float* hi;
  const float* w;
};
__host__ __device__ inline BlockScaleRows block_scale_rows(const Scales& s, ThreadRows rows, int w_block) {
  return {s.a + size_t(rows.lo) * s.k_blocks, s.a + size_t(rows.hi) * s.k_blocks, s.w + size_t(w_block) * s.k_blocks};
}

// Promotion: the slice's sums, fresh from the tensor core, added into fp32 registers. With block
// scales each sum is first multiplied by the slice's scales (scale_a of its row times scale_w);
// otherwise the scales wait for the epilogue and this is a plain add.
template <bool BLOCKS, int R>
__host__ __device__ __forceinline__ void promote(float (&total)[R], const float (&acc)[R], float scale_lo, float scale_hi) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
    if constexpr (BLOCKS)
      total[i] = fmaf(acc[i], on_high_row(i) ? scale_hi : scale_lo, total[i]);
    else
      total[i] += acc[i];
  }
}

// [excerpt promoted-sum]
// One tile's sum over K: `slice(ks)` leaves slice ks's sums in acc (on the GPU: wait for the slot,
// four wgmmas from zero, wait for them, free the slot); each is promoted into `total` as it comes.
// total starts at zero once per tile, so no slice needs a test. Block scales are read one slice
// ahead: their loads are on the way while the slice's wgmmas run.
template <bool BLOCKS, int R, class Slice>
__host__ __device__ __forceinline__ void promoted_sum(float (&total)[R], float (&acc)[R], int k_slices,
                                                      const BlockScaleRows& scales, Slice&& slice) {
#pragma unroll
  for (int i = 0; i < R; ++i) total[i] = 0.f;
  float next_lo = 1.f, next_hi = 1.f, next_w = 1.f;
  if constexpr (BLOCKS) next_lo = scales.lo[0], next_hi = scales.hi[0], next_w = scales.w[0];
  for (int ks = 0; ks < k_slices; ++ks) {
    const float scale_lo = next_lo * next_w, scale_hi = next_hi * next_w;
    if (BLOCKS && ks + 1 < k_slices) next_lo = scales.lo[ks + 1], next_hi = scales.hi[ks + 1], next_w = scales.w[ks + 1];
    slice(ks);
    promote<BLOCKS>(total, acc, scale_lo, scale_hi);
  }
}
// [/excerpt promoted-sum]

}  // namespace fp8
}  // namespace tc
