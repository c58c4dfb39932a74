// Two accumulator sets, one promoted (added into fp32) while the other's wgmmas run, in three forms
// (experiments/runs/2026-12-06_sass_two_sets/README.md):
//   -DLOOP=0  straight code, two slices: no warning;
//   -DLOOP=1  the pattern in a loop, a set in flight across the back edge: ptxas C7514, every wgmma
//             serialised (with or without the fences: -D'FENCE(x)=(void)0');
//   -DLOOP=2  a loop whose body issues two slices and ends with nothing in flight: no warning.
#include <cstdint>
#include "tc_hopper.cuh"
using namespace tc;
#ifndef FENCE
#define FENCE(x) fence_accumulators(x)
#endif
__device__ __forceinline__ void issue(float (&d)[64], uint64_t da, uint64_t dw) {
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < 4; ++k) wgmma_fp8<128>(d, da + 2 * k, dw + 2 * k, k > 0);
  wgmma_commit();
}
template <int N>
__device__ __forceinline__ void promote_after_wait(float (&total)[64], float (&acc)[64]) {
  wgmma_wait<N>();
  FENCE(acc);
#pragma unroll
  for (int i = 0; i < 64; ++i) total[i] += acc[i];
}
__global__ void __launch_bounds__(384, 1) k(float* out, uint64_t da, uint64_t dw, int n) {
  float acc0[64], acc1[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) total[i] = 0.f;
#if LOOP == 2
  int ks = 0;
  for (; ks + 1 < n; ks += 2) {
    issue(acc0, da + 64 * ks, dw);
    issue(acc1, da + 64 * (ks + 1), dw);
    promote_after_wait<1>(total, acc0);
    promote_after_wait<0>(total, acc1);
  }
  if (ks < n) {
    issue(acc0, da + 64 * ks, dw);
    promote_after_wait<0>(total, acc0);
  }
#else
  issue(acc0, da, dw);
#if LOOP == 1
  for (int ks = 0; ks + 2 < n; ks += 2) {
#else
  {
    const int ks = 0;
#endif
    issue(acc1, da + 64 * (ks + 1), dw);
    promote_after_wait<1>(total, acc0);
    issue(acc0, da + 64 * (ks + 2), dw);
    promote_after_wait<1>(total, acc1);
  }
  promote_after_wait<0>(total, acc0);
#endif
#pragma unroll
  for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = total[i];
}
