// Sparse MQA over the fp8_ds_mla cache (docs/semantics.md §4.1) for Hopper, `wgmma`
// implementation, the default on compute capability 9.0: the `tc` kernel's algorithm, tiles and
// barriers (sparse_mqa_tc.cu; semantics in sparse_mqa_simple.cu) with both matrix products on
// warpgroup MMA, which reads its operands straight from shared memory (the `tc` kernel's ldmatrix
// traffic makes its score product shared-memory bound; this kernel is 1.2x `tc` on every sparse
// shape). Built only for sm_90a (kernels/CMakeLists.txt); launch_sparse_mqa chooses it.
//
// CTA = 256 threads (warpgroups 0 and 1) per (work item, 64 heads), one CTA per SM. Per 64-column
// tile:
//   (B1) raw tile landed, the previous tile's P V finished (every warpgroup waited for its wgmma);
//   dequantize sRaw -> sK (all threads; the gather's bits), fence.proxy.async; (B2) barrier;
//   issue the next tile's cp.async into sRaw;
//   S = Q K^T: warpgroup w computes S[64 heads][columns 32 w .. 32 w + 31] over the full 576
//     depth (36 x wgmma m64n32k16, A = Q and B = K from shared memory, K-major);
//   online softmax on the accumulators: 4 lanes per row hold 8 columns each; the row's tile max
//     is exchanged between the two warpgroups through shared memory (B3), so both compute the
//     same m and factor; each warpgroup keeps l over its own columns (added at the end);
//     P = bf16(p) to shared memory (K-major, 128-byte swizzle), O *= factor; fence.proxy.async;
//     (B4) barrier;
//   O += P V: warpgroup w owns O[64 heads][dims 256 w .. 256 w + 255] (128 fp32 registers per
//     thread: 2 x m64n128 accumulators); 4 k16 steps x 2 wgmma m64n128k16, A = P and B = V (the
//     first 512 dims of sK, MN-major with the transpose bit) from shared memory. Left in flight
//     until the next tile's B1.
// Results equal the `tc` kernel's up to fp32 accumulation order (the score is one full-depth sum
// instead of two halves; l is the sum of two per-warpgroup sums).
//
// Shared memory (dynamic, 199,808 bytes), every bf16 tile in 128-byte-swizzled column blocks of
// [64 rows][64 bf16] = 8 KiB (layout and descriptors: wgmma_device.cuh):
//   Q [64 heads][576] 9 blocks | K [64 columns][576] 9 blocks | P [64][64] 1 block |
//   raw [64][656] entries (cp.async) | tile max [2][64] | l [2][64] fp32 | valid [2][64] bytes |
//   + up to 1 KiB to align the base.
// Descriptors: Q / K / P K-major (SBO 1024; k16 step kk: + 8 KiB * (kk / 4) + 32 B * (kk % 4));
// V MN-major (SBO 1024 = next 8 keys, LBO 8 KiB = next 64 dims; k16 step kk: + 2 KiB * kk).
//
// Where its time goes: the dequantize, S, softmax and P V phases of a tile run one after the other
// (two warps per scheduler; latency-bound at FlashMLA's decode shape: issue 47 %, memory 50 %).
// Overlapping them needs the next tile dequantized into a second K buffer while this tile's wgmma
// run, which fits beside Q (72 KB) and two K tiles (2 x 72 KB) only with the raw entries staged in
// registers instead of shared memory: the `crossover` kernel (sparse_mqa_crossover.cu) does that,
// with each key dequantized once per pair of 64-head CTAs. The softmax step, the item's rows and
// the product issues are shared with it (sparse_mqa_wgmma_steps.cuh). One CTA streams a tile of
// 64 keys in about 4.4 us when alone on the GPU (the split_k sweep's fit,
// lib/pipeline/sparse_mqa_plan.h), about 1.8 TFLOP/s of one SM's 7.5; at FlashMLA's decode shape
// on an H100 it reaches 229-237 TFLOP/s, FlashMLA 9241ae3 through adapters/flashmla.py 329-331 in
// the same run (lead 1,000,000 cycles; docs/performance.md).
#include "kernels/cuda/sparse_mqa/sparse_mqa_impls.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_probe.h"
#include "kernels/cuda/common/wgmma_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_wgmma_steps.cuh"

namespace mla::sparse_wgmma {
namespace {

using namespace sparse_dev;  // NOLINT: this file's kernel is the header's user

constexpr int kThreads = 256;
constexpr int kHeads = kWgmmaHeads;
constexpr int kBlockBytes = kWgmmaBlockBytes;
constexpr int kBlocks = kDl / 64;      // 9 column blocks per Q / K row (8 nope + 1 RoPE)
constexpr int kOffQ = 0;
constexpr int kOffK = kOffQ + kBlocks * kBlockBytes;
constexpr int kOffP = kOffK + kBlocks * kBlockBytes;
constexpr int kOffRaw = kOffP + kBlockBytes;
constexpr int kOffMax = kOffRaw + kTile * kEntryBytes;
constexpr int kOffSum = kOffMax + 2 * kHeads * 4;
constexpr int kOffValid = kOffSum + 2 * kHeads * 4;
constexpr int kSmemBytes = 1024 + kOffValid + 2 * kTile;
static_assert(kThreads == 32 * kStageWarps && kHeads == kStageHeads, "the staging helpers' CTA shape");
static_assert(kHeads == 64 && kTile == 64 && kDl == 576 && kDc == 512, "m64 tiles of 64 heads x 64 columns");
static_assert(kOffRaw % 16 == 0 && kEntryBytes % 16 == 0, "cp.async destinations are 16-byte aligned");
static_assert(kOffP % 1024 == 0 && kOffK % 1024 == 0, "swizzled blocks start 1024-byte aligned");
static_assert(kSmemBytes == 199808, "one CTA per SM, within the 227 KiB opt-in limit");

#if MLA_WGMMA_ENABLED

// Byte offset of logical 16-byte chunk `chunk` (0..71: 8 bf16 each) of row `row` in a Q / K tile.
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kBlockBytes) + attn_dev::swizzled(row, chunk & 7, 128);
}

#endif  // MLA_WGMMA_ENABLED

__global__ void __launch_bounds__(kThreads, 1) sparse_mqa_wgmma_kernel(const SparseArgs a) {
#if MLA_WGMMA_ENABLED
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t sbase = (wgmma::smem_u32(smem_raw) + 1023u) & ~1023u;
  uint8_t* const smem = smem_raw + (sbase - wgmma::smem_u32(smem_raw));
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wg = tid / 128;
  const int g = lane / 4, tq = lane % 4;
  // This thread's two rows of S, P and O (m64 fragment layout, wgmma_device.cuh).
  const int row0 = 16 * (warp % 4) + g, row1 = row0 + 8;
  const WgmmaRows rows{wg, row0, row1, tq};

  const auto [t, h0, kb, ke, ntiles, partial, idx_row] = cta_work(a, kHeads);

  float* const s_max = reinterpret_cast<float*>(smem + kOffMax);
  float* const s_sum = reinterpret_cast<float*>(smem + kOffSum);
  uint8_t* const s_valid = smem + kOffValid;
  const auto tile_off = [](int row, int chunk) { return tile_offset(row, chunk); };

  int32_t slot_next = -1;
  if (ntiles > 0) {
    load_q_tile(a, t, h0, smem + kOffQ, sbase + kOffQ, tile_off, tid);
    issue_raw_tile(a, sbase + kOffRaw, s_valid, 0, tile_slot(idx_row, kb, ke, 0, warp, lane), warp, lane);
    attn_dev::cp_async_commit();
  }

  // Softmax state of rows row0 / row1 (m identical in both warpgroups; l over this warpgroup's
  // columns only).
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  float o[2][64];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
#pragma unroll
    for (int i = 0; i < 64; ++i) o[j][i] = 0.0f;
  }

  for (int tile = 0; tile < ntiles; ++tile) {
    const bool has_next = tile + 1 < ntiles;
    if (has_next) slot_next = tile_slot(idx_row, kb, ke, tile + 1, warp, lane);  // overlaps the waits

    attn_dev::cp_async_wait<0>();
    wgmma::wgmma_wait<0>();  // this warpgroup's P V of the previous tile: done with sK and P
    wgmma::fence_operands(o[0]);
    wgmma::fence_operands(o[1]);
    __syncthreads();  // B1: raw tile (and Q) landed; both warpgroups are done with sK and P

    dequant_tile(smem + kOffRaw, smem + kOffK, tile_off, tid);
    wgmma::fence_proxy_async();  // sK (and Q) written by this thread -> visible to wgmma
    __syncthreads();             // B2: sK ready, sRaw free

    if (has_next) {
      issue_raw_tile(a, sbase + kOffRaw, s_valid, tile + 1, slot_next, warp, lane);
      attn_dev::cp_async_commit();
    }

    // S[64][32 wg .. 32 wg + 31] = Q K^T over 576 = 36 k16 steps.
    float s[16];
    issue_scores(s, sbase + kOffQ, sbase + kOffK, wg);
    wgmma::wgmma_wait<0>();
    wgmma::fence_operands(s);

    // Softmax (B3 inside: both warpgroups' tile maxima visible). s[4 i + 2 half + c] is column
    // 32 wg + 8 i + 2 tq + c.
    const uint8_t* valid = s_valid + (tile & 1) * kTile + 32 * wg + 2 * tq;
    softmax_step(
        s,
        [&](int i, int c) {
          const uint32_t vb = *reinterpret_cast<const uint16_t*>(valid + 8 * i);
          return ((vb >> (8 * c)) & 0xFFu) != 0;
        },
        a.scale, s_max, smem + kOffP, rows, row_m, row_l, o, [] { __syncthreads(); });
    wgmma::fence_proxy_async();  // P written by this thread -> visible to wgmma
    __syncthreads();             // B4: all of P ready

    // O[64][256 wg .. 256 wg + 255] += P V.
    issue_values(o, sbase + kOffP, sbase + kOffK, wg);
  }
  wgmma::wgmma_wait<0>();
  wgmma::fence_operands(o[0]);
  wgmma::fence_operands(o[1]);

  write_item_rows(a, t, h0, partial, o, row_m, row_l, s_sum, rows, [] { __syncthreads(); });
#endif  // MLA_WGMMA_ENABLED
}

// The probe behind runs_on (not cached).
bool probe(int device) {
  cudaFuncAttributes attr{};
  return is_compute_capability(device, 9, 0) && kernel_attributes(sparse_mqa_wgmma_kernel, &attr);
}

}  // namespace

int smem_bytes() { return kSmemBytes; }

bool runs_on(int device) {
  static PerDeviceAnswer answer(probe);
  return answer.get(device);
}

Status launch(const SparseArgs& a, dim3 grid, cudaStream_t stream) {
  MLA_CUDA_CHECK(cudaFuncSetAttribute(sparse_mqa_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  sparse_mqa_wgmma_kernel<<<grid, kThreads, kSmemBytes, stream>>>(a);
  MLA_CUDA_CHECK_LAUNCH("sparse_mqa_wgmma_kernel");
  return Status();
}

}  // namespace mla::sparse_wgmma
