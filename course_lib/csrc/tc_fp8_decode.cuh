// Stage 7's decode path (tc_7_decode.cuh), its arithmetic: where a thread's accumulators lie in C
// when the operands are swapped, which block scales each one takes, how each K slice's sums are
// promoted, and where each sum goes in C. Plain arithmetic, no GPU instruction, as tc_fp8.cuh is for
// the big kernel: the kernel calls it with a lambda that runs the slice's wgmmas, and a host test
// (tests/test_tc_fp8.py) calls it with the exact sums of each slice, placed by the Python model of
// wgmma's accumulator layout, and checks every element of C and every scale it reads.
#pragma once

#include <cmath>
#include <cstddef>

#include "tc_fp8.cuh"  // Scales

namespace tc {
namespace fp8 {

// [excerpt decode-fragment]
// tc_hopper.cuh's accumulator layout with D = C^T (64 rows of W x T tokens): accumulator d[i] of lane
// `lane` of warp `warp` of the consumer warpgroup lies on row decode_w_row of the CTA's 64 rows of W
// (column n0 + decode_w_row of C) and on token decode_token of its T (row m0 + decode_token of C).
__host__ __device__ constexpr int decode_w_row(int warp, int lane, int i) {
  return 16 * warp + lane / 4 + (i % 4 >= 2 ? 8 : 0);
}
__host__ __device__ constexpr int decode_token(int lane, int i) { return 8 * (i / 4) + 2 * (lane % 4) + i % 2; }
// A thread's T / 2 accumulators cover T / 4 tokens, each twice (on two rows of W, eight apart):
// d[i] holds the thread's token number decode_token_slot(i), and token c first lies in accumulator
// decode_slot_accumulator(c).
__host__ __device__ constexpr int decode_token_slot(int i) { return 2 * (i / 4) + i % 2; }
__host__ __device__ constexpr int decode_slot_accumulator(int c) { return c / 2 * 4 + c % 2; }
// [/excerpt decode-fragment]

// Block scales of slice ks: scale_a of each of the thread's T / 4 tokens - a token past M reads row
// M - 1, as its sums are TMA's zeros and never stored - and scale_w of W's 128-row block `w_block`.
template <int T>
__host__ __device__ __forceinline__ void decode_block_scales(float (&a)[T / 4], float& w, const Scales& s, int m0,
                                                             int lane, int M, int w_block, int ks) {
#pragma unroll
  for (int c = 0; c < T / 4; ++c) {
    const int m = min(m0 + decode_token(lane, decode_slot_accumulator(c)), M - 1);
    a[c] = s.a[size_t(m) * s.k_blocks + ks];
  }
  w = s.w[size_t(w_block) * s.k_blocks + ks];
}

// [excerpt decode-promote]
// Promotion of one slice: total += acc, each sum first times its token's block scale if BLOCKS.
template <bool BLOCKS, int R>
__host__ __device__ __forceinline__ void decode_promote(float (&total)[R], const float (&acc)[R],
                                                        const float (&scale)[R / 2]) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
    if constexpr (BLOCKS)
      total[i] = fmaf(acc[i], scale[decode_token_slot(i)], total[i]);
    else
      total[i] += acc[i];
  }
}

// The sum over slices [k_begin, k_end) of K: `slice(ks)` leaves slice ks's sums in acc (on the GPU:
// wait for the slot, four wgmmas from zero, wait for them, free the slot), and each is promoted into
// total as it comes. The next slice's block scales are loaded as soon as this slice's are used: their
// loads are on the way while the next slice's wgmmas run, and only one slice's scales are held.
template <int T, bool BLOCKS, class Slice>
__host__ __device__ __forceinline__ void decode_promoted_sum(float (&total)[T / 2], float (&acc)[T / 2], int k_begin,
                                                             int k_end, const Scales& s, int m0, int lane, int M,
                                                             int w_block, Slice&& slice) {
#pragma unroll
  for (int i = 0; i < T / 2; ++i) total[i] = 0.f;
  float scale_a[T / 4], scale_w = 1.f, scale[T / 4];
#pragma unroll
  for (int c = 0; c < T / 4; ++c) scale_a[c] = scale[c] = 1.f;
  if constexpr (BLOCKS) decode_block_scales<T>(scale_a, scale_w, s, m0, lane, M, w_block, k_begin);
  for (int ks = k_begin; ks < k_end; ++ks) {
    slice(ks);
    if constexpr (BLOCKS) {
#pragma unroll
      for (int c = 0; c < T / 4; ++c) scale[c] = scale_a[c] * scale_w;
    }
    decode_promote<BLOCKS>(total, acc, scale);
    if (BLOCKS && ks + 1 < k_end) decode_block_scales<T>(scale_a, scale_w, s, m0, lane, M, w_block, ks + 1);
  }
}
// [/excerpt decode-promote]

// [excerpt decode-epilogue]
// Each sum to its place in C: C[m][n] = sum, times sa[m] * sw[n] if the scales are per tensor or row
// (SCALED; block scales are already in the sums), for the thread's rows of W inside N and tokens
// inside M. `store(m, n, value)` writes one element (on the GPU a bf16 store).
template <int T, bool SCALED, class Store>
__host__ __device__ __forceinline__ void decode_epilogue(const float (&sums)[T / 2], const Scales& s, int m0, int n0,
                                                         int warp, int lane, int M, int N, Store&& store) {
  float sa[T / 4], sw[2];  // the scales of the thread's tokens and of its two rows of W
#pragma unroll
  for (int c = 0; c < T / 4; ++c)
    sa[c] = SCALED ? s.a[size_t(min(m0 + decode_token(lane, decode_slot_accumulator(c)), M - 1)) * s.a_step] : 1.f;
#pragma unroll
  for (int h = 0; h < 2; ++h)
    sw[h] = SCALED ? s.w[size_t(min(n0 + decode_w_row(warp, lane, 2 * h), N - 1)) * s.w_step] : 1.f;
#pragma unroll
  for (int i = 0; i < T / 2; ++i) {
    const int m = m0 + decode_token(lane, i), n = n0 + decode_w_row(warp, lane, i);
    if (m < M && n < N) store(m, n, SCALED ? sums[i] * (sa[decode_token_slot(i)] * sw[i % 4 / 2]) : sums[i]);
  }
}
// [/excerpt decode-epilogue]

}  // namespace fp8
}  // namespace tc
