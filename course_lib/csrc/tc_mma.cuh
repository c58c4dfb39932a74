// Warp-level tensor-core building blocks (sm_80 and newer): ldmatrix and mma.sync.
//
// Fragment layouts are those of the PTX ISA, section 9.7.14.5.8 ("Matrix Fragments for
// mma.m16n8k16 with floating point type") and 9.7.14.5.15 (ldmatrix). With g = lane / 4 and
// t = lane % 4, each thread of a warp holds
//   A (16 x 16, row-major): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16 x 8):             b0 = B[2t..2t+1][g],  b1 = B[2t+8..2t+9][g]
//   C (16 x 8, fp32):       c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
// each register holding two bf16 values (the lower column / row in the lower half).
//
// Notebook 06 prints the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

namespace tc {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i and
// every thread receives (row g, columns 2t, 2t+1) of each matrix in r[i].
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, transposed on the way: every thread receives (rows 2t, 2t+1; column g) of each matrix.
// This turns a row-major K x N tile of B into the column fragments mma.sync wants.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// [excerpt mma-sync-wrapper]
// d (16 x 8, fp32) += a (16 x 16, bf16) * b (16 x 8, bf16): one warp, one tensor-core instruction.
// %0-%3 are d (read and written: "+f", a float register), %4-%7 the four registers of a and %8-%9
// the two of b ("r": a 32-bit register, here two bf16 each); d is also the instruction's C.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// [/excerpt mma-sync-wrapper]

// Two floats rounded to bf16 and packed into one 32-bit register (the first in the lower half).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

}  // namespace tc
