// Stage 0 - the smallest tensor-core GEMM: one warp, one mma.sync, one 16 x 8 tile of C.
//
// TUTORIAL: A tensor-core instruction is issued by a whole warp. mma.sync.m16n8k16 (PTX ISA,
// "Warp-level matrix multiply-accumulate instructions") computes D = A * B + C with A 16 x 16
// (M x K), B 16 x 8 (K x N) and C, D 16 x 8 (M x N): 16 * 8 * 16 = 2048 multiply-adds,
// in one instruction the 32 lanes issue together. No lane holds a whole matrix: each holds a fixed
// handful of elements of each operand in its registers (its *fragment*), in the pattern the PTX
// ISA prints in "Matrix Fragments for mma.m16n8k16 with floating point type". This kernel does
// nothing else: every warp owns one 16 x 8 tile of C, walks K in steps of 16, and at each step
// loads exactly the elements of A and B that its fragment formulas name - straight from global
// memory, one bf16 at a time, zero outside the matrix - and issues one mma.sync. No shared memory,
// no ldmatrix, no reuse: stage 1 (tc_1_mma_sync.cu) adds those. Any M, N and K work.
//
// Runs on sm_80 and newer (Ampere, Ada, Hopper, Blackwell). Notebook 07 reads this file line by line
// (the lines between `// [excerpt NAME]` and `// [/excerpt NAME]`).
#include "tc_host.cuh"
#include "tc_launch.h"
#include "tc_mma.cuh"

namespace tc {
namespace stage0 {

using bf16 = __nv_bfloat16;

// [excerpt tile-constants]
constexpr int MMA_M = 16, MMA_N = 8, MMA_K = 16;      // the shape of one mma.sync.m16n8k16
constexpr int WARPS_M = 2, WARPS_N = 2;               // a block of 4 warps, 2 x 2 tiles of 16 x 8
constexpr int BLOCK_M = 32, BLOCK_N = 16, BLOCK_K = 16;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;       // 128
static_assert(BLOCK_M == WARPS_M * MMA_M && BLOCK_N == WARPS_N * MMA_N && BLOCK_K == MMA_K, "one mma per warp");
// [/excerpt tile-constants]

// [excerpt fragment-formulas]
// TUTORIAL: which element of its operand register element i of lane `lane` holds (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"). With g = lane / 4 (the lane's
// "group", 0-7) and t = lane % 4 (its place in the group, 0-3):
//   A (16 x 16): 8 bf16 per lane, a0..a7 - rows g and g + 8, columns 2t, 2t + 1 and those + 8;
//   B (16 x 8):  4 bf16 per lane, b0..b3 - rows 2t, 2t + 1 and those + 8, column g;
//   C (16 x 8):  4 fp32 per lane, c0..c3 - rows g and g + 8, columns 2t, 2t + 1.
// __host__ __device__: the same functions compile for the CPU too (the course's test prints them).
__host__ __device__ constexpr int a_row(int lane, int i) { return lane / 4 + 8 * ((i / 2) % 2); }
__host__ __device__ constexpr int a_col(int lane, int i) { return 2 * (lane % 4) + i % 2 + 8 * (i / 4); }
__host__ __device__ constexpr int b_row(int lane, int i) { return 2 * (lane % 4) + i % 2 + 8 * (i / 2); }
__host__ __device__ constexpr int b_col(int lane, int i) { return lane / 4; }
__host__ __device__ constexpr int c_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
__host__ __device__ constexpr int c_col(int lane, int i) { return 2 * (lane % 4) + i % 2; }
// [/excerpt fragment-formulas]

// [excerpt load-helpers]
// Element (r, c) of a row-major bf16 matrix with `rows` x `cols` elements, as its 16 bits; 0 (the
// bits of +0.0) outside the matrix, so a tile that hangs over the edge adds nothing.
__device__ __forceinline__ uint32_t bits_or_zero(const bf16* m, int rows, int cols, int r, int c) {
  return (r < rows && c < cols) ? uint32_t(__bfloat16_as_ushort(m[size_t(r) * cols + c])) : 0u;
}
// mma.sync takes its bf16 operands two to a 32-bit register, the lower-numbered element in the
// lower 16 bits: register j of a fragment holds elements 2j and 2j + 1.
__device__ __forceinline__ uint32_t pack(uint32_t lo, uint32_t hi) { return lo | (hi << 16); }
// [/excerpt load-helpers]

// [excerpt kernel]
__global__ void __launch_bounds__(THREADS)
kernel(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* __restrict__ c, int M, int N, int K) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // ---- which 16 x 8 tile of C this warp owns --------------------------------------------------
  const int row0 = blockIdx.y * BLOCK_M + (warp / WARPS_N) * MMA_M;
  const int col0 = blockIdx.x * BLOCK_N + (warp % WARPS_N) * MMA_N;

  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // this lane's accumulator fragment: c0..c3 of the tile

  for (int k0 = 0; k0 < K; k0 += MMA_K) {
    // ---- this lane's fragments of A (16 x 16 at row0, k0) and B (16 x 8 at k0, col0) ---------
    uint32_t fa[4], fb[2];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      fa[j] = pack(bits_or_zero(a, M, K, row0 + a_row(lane, 2 * j), k0 + a_col(lane, 2 * j)),
                   bits_or_zero(a, M, K, row0 + a_row(lane, 2 * j + 1), k0 + a_col(lane, 2 * j + 1)));
#pragma unroll
    for (int j = 0; j < 2; ++j)
      fb[j] = pack(bits_or_zero(b, K, N, k0 + b_row(lane, 2 * j), col0 + b_col(lane, 2 * j)),
                   bits_or_zero(b, K, N, k0 + b_row(lane, 2 * j + 1), col0 + b_col(lane, 2 * j + 1)));
    // ---- the whole warp: acc (16 x 8, fp32) += A (16 x 16) * B (16 x 8), one instruction -------
    mma_m16n8k16_bf16(acc, fa, fb[0], fb[1]);
  }

  // ---- epilogue: each lane writes its four sums, rounded to bf16, where its C fragment lies ----
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = row0 + c_row(lane, i), col = col0 + c_col(lane, i);
    if (row < M && col < N) c[size_t(row) * N + col] = __float2bfloat16_rn(acc[i]);
  }
}
// [/excerpt kernel]

}  // namespace stage0

// [excerpt launch]
void launch_tc_0_mma_sync_minimal(const Gemm& g, cudaStream_t stream) {
  using namespace stage0;
  const dim3 grid((g.N + BLOCK_N - 1) / BLOCK_N, (g.M + BLOCK_M - 1) / BLOCK_M);  // x: columns, y: rows
  kernel<<<grid, THREADS, 0, stream>>>(g.a, g.b, g.c, g.M, g.N, g.K);
  check_launch("tc_0_mma_sync_minimal");
}
// [/excerpt launch]

}  // namespace tc
