// Hopper (sm_90a) building blocks of the wgmma attention kernels (dense_mha/dense_mha_wgmma.cu,
// sparse_mqa/sparse_mqa_wgmma.cu): warpgroup MMA (wgmma.mma_async) with shared-memory matrix
// descriptors, mbarriers, TMA tensor loads, register reallocation (setmaxnreg), cp.async with
// zero fill and the async-proxy fences.
//
// MLA_WGMMA_ENABLED is 1 only in device passes for the arch-specific target sm_90a (wgmma and
// setmaxnreg exist nowhere else); everything below is compiled only then. Include this header only
// from files built for sm_90a (kernels/CMakeLists.txt), and guard kernel bodies with the macro.
//
// Shared-memory operand layout (the only one used here): "128-byte swizzle". A tile is stored as
// column blocks of 64 bf16 (128 bytes) per row; one block holds all rows of the tile, 128 bytes
// apart, and starts 1024-byte aligned. Within a block, 16-byte chunk c of row r sits at chunk
// c ^ (r & 7) of the row (the XOR of address bits 4-6 with bits 7-9, which is what the hardware
// applies to the addresses it computes from a descriptor; hence the 1024-byte alignment, which
// keeps the descriptor's base-offset field 0). 8 rows x 128 bytes = 1024 bytes form one swizzle
// atom.
//   K-major operand (rows = M or N, the contiguous 64 elements = K): start address = the block's
//     first row of the operand + 32 bytes per k16 step inside the block (k16 steps 4..7 of a
//     192-wide row are in the next block); SBO = 1024 (next 8 rows); LBO unused (encoded 1).
//   MN-major operand (rows = K, the contiguous 64 elements = N), used for B = V with the
//     transpose bit: start address = the block's row of the first k of the k16 step; SBO = 1024
//     (next 8 k rows); LBO = the distance between the 64-wide N blocks (the next block).
// Descriptor bits (PTX ISA, "Matrix Descriptor Format"): 0-13 start address >> 4, 16-29 LBO >> 4,
// 32-45 SBO >> 4, 49-51 base offset (0), 62-63 swizzle mode (1 = 128-byte).
//
// Register fragments of wgmma m64nNk16 per warp w of the warpgroup (rows 16 w .. 16 w + 15 of the
// 64; g = lane / 4, t = lane % 4), the mma.sync m16n8k16 layouts:
//   accumulator (fp32) d[4 i + 0..1] = (row g, col 8 i + 2 t .. + 1), d[4 i + 2..3] = (row g + 8, same cols)
//   A from registers (bf16x2) a[0] = (g, k 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..), a[3] = (g+8, 2t+8..)
// so the accumulators of an S = Q K^T tile, rounded and packed in pairs (a[j] = pack(d[2j], d[2j+1])
// for k16 step kk from d[8 kk .. 8 kk + 7]), are the A fragments of P V.
//
// wgmma discipline (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
//   - all four warps of the warpgroup execute every wgmma / fence / commit / wait (.sync.aligned),
//     convergently;
//   - wgmma_fence() before the first wgmma and whenever accumulator or A-fragment registers were
//     written or read by other instructions since the last wgmma on them;
//   - wgmma_commit() closes a group; wgmma_wait<N>() returns when at most N groups are pending
//     (groups complete in order); only then may the accumulators be read or the A registers be
//     reused, and only then has the wgmma finished reading its shared-memory operands;
//   - fence_operand(x) after a wait keeps the compiler from moving uses of x above the wait.
// Shared memory written by the generic proxy (st.shared, cp.async) must be made visible to wgmma
// (async proxy) by the writing thread: wait for its cp.async, fence_proxy_async(), then a release
// (mbarrier arrive or barrier) that the wgmma-issuing threads acquire.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/common/attention_device.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_WGMMA_ENABLED 1
#else
#define MLA_WGMMA_ENABLED 0
#endif

namespace mla::wgmma {

#if MLA_WGMMA_ENABLED

using attn_dev::smem_u32;

// --- register reallocation (whole warpgroups, immediates multiple of 8 in [24, 256]) -------------
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// --- barriers ------------------------------------------------------------------------------------
// mbarrier at shared address `bar` that completes a phase after `count` arrivals.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes this thread's mbarrier.init visible to the async proxy (TMA's complete_tx) and to the
// other threads once they sync with it: after the inits, before the __syncthreads that publishes
// them, in any kernel whose mbarriers a TMA completes.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// Arrive (release, CTA scope).
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// The scope a wait on this CTA's mbarrier acquires at: kCta where only this CTA's threads and
// copies arrive on it; kCluster where another CTA of the cluster arrives on it or completes
// transactions on it (st.async), so that the waiter sees that CTA's writes.
enum class BarScope { kCta, kCluster };

// True once the phase with parity `parity` has completed (acquire at kScope); may suspend the
// thread for a while (hardware time limit) before returning false.
template <BarScope kScope = BarScope::kCta>
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  if constexpr (kScope == BarScope::kCta) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } else {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  }
  return done != 0;
}

// Spins until the phase with parity `parity` of `bar` has completed (acquire at kScope). No
// timeout: a protocol bug hangs the kernel, and the process running it is killed by its caller's
// timeout (mla-check runs each scenario in its own process with one, which keeps the report of
// every other scenario; the GPU unit tests have a ctest TIMEOUT; mla-bench and mla-check
// --no-isolate have none). (A wall-clock guard here fired under
// compute-sanitizer, whose slowed execution made correct waits look like deadlocks.)
// Kernel debugging: built with -DMLA_MBAR_WATCHDOG, a wait of more than about 4e9 cycles prints the
// barrier (its shared address, and that address mod 1024: in the dense kernel, whose barriers
// start at a multiple of 1024, the bar_* offset), the parity, the CTA and the thread (lane 0 of
// each waiting warp), then traps. printf makes ptxas serialize the kernels' wgmma (C7510): for
// finding a hang, not for timing, and not under compute-sanitizer (see above).
template <BarScope kScope = BarScope::kCta>
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if defined(MLA_MBAR_WATCHDOG)
  const long long start = clock64();
  while (!mbar_try_wait<kScope>(bar, parity)) {
    if (clock64() - start > 4000000000LL) {
      if ((threadIdx.x & 31) == 0) {
        printf("mbar_wait stuck: bar 0x%x (mod 1024: %u) parity %u block %d thread %d\n", bar, bar & 1023u, parity,
               static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x));
      }
      __trap();
    }
  }
#else
  while (!mbar_try_wait<kScope>(bar, parity)) {
  }
#endif
}

// Orders this thread's earlier generic-proxy shared-memory accesses before later async-proxy ones.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// --- TMA (async proxy): tiles of a tensor map into shared memory, completion on an mbarrier -------
// Arrive on `bar` and add `bytes` to the transaction count its current phase waits for (the
// phase completes once every arrival is in and that many bytes have landed).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// The box of the 2-D / 3-D tensor map `map` (a __grid_constant__ kernel parameter) at coordinates
// (c0 innermost) to shared address `dst` (aligned as the map's swizzle requires: 1024 bytes for
// 128-byte swizzle); its bytes count against `bar`'s transaction count. Boxes past the tensor's
// bounds are zero-filled.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// 16-byte volatile global load / store (16-byte aligned). Volatile and the memory clobber only
// keep the compiler from moving, merging or dropping them; ordering between threads is the job
// of the mbarriers around them (release / acquire).
__device__ __forceinline__ uint4 ld_volatile_global_v4(const volatile uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_volatile_global_v4(volatile uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// --- cp.async (generic proxy): attention_device.cuh's ----------------------------------------------
using attn_dev::cp_async16;
using attn_dev::cp_async_commit;
__device__ __forceinline__ void cp_async_wait_all() { attn_dev::cp_async_wait<0>(); }

// --- descriptors and wgmma ------------------------------------------------------------------------
// 128-byte-swizzle descriptor of the operand starting at shared address `addr` (16-byte aligned,
// inside a 1024-byte-aligned block), with leading / stride byte offsets `lbo` / `sbo` (multiples
// of 16). Advancing the start address by b bytes (b a multiple of 16) is `desc + (b >> 4)` as long
// as addresses stay below 256 KiB.
__device__ __forceinline__ uint64_t desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
         (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void fence_operand(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void fence_operand(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
template <int N>
__device__ __forceinline__ void fence_operands(float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_operand(x[i]);
}
template <int N>
__device__ __forceinline__ void fence_operands(uint32_t (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_operand(x[i]);
}

#define MLA_WGMMA_ACC64_REGS                     \
  "{"                                            \
  "%0, %1, %2, %3, %4, %5, %6, %7, "             \
  "%8, %9, %10, %11, %12, %13, %14, %15, "       \
  "%16, %17, %18, %19, %20, %21, %22, %23, "     \
  "%24, %25, %26, %27, %28, %29, %30, %31, "     \
  "%32, %33, %34, %35, %36, %37, %38, %39, "     \
  "%40, %41, %42, %43, %44, %45, %46, %47, "     \
  "%48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63"       \
  "}"

#define MLA_WGMMA_ACC64_OPERANDS(d)                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),            \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),          \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),          \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),          \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),          \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),          \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),          \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (64 x 128 fp32) = A B + (accumulate ? d : 0); A (64 x 16) bf16 from registers (fragment layout
// above), B (16 x 128) bf16 in shared memory K-major (no transpose), through a descriptor.
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                    uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MLA_WGMMA_ACC64_REGS
      ", {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n"
      "}\n"
      : MLA_WGMMA_ACC64_OPERANDS(d)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(accumulate));
}

// d (64 x 128 fp32) += A B; A (64 x 16) bf16 from registers (fragment layout above), B (16 x 128)
// bf16 in shared memory MN-major (imm-trans-b = 1), through a descriptor.
__device__ __forceinline__ void wgmma_m64n128k16_rs_bt(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2,
                                                       uint32_t a3, uint64_t desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MLA_WGMMA_ACC64_REGS
      ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"
      "}\n"
      : MLA_WGMMA_ACC64_OPERANDS(d)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(1));
}

// d (64 x 128 fp32) = A B + (accumulate ? d : 0); A (64 x 16) bf16 in shared memory K-major, B
// (16 x 128) bf16 in shared memory MN-major (imm-trans-b = 1), both through descriptors.
__device__ __forceinline__ void wgmma_m64n128k16_ss_bt(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                       int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " MLA_WGMMA_ACC64_REGS
      ", %64, %65, p, 1, 1, 0, 1;\n"
      "}\n"
      : MLA_WGMMA_ACC64_OPERANDS(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// d (64 x 64 fp32) = A B + (accumulate ? d : 0); A (64 x 16) bf16 from registers (fragment layout
// above), B (16 x 64) bf16 in shared memory K-major, through a descriptor. d's layout is the first
// half of m64n128's (d[4 i + c]: row c >> 1 of the thread's pair, column 8 i + 2 tq + (c & 1)).
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                   uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
      ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(accumulate));
}

#undef MLA_WGMMA_ACC64_REGS
#undef MLA_WGMMA_ACC64_OPERANDS

// d (64 x 32 fp32) = A B + (accumulate ? d : 0); A (64 x 16) and B (16 x 32) bf16 in shared
// memory, both K-major, through descriptors.
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
      ", %16, %17, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

#endif  // MLA_WGMMA_ENABLED

}  // namespace mla::wgmma
