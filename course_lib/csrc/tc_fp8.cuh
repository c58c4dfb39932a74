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

// The helpers of promoted_sum_overlapped (below).
template <int J>
struct Pick {  // set J % 2, chosen at compile time (a runtime choice would put both sets in memory)
  template <class T>
  __host__ __device__ __forceinline__ static T& from(T& s0, T& s1) {
    if constexpr (J % 2 == 0) return s0; else return s1;
  }
};
// How many wgmma batches a wait may leave running (a type, so that it reaches wgmma.wait_group's
// immediate through a lambda).
template <int N>
struct InFlight { static constexpr int value = N; };

// One slice's block scales for a thread's two rows (1 with per-tensor or per-row scales).
template <bool BLOCKS>
struct SliceScale {
  float lo = 1.f, hi = 1.f;
  __host__ __device__ __forceinline__ void load(const BlockScaleRows& s, int ks) {
    if constexpr (BLOCKS) {
      const float w = s.w[ks];
      lo = s.lo[ks] * w, hi = s.hi[ks] * w;
    }
  }
};

// [excerpt promoted-sum-overlapped]
// What stage 7 runs: the same sum with a second accumulator set, so that a slice's promotion runs
// while the next slice's wgmmas do. `issue(ks, acc)` waits for slice ks's slot and starts its
// wgmmas into acc from zero, returning a token (the slot to free); `retire(acc, token, in_flight)`
// waits until at most `in_flight` batches still run, then frees the token's slot. Slices before
// `first_grouped` go one at a time, as in promoted_sum (through `issue_first`, which may also store
// the last tile); from there, in groups of G, slice j of a group goes into set j % 2 and is promoted
// while slice j + 1 runs. Each group ends with nothing in flight: a set in flight across a loop's
// back edge makes ptxas serialise every wgmma (warning C7514; experiments/runs/
// 2026-12-06_sass_two_sets). Slices left over (fewer than G) go one at a time. A slice's block
// scales are loaded as its wgmmas start.
template <bool BLOCKS, int G, int J, int R, class Token, class Issue, class Retire>
__host__ __device__ __forceinline__ void promote_group_from(float (&total)[R], float (&acc0)[R], float (&acc1)[R], int ks,
                                                            const BlockScaleRows& scales, Token (&tokens)[2],
                                                            SliceScale<BLOCKS> (&sc)[2], Issue& issue, Retire& retire) {
  if constexpr (J < G) {
    // slice ks + J is running in set J % 2; start ks + J + 1 in the other set, then promote ks + J
    if constexpr (J + 1 < G) {
      Pick<J + 1>::from(sc[0], sc[1]).load(scales, ks + J + 1);
      Pick<J + 1>::from(tokens[0], tokens[1]) = issue(ks + J + 1, Pick<J + 1>::from(acc0, acc1));
    }
    auto& acc = Pick<J>::from(acc0, acc1);
    retire(acc, Pick<J>::from(tokens[0], tokens[1]), InFlight<(J + 1 < G ? 1 : 0)>{});
    const auto& s = Pick<J>::from(sc[0], sc[1]);
    promote<BLOCKS>(total, acc, s.lo, s.hi);
    promote_group_from<BLOCKS, G, J + 1>(total, acc0, acc1, ks, scales, tokens, sc, issue, retire);
  }
}

template <bool BLOCKS, int G, int R, class IssueFirst, class Issue, class Retire>
__host__ __device__ __forceinline__ void promoted_sum_overlapped(float (&total)[R], float (&acc0)[R], float (&acc1)[R],
                                                                 int k_slices, int first_grouped,
                                                                 const BlockScaleRows& scales, IssueFirst&& issue_first,
                                                                 Issue&& issue, Retire&& retire) {
  static_assert(G >= 2, "a group overlaps at least two slices");
  using Token = decltype(issue(0, acc0));
#pragma unroll
  for (auto& x : total) x = 0.f;
  const auto one = [&](int ks, auto& start) {
    SliceScale<BLOCKS> s;
    s.load(scales, ks);
    const Token token = start(ks, acc0);
    retire(acc0, token, InFlight<0>{});
    promote<BLOCKS>(total, acc0, s.lo, s.hi);
  };
  int ks = 0;
  for (; ks < k_slices && ks < first_grouped; ++ks) one(ks, issue_first);
  for (; ks + G <= k_slices; ks += G) {
    Token tokens[2];
    SliceScale<BLOCKS> sc[2];
    sc[0].load(scales, ks);
    tokens[0] = issue(ks, acc0);
    promote_group_from<BLOCKS, G, 0>(total, acc0, acc1, ks, scales, tokens, sc, issue, retire);
  }
  for (; ks < k_slices; ++ks) one(ks, issue);
}
// [/excerpt promoted-sum-overlapped]

}  // namespace fp8
}  // namespace tc
