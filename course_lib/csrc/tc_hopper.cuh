// Hopper (sm_90a) building blocks shared by stages 2-7: mbarriers, TMA copies, wgmma, register
// reallocation, clusters. Each function wraps one or two PTX instructions; the comment names the
// PTX ISA section (ISA 8.x numbering, "Parallel Thread Execution ISA", NVIDIA) that defines it.
//
// Two layouts matter everywhere and are written once here:
//
// * Shared-memory tiles are written by TMA with CU_TENSOR_MAP_SWIZZLE_128B: a box whose inner
//   dimension is 64 bf16 (= 128 bytes) lands as rows of 128 bytes, and inside each group of 8 rows
//   the 16-byte chunk c of row r is stored at chunk position c ^ (r % 8). The XOR is computed from
//   address bits [4:6] ^ [7:9], so every tile starts on a 1024-byte boundary.
// * wgmma reads the same bytes through a matrix descriptor with swizzle mode "128B" (PTX ISA
//   9.7.15.5.1.2, "Shared Memory Matrix Layout" and "Matrix Descriptor Format"):
//     A, K-major (a 64 x 16 slice of a BLOCK_M x 64 tile): rows 128 B apart, SBO = 1024 B (the next
//       8 rows), LBO unused for swizzled K-major layouts (encoded as 1); the k-th 16-wide slice
//       starts 32*k bytes into the row - the hardware applies the XOR to the final address.
//     B, N-major (a 16 x BLOCK_N slice of 64 x BLOCK_N, stored as BLOCK_N/64 boxes of 64 x 64):
//       SBO = 1024 B (the next 8 rows of K), LBO = 64*128 B = 8192 B (the next 64 columns of N,
//       i.e. the next box); the k-th 16-row slice starts 16*128*k = 2048*k bytes into each box.
//   The fields are named once below (A_LBO ... B_SBO); course_lib/kernels/tensor_cores/model.py
//   reads them by name and models these formulas in Python, element by element, and a test holds
//   the constexpr descriptor functions below to that model at compile time (static_assert).
//
// Notebooks 08 and 09 print the lines between `// [excerpt NAME]` and `// [/excerpt NAME]` below.
#pragma once

#include <cstdint>
#include <cuda.h>  // CUtensorMap (a 128-byte opaque struct; no driver library is linked)
#include <cuda_bf16.h>

#include "tc_mma.cuh"  // smem_u32, pack_bf16x2

namespace tc {

using bf16 = __nv_bfloat16;

constexpr int SWIZZLE_BYTES = 128;      // one swizzled row: 64 bf16
constexpr int SWIZZLE_ATOM = 1024;      // 8 rows of 128 bytes: where the XOR pattern repeats
constexpr int TILE_K = 64;              // every wgmma stage loads K in slices of 64 (= 128 bytes)
constexpr int WGMMA_K = 16;             // K of one wgmma instruction for 16-bit inputs
constexpr int WARPGROUP = 128;          // threads that issue one wgmma together

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Dynamic shared memory is only guaranteed 16-byte alignment; the swizzled tiles need 1024.
// Kernels ask for SMEM_SLACK extra bytes and start their layout here.
constexpr int SMEM_SLACK = SWIZZLE_ATOM;
__device__ __forceinline__ uint8_t* align_smem(uint8_t* raw) {
  const uint32_t addr = smem_u32(raw);
  return raw + ((SWIZZLE_ATOM - (addr % SWIZZLE_ATOM)) % SWIZZLE_ATOM);
}

// ---- mbarriers (PTX ISA 9.7.13.15) -----------------------------------------------------------
// A barrier in shared memory that completes a *phase* when `count` threads have arrived and every
// byte announced with expect_tx has been written by the copy engine. Waiters name the parity
// (0 or 1) of the phase they wait for; a fresh barrier is in phase 0, and waiting for parity 1 on
// it returns at once (the "previous" phase counts as complete) - producers use that to find
// every slot free on their first pass.

// A barrier is named by its pointer, or by its shared-memory address: stage 7's promoting loop
// carries the addresses from slice to slice rather than recompute them (tc_7_fp8.cu).
__device__ __forceinline__ uint32_t shared_address(const uint64_t* bar) { return smem_u32(bar); }
__device__ __forceinline__ uint32_t shared_address(uint32_t address) { return address; }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the copy engine and to the other CTAs of a cluster
// (PTX ISA 9.7.13.4, membar/fence: fence.mbarrier_init). Follow it with a CTA or cluster barrier.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The barriers of a ring of STAGES slots (stages 3-6), set up by one thread: full[i] completes on
// the producer's one arrival (its expect_tx) plus the bytes, empty[i] once `releases` consumer
// warpgroups have handed the slot back. Follow it with a CTA or cluster barrier.
template <int STAGES>
__device__ __forceinline__ void mbar_init_ring(uint64_t (&full)[STAGES], uint64_t (&empty)[STAGES], uint32_t releases) {
  for (int i = 0; i < STAGES; ++i) {
    mbar_init(&full[i], 1);
    mbar_init(&empty[i], releases);
  }
  fence_barrier_init();
}

// Arrive (count 1) and announce `bytes` that the copy engine will deliver in this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}

// Arrive (count 1) on `bar`: the barrier, or its shared-memory address.
template <class Barrier>
__device__ __forceinline__ void mbar_arrive(Barrier bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}

// Arrive on the barrier at the same shared-memory offset in CTA `cta_rank` of this cluster
// (mapa translates the address into the peer's window; PTX ISA 9.7.9.20). Default semantics
// (release at CTA scope), as CUTLASS's consumer release does: an explicit .release.cluster would
// make ptxas put a MEMBAR.ALL.GPU before every arrive, in the hot loop.
template <class Barrier>
__device__ __forceinline__ void mbar_arrive_cluster(Barrier bar, uint32_t cta_rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(cta_rank)
      : "memory");
}

template <class Barrier>
__device__ __forceinline__ bool mbar_try_wait(Barrier bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(shared_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Seconds-scale watchdog: a wrong phase or a lost arrival would otherwise hang the GPU until the
// process is killed. After about 2^35 cycles (~17 s at 1.98 GHz) the kernel traps, the launch fails
// with an error, and the course's GPU scripts report it. The clock is read only on the slow path.
// The trap sits in a function of its own, never inlined: a trap instruction inlined into a
// kernel made ptxas (CUDA 13.0) keep the consumer warpgroups to about 200 registers despite
// setmaxnreg 232, and stage 6 with its tile staged in registers (192 live values) then spilled;
// behind a call it compiles without spills (checked with -Xptxas -v; the call is never taken).
#ifndef TC_WAIT_TIMEOUT_CYCLES
#define TC_WAIT_TIMEOUT_CYCLES (1ll << 35)
#endif

static __device__ __noinline__ void watchdog_trap() { __trap(); }

// Wait until `bar` (the barrier, or its shared-memory address) completes its phase of this parity.
template <class Barrier>
__device__ __forceinline__ void mbar_wait(Barrier bar, uint32_t parity) {
  if (mbar_try_wait(bar, parity)) return;
  const long long start = clock64();
  while (!mbar_try_wait(bar, parity)) {
    if (TC_WAIT_TIMEOUT_CYCLES > 0 && clock64() - start > TC_WAIT_TIMEOUT_CYCLES) watchdog_trap();
  }
}

// ---- TMA: the tensor copy engine (PTX ISA 9.7.9.25, cp.async.bulk.tensor) ---------------------
// Coordinates are in elements, innermost (contiguous) dimension first. Boxes that stick out of
// the matrix are filled with zeros on loads and clipped on stores, which is how every wgmma stage
// handles partial tiles. The copy signals `bar` with the bytes it wrote (complete_tx).

__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// The same box written into the same offset of every CTA in `cta_mask` (bit i = cluster rank i),
// each of which gets complete_tx on its own barrier at the offset of `bar`.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                      int c0, int c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

// Shared -> global; completion is tracked with bulk groups (commit / wait) by the issuing thread.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_u32(src)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Wait until the stores issued so far have *read* their shared-memory source (it may be reused).
__device__ __forceinline__ void bulk_wait_read_all() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Wait until the stores issued so far are complete (before the CTA exits).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Ordinary stores to shared memory (st.shared, stmatrix) are made visible to the copy engine
// (the "async proxy") before a barrier that hands the buffer to a TMA store (PTX ISA 9.7.13.4).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- wgmma (PTX ISA 9.7.15) -------------------------------------------------------------------
// Matrix descriptor (9.7.15.5.1.2.2): bits 0-13 start address >> 4, 16-29 LBO >> 4,
// 32-45 SBO >> 4, 49-51 base offset (0: our tiles start on 1024-byte boundaries), 62-63 swizzle
// mode (1 = 128-byte swizzle).
__host__ __device__ constexpr uint64_t descriptor_encode(uint32_t x) { return (x & 0x3FFFF) >> 4; }

__host__ __device__ constexpr uint64_t sw128_descriptor(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return descriptor_encode(smem_addr) | (descriptor_encode(lbo_bytes) << 16) |
         (descriptor_encode(sbo_bytes) << 32) | (uint64_t(1) << 62);
}

// The byte strides the two layouts above give each descriptor.
constexpr uint32_t A_LBO = 16;                          // K-major, swizzled: unused ("assumed 1")
constexpr uint32_t A_SBO = SWIZZLE_ATOM;                // the next 8 rows of A
constexpr uint32_t B_LBO = TILE_K * SWIZZLE_BYTES;      // the next 64 columns of N: the next box
constexpr uint32_t B_SBO = SWIZZLE_ATOM;                // the next 8 rows of K

// A: 64 rows (one warpgroup's share) x 16 k, K-major, from a swizzled tile whose rows are 128 B
// and whose row 0 is at shared-memory address `tile_row0`: slice k16 starts 16 bf16 further along.
__host__ __device__ constexpr uint64_t a_descriptor_at(uint32_t tile_row0, int k16) {
  return sw128_descriptor(tile_row0 + k16 * WGMMA_K * 2, A_LBO, A_SBO);
}
__device__ __forceinline__ uint64_t a_descriptor(const bf16* tile_row0, int k16) {
  return a_descriptor_at(smem_u32(tile_row0), k16);
}

// B: 16 k x (64 * boxes) n, N-major, from consecutive 64 x 64 boxes (8192 B each) starting at
// shared-memory address `tile`: slice k16 starts 16 rows of 128 B further down every box.
__host__ __device__ constexpr uint64_t b_descriptor_at(uint32_t tile, int k16) {
  return sw128_descriptor(tile + k16 * WGMMA_K * SWIZZLE_BYTES, B_LBO, B_SBO);
}
__device__ __forceinline__ uint64_t b_descriptor(const bf16* tile, int k16) {
  return b_descriptor_at(smem_u32(tile), k16);
}

// Order register writes by ordinary instructions before wgmma reads them (required before the
// first wgmma of a batch; 9.7.15.7.1).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Close the batch of wgmmas issued since the last commit into one group.
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The accumulators are written asynchronously; this empty asm "touches" them after a wait so the
// compiler cannot move any read of them above the wait.
template <int R>
__device__ __forceinline__ void fence_accumulators(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The two instruction shapes the course uses. The predicate scale-d is `accumulate`: true adds the
// product to D, false overwrites D (D = A * B), which spares zeroing the accumulators before a
// tile's first wgmma. The trailing immediates are imm-scale-a = 1, imm-scale-b = 1,
// imm-trans-a = 0 (A is K-major), imm-trans-b = 1 (B is N-major: row-major K x N).
// Accumulator layout (9.7.15.5.1.1, "Register Fragments", matrix D): thread `lane` of warp `w`
// of the warpgroup holds, for j = 0 .. N/8 - 1,
//   d[4j+0], d[4j+1] = D[16w + lane/4    ][8j + 2*(lane%4) + {0,1}]
//   d[4j+2], d[4j+3] = D[16w + lane/4 + 8][8j + 2*(lane%4) + {0,1}]
// In the asm statements below accumulator d[i] is operand %i. The operand lists are long and the
// instructions share their first entries, so the lists are spelled once, by macros local
// to this header: TC_WGMMA_D64(d, i) is "+f"(d[i]) .. "+f"(d[i + 63]), TC_WGMMA_REGS_* the
// matching "%0, %1, ..." text.
#define TC_WGMMA_D8(d, i)                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define TC_WGMMA_D64(d, i)                                                                    \
  TC_WGMMA_D8(d, i), TC_WGMMA_D8(d, i + 8), TC_WGMMA_D8(d, i + 16), TC_WGMMA_D8(d, i + 24), \
      TC_WGMMA_D8(d, i + 32), TC_WGMMA_D8(d, i + 40), TC_WGMMA_D8(d, i + 48), TC_WGMMA_D8(d, i + 56)
#define TC_WGMMA_REGS_0_63                                                          \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"           \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TC_WGMMA_REGS_64_127                                                                     \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"              \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"              \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"  \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define TC_WGMMA_REGS_0_7 "%0, %1, %2, %3, %4, %5, %6, %7"
#define TC_WGMMA_REGS_8_15 "%8, %9, %10, %11, %12, %13, %14, %15"
#define TC_WGMMA_REGS_16_31                                              \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, " \
  "%30, %31"
#define TC_WGMMA_REGS_32_47                                              \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, " \
  "%46, %47"

// D[64 x 128] (+)= A[64 x 16] * B[16 x 128]; A K-major, B N-major (imm-trans-b = 1), both read
// from shared memory through descriptors. 64 fp32 accumulators per thread.
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                 bool accumulate = true) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
      "{" TC_WGMMA_REGS_0_63 "}, %64, %65, p, 1, 1, 0, 1;\n"
      "}\n"
      : TC_WGMMA_D64(d, 0)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

// D[64 x 64] (+)= A[64 x 16] * B[16 x 64]: 32 fp32 accumulators per thread. TRANS_A and TRANS_B are
// the instruction's imm-trans-a and imm-trans-b: by default (0, 1) as above, for stage 6's narrowest
// tile; (1, 0) for the swapped operands below (their 64-token tile).
template <int TRANS_A = 0, int TRANS_B = 1>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                bool accumulate = true) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16\n"
      "{" TC_WGMMA_REGS_0_7 ", " TC_WGMMA_REGS_8_15 ", " TC_WGMMA_REGS_16_31 "}, %32, %33, p, 1, 1, %35, %36;\n"
      "}\n"
      : TC_WGMMA_D8(d, 0), TC_WGMMA_D8(d, 8), TC_WGMMA_D8(d, 16), TC_WGMMA_D8(d, 24)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)), "n"(TRANS_A), "n"(TRANS_B));
}

// D[64 x 256] (+)= A[64 x 16] * B[16 x 256]: the same with 128 fp32 accumulators per thread.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                 bool accumulate = true) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16\n"
      "{" TC_WGMMA_REGS_0_63 ", " TC_WGMMA_REGS_64_127 "}, %128, %129, p, 1, 1, 0, 1;\n"
      "}\n"
      : TC_WGMMA_D64(d, 0), TC_WGMMA_D64(d, 64)
      : "l"(desc_a), "l"(desc_b), "r"(int(accumulate)));
}

// Swapped operands (stage 6's decode path): D[64 x T] (+)= A'[64 x 16] * B'[16 x T] with A' = a
// 64-column slice of B^T and B' = T rows of A, read from the same swizzled tiles as above. A' lies
// N-major in shared memory (B's rows are K), so imm-trans-a = 1 and its descriptor is B's;
// B' lies K-major (A's rows are K), so imm-trans-b = 0 and its descriptor is A's (with T rows).
// wgmma takes any T that is a multiple of 8 up to 256; the course uses 16, 32, 64, 96 and 128.
template <int T>
__device__ __forceinline__ void wgmma_swapped(float (&d)[T / 2], uint64_t desc_bt, uint64_t desc_a, bool accumulate) {
  static_assert(T == 16 || T == 32 || T == 64 || T == 96 || T == 128, "the decode path's token tiles");
  const int acc = int(accumulate);
  if constexpr (T == 16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16\n"
        "{" TC_WGMMA_REGS_0_7 "}, %8, %9, p, 1, 1, 1, 0;\n}\n"
        : TC_WGMMA_D8(d, 0)
        : "l"(desc_bt), "l"(desc_a), "r"(acc));
  } else if constexpr (T == 32) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16\n"
        "{" TC_WGMMA_REGS_0_7 ", " TC_WGMMA_REGS_8_15 "}, %16, %17, p, 1, 1, 1, 0;\n}\n"
        : TC_WGMMA_D8(d, 0), TC_WGMMA_D8(d, 8)
        : "l"(desc_bt), "l"(desc_a), "r"(acc));
  } else if constexpr (T == 64) {
    wgmma_m64n64k16<1, 0>(d, desc_bt, desc_a, accumulate);
  } else if constexpr (T == 96) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k16.f32.bf16.bf16\n"
        "{" TC_WGMMA_REGS_0_7 ", " TC_WGMMA_REGS_8_15 ", " TC_WGMMA_REGS_16_31 ", " TC_WGMMA_REGS_32_47
        "}, %48, %49, p, 1, 1, 1, 0;\n}\n"
        : TC_WGMMA_D8(d, 0), TC_WGMMA_D8(d, 8), TC_WGMMA_D8(d, 16), TC_WGMMA_D8(d, 24), TC_WGMMA_D8(d, 32),
          TC_WGMMA_D8(d, 40)
        : "l"(desc_bt), "l"(desc_a), "r"(acc));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16\n"
        "{" TC_WGMMA_REGS_0_63 "}, %64, %65, p, 1, 1, 1, 0;\n}\n"
        : TC_WGMMA_D64(d, 0)
        : "l"(desc_bt), "l"(desc_a), "r"(acc));
  }
}

// ---- FP8 (stage 7) -----------------------------------------------------------------------------
// wgmma on e4m3 reads 32 of K per instruction (32 bytes, as 16 bf16 are), and for 8-bit inputs both
// operands must be K-major: the instruction has no transpose immediates (PTX ISA 9.7.15.5.1, "the
// layout of A and B ... K-major for .e4m3/.e5m2"). So B is stored as W, N x K (the weight of
// nn.Linear), and its tile reads exactly like A's: rows of 128 bytes (128 e4m3), SBO = 1024 B, the
// k-th 32-wide slice 32*k bytes into the row - the same descriptor as A's k-th bf16 slice.
constexpr int FP8_WGMMA_K = 32;
__device__ __forceinline__ uint64_t kmajor_descriptor(const uint8_t* tile_row0, int k32) {
  return sw128_descriptor(smem_u32(tile_row0) + k32 * FP8_WGMMA_K, A_LBO, A_SBO);
}

// D[64 x N] (+)= A[64 x 32] * W[N x 32]^T in e4m3, fp32 accumulators (N = 128 or 256). Operands:
// d, desc-a, desc-b, scale-d, imm-scale-a = 1, imm-scale-b = 1 (no transpose immediates for FP8).
template <int N>
__device__ __forceinline__ void wgmma_fp8(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_w, bool accumulate) {
  static_assert(N == 128 || N == 256, "stage 7's two tile widths");
  if constexpr (N == 256) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3\n"
        "{" TC_WGMMA_REGS_0_63 ", " TC_WGMMA_REGS_64_127 "}, %128, %129, p, 1, 1;\n}\n"
        : TC_WGMMA_D64(d, 0), TC_WGMMA_D64(d, 64)
        : "l"(desc_a), "l"(desc_w), "r"(int(accumulate)));
  } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3\n"
        "{" TC_WGMMA_REGS_0_63 "}, %64, %65, p, 1, 1;\n}\n"
        : TC_WGMMA_D64(d, 0)
        : "l"(desc_a), "l"(desc_w), "r"(int(accumulate)));
  }
}

// Swapped operands (stage 7's decode path): D[64 x T] (+)= W[64 x 32] * A[T x 32]^T in e4m3, i.e.
// C^T = W A^T with 64 rows of W as wgmma's A and T token rows of A as its B. Both are K-major, as
// 8-bit wgmma wants them, so both use kmajor_descriptor and nothing is transposed. Accumulator rows
// are rows of W (columns of C), accumulator columns are tokens (rows of C). T = 16, 32, 64, 96, 128.
template <int T>
__device__ __forceinline__ void wgmma_fp8_swapped(float (&d)[T / 2], uint64_t desc_w, uint64_t desc_a,
                                                  bool accumulate) {
  static_assert(T == 16 || T == 32 || T == 64 || T == 96 || T == 128, "the decode path's token tiles");
  const int acc = int(accumulate);
  if constexpr (T == 16) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3\n"
        "{" TC_WGMMA_REGS_0_7 "}, %8, %9, p, 1, 1;\n}\n"
        : TC_WGMMA_D8(d, 0)
        : "l"(desc_w), "l"(desc_a), "r"(acc));
  } else if constexpr (T == 32) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3\n"
        "{" TC_WGMMA_REGS_0_7 ", " TC_WGMMA_REGS_8_15 "}, %16, %17, p, 1, 1;\n}\n"
        : TC_WGMMA_D8(d, 0), TC_WGMMA_D8(d, 8)
        : "l"(desc_w), "l"(desc_a), "r"(acc));
  } else if constexpr (T == 64) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3\n"
        "{" TC_WGMMA_REGS_0_7 ", " TC_WGMMA_REGS_8_15 ", " TC_WGMMA_REGS_16_31 "}, %32, %33, p, 1, 1;\n}\n"
        : TC_WGMMA_D8(d, 0), TC_WGMMA_D8(d, 8), TC_WGMMA_D8(d, 16), TC_WGMMA_D8(d, 24)
        : "l"(desc_w), "l"(desc_a), "r"(acc));
  } else if constexpr (T == 96) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3\n"
        "{" TC_WGMMA_REGS_0_7 ", " TC_WGMMA_REGS_8_15 ", " TC_WGMMA_REGS_16_31 ", " TC_WGMMA_REGS_32_47
        "}, %48, %49, p, 1, 1;\n}\n"
        : TC_WGMMA_D8(d, 0), TC_WGMMA_D8(d, 8), TC_WGMMA_D8(d, 16), TC_WGMMA_D8(d, 24), TC_WGMMA_D8(d, 32),
          TC_WGMMA_D8(d, 40)
        : "l"(desc_w), "l"(desc_a), "r"(acc));
  } else {
    wgmma_fp8<128>(d, desc_w, desc_a, accumulate);  // the same instruction, roles swapped
  }
}
#undef TC_WGMMA_REGS_0_7
#undef TC_WGMMA_REGS_8_15
#undef TC_WGMMA_REGS_16_31
#undef TC_WGMMA_REGS_32_47

#undef TC_WGMMA_D8
#undef TC_WGMMA_D64
#undef TC_WGMMA_REGS_0_63
#undef TC_WGMMA_REGS_64_127

// ---- register reallocation between warpgroups (PTX ISA 9.7.19.5, setmaxnreg) ------------------
// Takes effect only when the kernel has a register cap at entry (__launch_bounds__(threads, 1));
// every warp of the warpgroup executes it. The registers move within a pool kept per CTA (PTX ISA:
// "A pool of available registers is maintained per-CTA"): what .dec gives back goes into it, and
// .inc blocks until the pool holds enough. The pool starts as the registers every thread got at
// launch times the CTA's threads - not the SM's 65,536: under __launch_bounds__(THREADS, 1) ptxas
// gives each thread 65,536 / THREADS rounded down to a multiple of 8 (168 for 384 threads, a pool
// of 64,512). A split that asks for more than the pool makes setmaxnreg.inc wait forever.
__host__ __device__ constexpr int registers_at_launch(int threads) { return 65536 / threads / 8 * 8; }
__host__ __device__ constexpr bool fits_register_pool(int threads, int producer_regs, int consumer_regs,
                                                      int consumers) {
  return producer_regs * WARPGROUP + consumer_regs * consumers * WARPGROUP <= registers_at_launch(threads) * threads;
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// ---- clusters (PTX ISA 10.x special registers, 9.7.13.1 barrier.cluster) ----------------------
__device__ __forceinline__ uint32_t cluster_cta_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Every thread of every CTA in the cluster arrives and waits (release / acquire). The forms
// without .aligned do not require the warp to be converged.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// A barrier for `threads` threads (a multiple of 32) under hardware barrier `id` (1..15; 0 is
// __syncthreads). Lets one warpgroup synchronise without stopping the others.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrive on named barrier `id` without waiting: the threads that bar.sync on it go on once the
// arrivals and their own add up to `threads` (PTX ISA 9.7.13.1, bar.arrive).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- one K slice: the steps every wgmma stage repeats (introduced by stage 2) --------------------
// [excerpt one-k-slice]
// Copy: announce the slice's bytes on `full`, then ask TMA for A's BLOCK_M x 64 box and B's
// BLOCK_N / 64 boxes of 64 x 64. In a cluster (stages 5-6), CTA `rank` copies only every
// CLUSTER-th box of B and multicasts it into every CTA of the cluster: each CTA still receives all
// of B (and announces all of its bytes), but the cluster reads B from L2 once.
template <int BLOCK_M, int BLOCK_N, int CLUSTER = 1>
__device__ __forceinline__ void tma_load_slice(bf16* a, bf16* b, uint64_t* full, const CUtensorMap* map_a,
                                               const CUtensorMap* map_b, int ks, int m0, int n0, uint32_t rank = 0) {
  static_assert((BLOCK_N / 64) % CLUSTER == 0, "each CTA of the cluster multicasts the same number of B boxes");
  mbar_arrive_expect_tx(full, (BLOCK_M + BLOCK_N) * TILE_K * int(sizeof(bf16)));
  tma_load_2d(a, map_a, full, ks * TILE_K, m0);
#pragma unroll
  for (int j = int(rank); j < BLOCK_N / 64; j += CLUSTER) {
    bf16* dst = b + j * 64 * TILE_K;
    if constexpr (CLUSTER > 1)
      tma_load_2d_multicast(dst, map_b, full, n0 + 64 * j, ks * TILE_K, (1u << CLUSTER) - 1);
    else
      tma_load_2d(dst, map_b, full, n0 + 64 * j, ks * TILE_K);
  }
}

// Math: one warpgroup's 64 rows of A's slice times all of B's slice, TILE_K / 16 wgmmas issued
// as one committed batch. The caller chooses how long to wait for it (wgmma_wait<N>).
// `accumulate` = false starts a new tile: the first wgmma overwrites acc instead of adding to it.
template <int BLOCK_N>
__device__ __forceinline__ void wgmma_slice(float (&acc)[BLOCK_N / 2], const bf16* a_rows, const bf16* b,
                                            bool accumulate = true) {
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256, "the course's three wgmma shapes");
  wgmma_fence();
#pragma unroll
  for (int k16 = 0; k16 < TILE_K / WGMMA_K; ++k16) {
    if constexpr (BLOCK_N == 256)
      wgmma_m64n256k16(acc, a_descriptor(a_rows, k16), b_descriptor(b, k16), accumulate || k16 > 0);
    else if constexpr (BLOCK_N == 128)
      wgmma_m64n128k16(acc, a_descriptor(a_rows, k16), b_descriptor(b, k16), accumulate || k16 > 0);
    else
      wgmma_m64n64k16(acc, a_descriptor(a_rows, k16), b_descriptor(b, k16), accumulate || k16 > 0);
  }
  wgmma_commit();
}
// [/excerpt one-k-slice]

// ---- a consumer's place in the ring, carried from slice to slice (stages 6 and 7) ----------------
// In the hot loop every instruction runs once per K slice per warp. Recomputed from the shared
// window's base, a slot's barrier address and its tiles' descriptors cost about a dozen
// instructions a slice (S2UR of the CTA's window, masks and shifts, moves into uniform registers):
// stage 7's promoting loop ran 164 instructions a slice where 125 do the same work, stage 6's 126
// where 70 do (experiments/JOURNAL.md). So the slot-0 descriptors are built once and the cursor
// carries what changes: one add per value and slice.
//
// A descriptor's start address is its low 14 bits, in 16-byte units (sw128_descriptor): moving it
// by `bytes` inside shared memory (addresses below 2^18) adds bytes / 16 to the low word and never
// carries out of it, so a descriptor is slot 0's high word with a carried low word.
__device__ __forceinline__ uint64_t with_low_word(uint64_t desc, uint32_t low) {
  return (desc & 0xFFFFFFFF00000000ull) | low;
}

// SLOTS slots; A_SLOT / B_SLOT: one slot's tile of A / of B in descriptor units (bytes / 16). The
// ring's barriers are `full[SLOTS]` followed by `empty[SLOTS]` (8 bytes each).
template <int SLOTS, uint32_t A_SLOT, uint32_t B_SLOT>
struct RingCursor {
  uint64_t desc_a0, desc_b0;  // slot 0's tiles (the consumer's rows of A, all of B's)
  uint32_t full0;             // slot 0's `full` barrier
  uint32_t full, a, b;        // the next slice's `full` barrier and its tiles' descriptor low words
  int slot = 0;               // the next slice's slot, and
  uint32_t phase = 0;         // the parity its `full` barrier completes with this time round
  __device__ __forceinline__ RingCursor(const uint64_t* full_barriers, uint64_t a0, uint64_t b0)
      : desc_a0(a0), desc_b0(b0), full0(smem_u32(full_barriers)), full(full0), a(uint32_t(a0)), b(uint32_t(b0)) {}
  // The next slice's descriptors, `units` (16 bytes) into its tiles.
  __device__ __forceinline__ uint64_t a_desc(uint32_t units) const { return with_low_word(desc_a0, a + units); }
  __device__ __forceinline__ uint64_t b_desc(uint32_t units) const { return with_low_word(desc_b0, b + units); }
  __device__ __forceinline__ uint32_t empty() const { return full + SLOTS * 8; }  // its `empty` barrier
  __device__ __forceinline__ void advance() {
    if (++slot == SLOTS) {
      slot = 0, phase ^= 1;
      full = full0, a = uint32_t(desc_a0), b = uint32_t(desc_b0);
    } else {
      full += 8, a += A_SLOT, b += B_SLOT;
    }
  }
};

// wgmma_slice on the cursor's next slot (stage 6): the same wgmmas, their descriptors carried.
template <int BLOCK_N, class Cursor>
__device__ __forceinline__ void wgmma_slice_at(float (&acc)[BLOCK_N / 2], const Cursor& ring, bool accumulate) {
  static_assert(BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256, "the course's three wgmma shapes");
  constexpr uint32_t A_K16 = WGMMA_K * 2 / 16, B_K16 = WGMMA_K * SWIZZLE_BYTES / 16;  // as a/b_descriptor_at
  wgmma_fence();
#pragma unroll
  for (int k16 = 0; k16 < TILE_K / WGMMA_K; ++k16) {
    const uint64_t da = ring.a_desc(k16 * A_K16), db = ring.b_desc(k16 * B_K16);
    if constexpr (BLOCK_N == 256)
      wgmma_m64n256k16(acc, da, db, accumulate || k16 > 0);
    else if constexpr (BLOCK_N == 128)
      wgmma_m64n128k16(acc, da, db, accumulate || k16 > 0);
    else
      wgmma_m64n64k16(acc, da, db, accumulate || k16 > 0);
  }
  wgmma_commit();
}

// [excerpt release-slot]
// Release: hand a slot's `empty` barrier back to the producer of every CTA in the cluster - each
// of them multicast into this CTA's slot, so each must hear that it is free (stages 5-6).
template <int CLUSTER, class Barrier>
__device__ __forceinline__ void mbar_arrive_all_ctas(Barrier empty) {
  if constexpr (CLUSTER > 1) {
#pragma unroll
    for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty, r);
  } else {
    mbar_arrive(empty);
  }
}
// [/excerpt release-slot]

// ---- epilogues --------------------------------------------------------------------------------
// Straight from registers to global memory: each thread writes pairs of bf16 (4 bytes) at the
// positions of the accumulator layout above; rows >= M and columns >= N are skipped (N is a
// multiple of 8, so a pair is either wholly inside or wholly outside).
template <int N_TILE>
__device__ __forceinline__ void store_accumulators(const float (&d)[N_TILE / 2], bf16* c, int M, int N,
                                                   int row0, int col0) {
  const int lane = threadIdx.x % 32;
  const int warp = (threadIdx.x % WARPGROUP) / 32;
  const int r = row0 + warp * 16 + lane / 4;
#pragma unroll
  for (int j = 0; j < N_TILE / 8; ++j) {
    const int col = col0 + 8 * j + 2 * (lane % 4);
    if (col >= N) continue;
    if (r < M)
      *reinterpret_cast<uint32_t*>(c + size_t(r) * N + col) = pack_bf16x2(d[4 * j + 0], d[4 * j + 1]);
    if (r + 8 < M)
      *reinterpret_cast<uint32_t*>(c + size_t(r + 8) * N + col) = pack_bf16x2(d[4 * j + 2], d[4 * j + 3]);
  }
}

// Four 8x8 b16 matrices to shared memory (PTX ISA 9.7.14.5.16, stmatrix): lanes 8i..8i+7 give
// the row addresses of matrix i; every thread supplies (row lane/4, columns 2*(lane%4) + {0,1}) of
// each matrix - exactly the accumulator layout above, so no shuffles are needed.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// [excerpt tma-store-epilogue]
// One consumer's 64-row tile -> swizzled staging boxes -> TMA store, HALF_COLS columns per round
// (stage 6, and notebook 12's stage 7). `pairs[i]` is the thread's i-th pair of bf16 results, i.e.
// its accumulators 2i and 2i+1 converted (pack_bf16x2); `staging` holds HALF_COLS / 64 boxes of
// 64 x 64 bf16 with the 128-byte swizzle. FIRST_HALF and HALVES pick the rounds: all of them
// (after the last tile), or one (during the next tile); a tile of HALF_COLS columns (stage 6's
// 128 x 64) has only the first. Called by all 128 threads of the consumer; `barrier` is its own
// named barrier.
constexpr int C_BOX = 64;  // 64 x 64 bf16 boxes, 128-byte swizzle
template <int HALF_COLS, int FIRST_HALF, int HALVES, int PAIRS>
__device__ __forceinline__ void store_tile_tma(const uint32_t (&pairs)[PAIRS], bf16* staging, const CUtensorMap* map_c,
                                               int barrier, int row0, int col0) {
  constexpr int ROUNDS = PAIRS / (HALF_COLS / 4);  // a round: HALF_COLS columns of 2 rows, 2 columns a pair
  static_assert(HALF_COLS % C_BOX == 0 && PAIRS % (HALF_COLS / 4) == 0 && (ROUNDS == 1 || ROUNDS == 2),
                "a round is whole 64 x 64 boxes, and the tile is one or two rounds");
  const int tid = threadIdx.x % WARPGROUP, warp = tid / 32, lane = tid % 32;
  const bool leader = tid == 0;
  // stmatrix: lanes 8i..8i+7 address the 8 rows of matrix i; matrices 0/1 are rows 0-7 / 8-15 of
  // the warp's 16 rows at columns +0, matrices 2/3 the same rows at columns +8.
  const int row = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8;
  const int col_in_16 = (lane / 16) * 8;
#pragma unroll
  for (int half = FIRST_HALF; half < FIRST_HALF + HALVES && half < ROUNDS; ++half) {
    if (leader) bulk_wait_read_all();   // the previous round's store has read the staging boxes
    named_barrier_sync(barrier, WARPGROUP);
#pragma unroll
    for (int j = 0; j < HALF_COLS / 16; ++j) {
      const int q = half * (HALF_COLS / 16) + j;  // which 16 columns of the tile
      const int col = j * 16 + col_in_16;          // column within this round
      const int box = col / C_BOX, chunk = (col % C_BOX) / 8;
      const uint32_t addr =
          smem_u32(staging + box * C_BOX * C_BOX) + row * 128 + ((chunk ^ (row % 8)) * 16);
      stmatrix_x4(addr, pairs[4 * q + 0], pairs[4 * q + 1], pairs[4 * q + 2], pairs[4 * q + 3]);
    }
    fence_proxy_async_shared();         // st.shared/stmatrix -> visible to the copy engine
    named_barrier_sync(barrier, WARPGROUP);
    if (leader) {
#pragma unroll
      for (int bx = 0; bx < HALF_COLS / C_BOX; ++bx)
        tma_store_2d(map_c, staging + bx * C_BOX * C_BOX, col0 + half * HALF_COLS + bx * C_BOX, row0);
      bulk_commit();
  // [/excerpt tma-store-epilogue]
    }
  }
}

}  // namespace tc
