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
#include "tc_hopper.cuh"
#include "tc_host.cuh"
#include "tc_launch.h"

namespace tc {
namespace stage2 {

constexpr int BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = TILE_K;
constexpr int CONSUMERS = BLOCK_M / 64;                 // warpgroups, each owns 64 rows of C: 2
constexpr int THREADS = CONSUMERS * WARPGROUP;          // 256
constexpr int A_BYTES = BLOCK_M * BLOCK_K * 2;          // 16 KB, one TMA box of 128 x 64
constexpr int B_BYTES = BLOCK_K * BLOCK_N * 2;          // 16 KB, two TMA boxes of 64 x 64
constexpr int B_BOXES = BLOCK_N / 64;

struct Smem {
  bf16 a[BLOCK_M * BLOCK_K];                            // offsets are multiples of 1024 bytes
  bf16 b[BLOCK_K * BLOCK_N];
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
    // ---- one thread asks the copy engine for the slice ---------------------------------------
    if (threadIdx.x == 0) {
      mbar_arrive_expect_tx(&s.full, A_BYTES + B_BYTES);
      tma_load_2d(s.a, &map_a, &s.full, ks * BLOCK_K, m0);
#pragma unroll
      for (int j = 0; j < B_BOXES; ++j) tma_load_2d(s.b + j * 64 * BLOCK_K, &map_b, &s.full, n0 + 64 * j, ks * BLOCK_K);
    }
    // ---- everyone waits for the bytes (the barrier's phase flips once per slice) -------------
    mbar_wait(&s.full, ks % 2);

    // ---- each warpgroup multiplies its 64 rows by the whole 64 x 128 slice of B --------------
    wgmma_fence();
#pragma unroll
    for (int k16 = 0; k16 < BLOCK_K / WGMMA_K; ++k16)
      wgmma_m64n128k16(acc, a_descriptor(s.a + wg * 64 * BLOCK_K, k16), b_descriptor(s.b, k16));
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(acc);
    __syncthreads();  // both warpgroups have finished reading before the next copy overwrites
  }

  store_accumulators<BLOCK_N>(acc, c, M, N, m0 + wg * 64, n0);
}

}  // namespace stage2

void launch_tc2_wgmma_tma(const bf16* a, const bf16* b, bf16* c, int M, int N, int K, cudaStream_t stream) {
  using namespace stage2;
  const CUtensorMap map_a = make_tensor_map(a, M, K, BLOCK_M, BLOCK_K, CU_TENSOR_MAP_SWIZZLE_128B);
  const CUtensorMap map_b = make_tensor_map(b, K, N, BLOCK_K, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  static bool configured = false;
  if (!configured) allow_dynamic_smem(kernel, SMEM_BYTES), configured = true;
  const dim3 grid(ceil_div(N, BLOCK_N), ceil_div(M, BLOCK_M));
  kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(map_a, map_b, c, M, N, K);
  check_launch("tc2_wgmma_tma");
}

}  // namespace tc
