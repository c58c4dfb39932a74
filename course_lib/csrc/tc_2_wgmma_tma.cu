// Stage 2 - Hopper's warpgroup MMA fed by the tensor copy engine (TMA), one tile at a time.
//
// Two changes against stage 1, both new in Hopper (sm_90a):
// * wgmma.mma_async (PTX ISA 9.7.15): four warps (a warpgroup, 128 threads) issue one 64 x 128 x 16
//   product together; the operands are read by the tensor core straight from shared memory through
//   64-bit matrix descriptors, so no ldmatrix and no operand registers. Only the fp32 accumulators
//   live in registers.
// * cp.async.bulk.tensor (9.7.9.25): one thread asks the copy engine for a whole 2-D box of A or
//   B, described by a CUtensorMap built on the host. The engine writes it with the 128-byte swizzle
//   that wgmma's descriptors expect (tc_hopper.cuh) and signals an mbarrier with the bytes it
//   delivered; the other threads wait on that barrier.
// Everything is still serial: load a slice, wait for it, multiply it, wait for the multiply, load
// the next. Stage 3 overlaps the two.
//
// Notebook 08 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_schedule.cuh"

namespace tc {
namespace stage2 {

constexpr int BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = TILE_K;
constexpr int CONSUMERS = BLOCK_M / 64;                 // warpgroups, each owns 64 rows of C: 2
constexpr int THREADS = CONSUMERS * WARPGROUP;          // 256

struct Smem {
  bf16 a[BLOCK_M * BLOCK_K];                            // 16 KB, one TMA box of 128 x 64
  bf16 b[BLOCK_K * BLOCK_N];                            // 16 KB, two TMA boxes of 64 x 64
                                                        // (offsets are multiples of 1024 bytes)
  uint64_t full;                                        // "this slice has arrived"
};
constexpr int SMEM_BYTES = sizeof(Smem) + SMEM_SLACK;

__global__ void __launch_bounds__(THREADS)
kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, bf16* c, int M, int N,
       int K) {
  extern __shared__ uint8_t smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(align_smem(smem_raw));
  const int wg = threadIdx.x / WARPGROUP;
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;

  if (threadIdx.x == 0) {
    mbar_init(&s.full, 1);  // one arrival (the thread that issues the copies) + the bytes
    fence_barrier_init();
  }
  __syncthreads();

  float acc[BLOCK_N / 2];
#pragma unroll
  for (int i = 0; i < BLOCK_N / 2; ++i) acc[i] = 0.f;

  const int k_slices = ceil_div(K, BLOCK_K);
  for (int ks = 0; ks < k_slices; ++ks) {
    // [excerpt copy-wait-multiply]
    // ---- one thread asks the copy engine for the slice ---------------------------------------
    //      (tma_load_slice, in tc_hopper.cuh: expect_tx for the slice's 32 KB, then one TMA box of A
    //      and two of B)
    if (threadIdx.x == 0) tma_load_slice<BLOCK_M, BLOCK_N>(s.a, s.b, &s.full, &map_a, &map_b, ks, m0, n0);
    // ---- everyone waits for the bytes (the barrier's phase flips once per slice) -------------
    mbar_wait(&s.full, ks % 2);

    // ---- each warpgroup multiplies its 64 rows by the whole 64 x 128 slice of B --------------
    //      (wgmma_slice: fence, BLOCK_K / 16 wgmma.m64n128k16 through descriptors, commit)
    wgmma_slice<BLOCK_N>(acc, s.a + wg * 64 * BLOCK_K, s.b);
    wgmma_wait<0>();
    // [/excerpt copy-wait-multiply]
    fence_accumulators(acc);
    __syncthreads();  // both warpgroups have finished reading before the next copy overwrites
  }

  store_accumulators<BLOCK_N>(acc, c, M, N, m0 + wg * 64, n0);
}

}  // namespace stage2

void launch_tc_2_wgmma_tma(const Gemm& g, cudaStream_t stream) {
  using namespace stage2;
  launch_tile_per_cta<BLOCK_M, BLOCK_N>(kernel, THREADS, SMEM_BYTES, g, stream, "tc_2_wgmma_tma");
}

}  // namespace tc
