// Stage 1 - tensor cores one warp at a time: mma.sync.m16n8k16 fed by ldmatrix.
//
// The block tiling of the numba and Triton kernels stays: a 128 x 128 tile of C per block, K walked
// in slices of 32 staged in shared memory. What changes is the inner product: instead of one fused
// multiply-add per thread and instruction, each warp hands a 16 x 8 x 16 product (M x N x K, 2048
// multiply-adds) at a time to a tensor core (mma.sync.m16n8k16, PTX ISA 9.7.14.5.8). Operands reach the tensor core from registers,
// in the fragment layout of tc_mma.cuh, and ldmatrix (9.7.14.5.15) fills those registers from
// shared memory, 4 matrices of 8 x 8 per instruction; its .trans form turns B's rows into the
// column fragments mma wants. Runs on sm_80 and newer (Ampere, Ada, Hopper, Blackwell).
//
// Notebook 07 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_mma.cuh"

namespace tc {
namespace stage1 {

using bf16 = __nv_bfloat16;

constexpr int BLOCK_M = 128, BLOCK_N = 128, BLOCK_K = 32;
constexpr int WARPS_M = 2, WARPS_N = 4;               // 8 warps, each owns a 64 x 32 piece of C
constexpr int WARP_M = BLOCK_M / WARPS_M;             // 64 = 4 mma tiles of 16 rows
constexpr int WARP_N = BLOCK_N / WARPS_N;             // 32 = 4 mma tiles of 8 columns
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 16;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;       // 256
constexpr int VEC = 8;                                // bf16 per 16-byte load
// Rows padded by 16 bytes: the 8 row addresses of one ldmatrix then fall into 8 different 16-byte
// bank groups of a 128-byte line. The row pitch is 80 B for A and 272 B for B, odd multiples of 16
// (5 x 16, 17 x 16): rows 0-7 start at chunks (r * pitch mod 128) / 16 = 0, 5, 2, 7, 4, 1, 6, 3 (A)
// and 0, 1, ..., 7 (B). Unpadded, A's 64-byte rows would give chunks 0, 4, 0, 4, ...: 4-way conflicts.
constexpr int A_PITCH = BLOCK_K + VEC;                // 40 bf16
constexpr int B_PITCH = BLOCK_N + VEC;                // 136 bf16
constexpr int A_LOADS = BLOCK_M * BLOCK_K / VEC / THREADS;  // 16-byte loads per thread per slice: 2
constexpr int B_LOADS = BLOCK_K * BLOCK_N / VEC / THREADS;  // 2

__global__ void __launch_bounds__(THREADS)
kernel(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c, int M, int N, int K) {
  __shared__ __align__(16) bf16 sa[BLOCK_M * A_PITCH];
  __shared__ __align__(16) bf16 sb[BLOCK_K * B_PITCH];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int m0 = blockIdx.y * BLOCK_M, n0 = blockIdx.x * BLOCK_N;

  float acc[WARP_M / MMA_M][WARP_N / MMA_N][4] = {};

  // ---- global -> registers: 16-byte vectors, zeros outside the matrix ------------------------
  // K and N are multiples of 8, so a vector is either wholly inside or wholly outside.
  uint4 ra[A_LOADS], rb[B_LOADS];
  auto load_slice = [&](int k0) {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      const int idx = tid + i * THREADS, row = idx / (BLOCK_K / VEC), k = k0 + (idx % (BLOCK_K / VEC)) * VEC;
      ra[i] = (m0 + row < M && k < K) ? *reinterpret_cast<const uint4*>(a + size_t(m0 + row) * K + k)
                                      : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
      const int idx = tid + i * THREADS, row = idx / (BLOCK_N / VEC), n = n0 + (idx % (BLOCK_N / VEC)) * VEC;
      rb[i] = (k0 + row < K && n < N) ? *reinterpret_cast<const uint4*>(b + size_t(k0 + row) * N + n)
                                      : make_uint4(0, 0, 0, 0);
    }
  };
  auto store_slice = [&]() {
#pragma unroll
    for (int i = 0; i < A_LOADS; ++i) {
      const int idx = tid + i * THREADS;
      *reinterpret_cast<uint4*>(&sa[(idx / (BLOCK_K / VEC)) * A_PITCH + (idx % (BLOCK_K / VEC)) * VEC]) = ra[i];
    }
#pragma unroll
    for (int i = 0; i < B_LOADS; ++i) {
      const int idx = tid + i * THREADS;
      *reinterpret_cast<uint4*>(&sb[(idx / (BLOCK_N / VEC)) * B_PITCH + (idx % (BLOCK_N / VEC)) * VEC]) = rb[i];
    }
  };

  load_slice(0);
  for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
    store_slice();
    __syncthreads();
    // The next slice's loads are issued now and land while the tensor cores work on this one.
    if (k0 + BLOCK_K < K) load_slice(k0 + BLOCK_K);

#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += MMA_K) {
      // [excerpt fragments-and-mma]
      // ---- shared -> registers (ldmatrix) ----------------------------------------------------
      // A: lanes 0-15 point at rows 0-15 (k 0-7), lanes 16-31 at the same rows (k 8-15):
      // the four 8x8 matrices come back as registers 0..3 of the mma fragment (elements a0..a7).
      uint32_t fa[WARP_M / MMA_M][4];
#pragma unroll
      for (int i = 0; i < WARP_M / MMA_M; ++i) {
        const int row = warp_m * WARP_M + i * MMA_M + lane % 16;
        ldmatrix_x4(fa[i], smem_u32(&sa[row * A_PITCH + kk + (lane / 16) * 8]));
      }
      // B (row-major K x N): transposing loads of rows k 0-7 / 8-15 for columns n 0-7 / 8-15
      // give (b0, b1) of two neighbouring 8-column mma tiles.
      uint32_t fb[WARP_N / MMA_N][2];
#pragma unroll
      for (int j = 0; j < WARP_N / MMA_N; j += 2) {
        const int krow = kk + (lane % 8) + ((lane / 8) % 2) * 8;
        const int col = warp_n * WARP_N + j * MMA_N + (lane / 16) * 8;
        uint32_t r[4];
        ldmatrix_x4_trans(r, smem_u32(&sb[krow * B_PITCH + col]));
        fb[j][0] = r[0];
        fb[j][1] = r[1];
        fb[j + 1][0] = r[2];
        fb[j + 1][1] = r[3];
      }
      // ---- the tensor cores: 4 x 4 mma per warp per 16 of K ---------------------------------
#pragma unroll
      for (int i = 0; i < WARP_M / MMA_M; ++i)
#pragma unroll
        for (int j = 0; j < WARP_N / MMA_N; ++j) mma_m16n8k16_bf16(acc[i][j], fa[i], fb[j][0], fb[j][1]);
      // [/excerpt fragments-and-mma]
    }
    __syncthreads();  // every warp is done reading this slice before the next one overwrites it
  }

  // ---- epilogue: fp32 accumulators -> bf16 pairs in C ---------------------------------------
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < WARP_M / MMA_M; ++i)
#pragma unroll
    for (int j = 0; j < WARP_N / MMA_N; ++j) {
      const int row = m0 + warp_m * WARP_M + i * MMA_M + g;
      const int col = n0 + warp_n * WARP_N + j * MMA_N + 2 * t;
      if (col >= N) continue;
      if (row < M) *reinterpret_cast<uint32_t*>(c + size_t(row) * N + col) = pack_bf16x2(acc[i][j][0], acc[i][j][1]);
      if (row + 8 < M)
        *reinterpret_cast<uint32_t*>(c + size_t(row + 8) * N + col) = pack_bf16x2(acc[i][j][2], acc[i][j][3]);
    }
}

}  // namespace stage1

void launch_tc_1_mma_sync(const Gemm& g, cudaStream_t stream) {
  using namespace stage1;
  const dim3 grid((g.N + BLOCK_N - 1) / BLOCK_N, (g.M + BLOCK_M - 1) / BLOCK_M);
  kernel<<<grid, THREADS, 0, stream>>>(g.a, g.b, g.c, g.M, g.N, g.K);
  check_launch("tc_1_mma_sync");
}

}  // namespace tc
