// Two accumulator sets, one promoted while the other's wgmmas run; -DLOOP=1 puts the pattern in a loop
// with a set in flight across the back edge (ptxas: C7514, every wgmma serialised). experiments/runs/2026-12-06_sass_two_sets/README.md.
#include <cstdint>
#include "tc_hopper.cuh"
using namespace tc;
__device__ __forceinline__ void issue(float (&d)[64], uint64_t da, uint64_t dw) {
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < 4; ++k) wgmma_fp8<128>(d, da + 2 * k, dw + 2 * k, k > 0);
  wgmma_commit();
}
#ifndef FENCE
#define FENCE(x) fence_accumulators(x)
#endif
__global__ void __launch_bounds__(384, 1) k(float* out, uint64_t da, uint64_t dw, int n) {
  float acc0[64], acc1[64], total[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) total[i] = 0.f;
  issue(acc0, da, dw);
#if LOOP
  for (int ks = 0; ks + 2 < n; ks += 2) {
#else
  {int ks = 0;
#endif
    issue(acc1, da + 64 * (ks + 1), dw);
    wgmma_wait<1>();
    FENCE(acc0);
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] += acc0[i];
    issue(acc0, da + 64 * (ks + 2), dw);
    wgmma_wait<1>();
    FENCE(acc1);
#pragma unroll
    for (int i = 0; i < 64; ++i) total[i] += acc1[i];
  }
  wgmma_wait<0>();
  FENCE(acc0);
#pragma unroll
  for (int i = 0; i < 64; ++i) total[i] += acc0[i];
#pragma unroll
  for (int i = 0; i < 64; ++i) out[threadIdx.x * 64 + i] = total[i];
}
