// Dense MHA over a varlen batch (docs/semantics.md §4.2) for Hopper, `wgmma` implementation, the
// default on compute capability 9.0: a FlashAttention-3-style forward with warpgroup MMA, TMA
// loads, warp specialisation and register reallocation. Built only for sm_90a
// (kernels/CMakeLists.txt); launch_dense_mha (dense_mha_launcher.cu) chooses it.
//
// Semantics: the host's dense_mha with one online-softmax step per 128-key tile
// (kSoftmaxStepKeys; the host backend, `simple` and `tc` step per 64 keys), to fp32 accumulation
// order, exp's last bits (softmax_tile_masked) and out's last bit (a reciprocal per row instead of
// a division per value: at most 1 bf16 ulp, in rare values): m, the bf16 rounding of P and l
// follow that host algorithm step by step (DenseMhaMatchesHost). Both step sizes compute the same
// softmax; they differ in where P is rounded to bf16 (against the 64- or the 128-key running max),
// well within the tolerances of docs/semantics.md §8. The 128-key step is what lets the whole
// P_{t-1} V run under the softmax of S_t: 64-key steps need an O rescale, and so a wait, between
// the two halves of P V, which puts P V on the critical path (the 128-key step takes 0.95-0.99x
// the time on every dense shape, docs/performance.md).
//
// Work item = (request, 128-query tile, head; WorkItem: head-major, later query tiles of a request
// first, the last heads tile-major where a causal mask makes the items' lengths vary:
// dense_item_order.h); a CTA (384 threads) runs one item at a time. By default the grid is
// persistent, min(items, SMs) CTAs, each taking the next unclaimed item (nth_item), so that a CTA
// loads its next item's Q and first key tiles while it finishes the current one; the
// DenseWgmmaSchedule kGrid runs one CTA per item instead (looping over items only past the grid's
// x limit or the policy's CTA cap).
//   warpgroup 0, producer (setmaxnreg 24): warp 0 / 1 load the K tiles of stage 0 / 1, warp 2 / 3
//     the V tiles of stage 0 / 1; warp 0 also loads Q, and its lane 0 fetches the CTA's next item
//     and publishes it resolved to the other warps (nth_item). Its warp index comes through
//     __shfl_sync, which keeps its stage and barrier addresses in uniform registers (in its 24
//     registers they would spill and be reloaded at every barrier poll); the few item fields that
//     still spill are reloaded per tile, not per poll. Per tile, after the stage's empty mbarrier:
//     a whole tile is a TMA box per 64-column block (lane 0: arrive.expect_tx on the full
//     mbarrier, then the boxes; the other lanes arrive); a request's partial last tile is 16-byte
//     cp.async, zero-filled past its keys (each lane: wait for its copies, fence.proxy.async,
//     arrive), because the next request's keys there could hold Inf / NaN and 0 * Inf would reach
//     O. Q: TMA boxes on the q_full mbarrier (rows past the request are the next request's rows or
//     zeros, computed and never stored; rows are independent in S, softmax and P V).
//   warpgroups 1, 2, consumers (setmaxnreg 240: Q's 48 registers beside O, S and P; at 232 ptxas
//     serializes the wgmma, C7512): query rows 0..63 / 64..127 of the tile. After q_full, per key
//     tile t:
//       issue  S_t = Q K_t^T                        12 x wgmma m64n128k16, A = Q from registers
//                                                     (load_q), B = K from shared memory (K-major)
//       issue  O += P_{t-1} V_{t-1}                 8 x wgmma m64n128k16, A = P from registers,
//                                                     B = V from shared memory (MN-major, transposed)
//       wait for S_t (release K_t's stage); softmax of S_t while that P V runs;
//       wait for it (release V_{t-1}'s stage); O *= factor of tile t; P_t = bf16(p).
//     A warpgroup's last tile is narrow where none of its rows sees that tile's keys 64..127 (on
//     the causal diagonal one warpgroup of each full query tile: the first where (nk - nq) mod 128
//     is 0 or 65..127, the second where it is 1..64; unmasked, a request's last 1..64 keys): S
//     over its first 64 keys (m64n64, issue_qk<32>), the softmax over those 32 scores per thread,
//     P V over 4 k16 steps. The keys left out would be masked, p = 0, adding exactly nothing to l
//     and O for finite V (an Inf / NaN in V at such a key no longer reaches O as 0 * Inf; the host
//     skips masked keys altogether). The narrow tile is its own step with its own 32-float S
//     array: issued inside the loop's tile step, it makes ptxas serialize the wgmma (C7515).
//     Each warp copies its Q rows into registers after q_full and releases the buffer at once
//     (q_empty), so the producer loads the next item's Q while this item runs.
//   Online softmax per row on the S accumulators (4 lanes share a row: quad shuffles), in fp32,
//   p = 2^(s scale log2 e - m log2 e) and the rescale factors by ex2.approx (one FFMA and one
//   MUFU.EX2 per score: the exp's instruction count is what the tensor cores wait for), masked
//   (causal and past the request's keys) only on the halves that need it; l sums the fp32 p (per
//   thread, the quad's partials summed at the item's end); O's rescale is skipped where every
//   factor of the warp is 1.
//   out = bf16(O r), r = 1 / l rounded once per row (within an fp32 ulp of the host's division
//   before the bf16 rounding), in 16-byte stores after a quad transpose (store_row_words); lse = m
//   + logf(l); no visible key: 0 and -inf. The next item's published work item is read during the
//   epilogue (start_read, finish_read). A warpgroup whose rows need fewer key tiles than the CTA's
//   other one waits for and releases the rest without computing.
// Deadlock hazard for any reordering of the consumers' reads of published items: a warpgroup must
// hand back the key tiles it does not see before it waits for the next item, because the fetching
// warp publishes that item only after issuing the current item's last K tile.
//
// Shared memory (dynamic, 214,128 bytes, one CTA per SM), every tile in 128-byte-swizzled column
// blocks of [128 rows][64 bf16] = 16 KiB, the layout of TMA's 128-byte swizzle (descriptors:
// wgmma_device.cuh):
//   Q [128][192] 3 blocks | K[2] [128 keys][192] 3 blocks each | V[2] [128 keys][128] 2 blocks each |
//   14 mbarriers (k_full, k_empty, v_full, v_empty per stage; q_full, q_empty; sched_full,
//   sched_empty per item slot) | + up to 1 KiB to align the base.
// A third K / V stage does not fit beside Q (208 of 227 KiB).
// Descriptors: K K-major (SBO 1024, LBO unused = 16; k16 step kk: + 16 KiB * (kk / 4) +
// 32 B * (kk % 4)); V MN-major (SBO 1024 = next 8 keys, LBO 16 KiB = next 64 value columns;
// k16 step kk: + 2 KiB * kk).
//
// ptxas reports C7519 (warpgroup.arrive injected) for the first key tile's and the last P V's
// wgmma: wgmma_fence() stands before the branch that chooses the wide or the narrow sequence and
// the commit after the branches join, so ptxas repeats the fence in each branch (and adds an empty
// wgmma at the join for the commit). The build drops exactly that advisory
// (kernels/cmake/ptxas_wgmma_launcher.sh).
//
// Figures and profiles: docs/performance.md.
#include "kernels/cuda/dense_mha/dense_mha_impls.h"

#include <cuda.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/common/attention_params.h"
#include "kernels/cuda/dense_mha/dense_item_order.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_probe.h"
#include "kernels/cuda/common/tensor_map.h"
#include "kernels/cuda/dense_mha/work_schedule.h"
#include "kernels/cuda/common/wgmma_device.cuh"

namespace mla::dense_wgmma {
namespace {

constexpr int kRows = kRowsPerCta;              // 128 queries per CTA
constexpr int kKeys = 128;                      // keys per tile (loads, S = Q K^T)
using attn_dev::kLog2e;
constexpr int kConsumerWgs = 2;
constexpr int kThreads = 128 * (1 + kConsumerWgs);
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
constexpr int kBlockBytes = 128 * 128;  // one swizzled column block: 128 rows x 128 bytes
constexpr int kQBytes = (kDqk / 64) * kBlockBytes;
constexpr int kKBytes = (kDqk / 64) * kBlockBytes;
constexpr int kVBytes = (kDv / 64) * kBlockBytes;
constexpr int kOffQ = 0;
constexpr int kOffK = kOffQ + kQBytes;
constexpr int kOffV = kOffK + 2 * kKBytes;
constexpr int kOffBar = kOffV + 2 * kVBytes;
constexpr int kBarBytes = 14 * 8;  // 14 mbarriers
constexpr int kItemBytes = 64;     // one published work item (PublishedItem), in global memory
constexpr int kSmemBytes = 1024 + kOffBar + kBarBytes;
constexpr int kEmptyArrivals = 4 * kConsumerWgs;  // lane 0 of every consumer warp
constexpr int kFullArrivals = 32;                 // every lane of the loading warp
static_assert(kSmemBytes == 214128, "one CTA per SM, within the 227 KiB opt-in limit");
static_assert(kItemBytes == 8 * kWorkSlotWords / 2, "WorkSchedule's slot size");
static_assert(kRows == 64 * kConsumerWgs && kKeys == 128 && kDv == 128, "m64n128 tiles: S and O are 64 x 128");
static_assert(kSoftmaxStepKeys == kKeys, "one online-softmax step per key tile (softmax_tile_masked, issue_pv)");
// Registers per thread at launch (__launch_bounds__(384, 1): 65536 / 384 rounded down to 8; ptxas
// allocates exactly this, runs_on() checks it). The CTA's register pool gets what the producer
// releases and must cover what the consumers ask for, or setmaxnreg.inc waits forever.
constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
static_assert(kLaunchRegs == 168, "384 threads");
static_assert(128 * (kLaunchRegs - kProducerRegs) >= 128 * kConsumerWgs * (kConsumerRegs - kLaunchRegs),
              "setmaxnreg: the consumers' increase must come from the producer's release");

// Barrier addresses (shared, relative to the aligned base).
__host__ __device__ constexpr uint32_t bar_k_full(int s) { return kOffBar + 8 * s; }
__host__ __device__ constexpr uint32_t bar_k_empty(int s) { return kOffBar + 16 + 8 * s; }
__host__ __device__ constexpr uint32_t bar_v_full(int s) { return kOffBar + 32 + 8 * s; }
__host__ __device__ constexpr uint32_t bar_v_empty(int s) { return kOffBar + 48 + 8 * s; }
__host__ __device__ constexpr uint32_t bar_q_full() { return kOffBar + 64; }
__host__ __device__ constexpr uint32_t bar_q_empty() { return kOffBar + 72; }
__host__ __device__ constexpr uint32_t bar_sched_full(int s) { return kOffBar + 80 + 8 * s; }
__host__ __device__ constexpr uint32_t bar_sched_empty(int s) { return kOffBar + 96 + 8 * s; }
constexpr int kSchedReaders = 3 + 4 * kConsumerWgs;  // warps 1..3 of the producer, every consumer warp

// TMA tensor maps of the inputs, all bf16 with 128-byte swizzle and boxes of 64 elements x 128
// tokens: q_nope, q_pe, k_nope and v as [tokens][H][width] (box 64 x 1 head x 128), k_pe as
// [total_k][64] (box 64 x 128). One box fills one swizzled column block, as load_rows does.
struct TmaMaps {
  CUtensorMap q_nope, q_pe, k_nope, k_pe, v;
};

struct Range {
  int64_t begin;
  int count;
};

#if MLA_WGMMA_ENABLED

using wgmma::cp_async16;

// [cu[r], cu[r+1]) clamped to [0, total] (cu values are int32, so count fits in int).
__device__ __forceinline__ Range request_range(const int32_t* cu, int r, int64_t total) {
  int64_t b = cu[r], e = cu[r + 1];
  b = b < 0 ? 0 : (b > total ? total : b);
  e = e < b ? b : (e > total ? total : e);
  return Range{b, static_cast<int>(e - b)};
}

// Keys query i (0-based in the request) sees.
__device__ __forceinline__ int visible_keys(bool causal, int i, int nq, int nk) {
  if (!causal) return nk;
  const int64_t v = static_cast<int64_t>(i) + nk - nq + 1;
  return v < 0 ? 0 : (v > nk ? nk : static_cast<int>(v));
}

using attn_dev::pack_bf16x2;
using attn_dev::row_lse;

// Byte offset of logical 16-byte chunk `chunk` (0..7) of row `row` inside a swizzled block (rows of
// 128 bytes: the same XOR as every attention tile, attention_device.cuh).
__device__ __forceinline__ uint32_t swz(int row, int chunk) { return attn_dev::swizzled(row, chunk, 128); }

// --- producer -------------------------------------------------------------------------------------

// kKeys rows of kChunks 16-byte chunks (kChunks = 16 or 8: 32 / kChunks rows per instruction)
// from global `src` (row stride `stride` elements) into the swizzled block(s) at `dst`: chunk c of
// row j to block c / 8, row j, chunk c % 8. Rows j >= `valid` are zero-filled (`zero_src` is any
// valid global address). One warp; written for few registers (the producer runs with 24).
template <int kChunks>
__device__ __forceinline__ void load_rows(uint32_t dst, const bf16_t* src, int64_t stride, int valid,
                                          const bf16_t* zero_src, int lane) {
  constexpr int kRowsPerStep = 32 / kChunks;
  const int c = lane % kChunks;
  int j = lane / kChunks;
  dst += (c / 8) * kBlockBytes;
  src += j * stride + 8 * c;
#pragma unroll 1
  for (; j < kKeys; j += kRowsPerStep, src += kRowsPerStep * stride) {
    const bool ok = j < valid;
    cp_async16(dst + swz(j, c % 8), ok ? src : zero_src, ok ? 16 : 0);
  }
}

// --- consumer -------------------------------------------------------------------------------------

// S_t = Q K_t^T for this warpgroup's 64 rows: 12 k16 steps over the 192 dims, Q from registers
// (q[4 kk .. 4 kk + 3]: the A fragments of step kk, load_q), K from shared memory. kE = 64: the
// tile's 128 keys (m64n128). kE = 32: a narrow tile (no row of the warpgroup sees its keys
// 64..127: the warpgroup's last tile on the causal diagonal, or a request's last keys), its first
// 64 keys only (m64n64, half the tensor work; the first half of an m64n128 S's layout, s[4 i + c] =
// row c >> 1, key 8 i + 2 tq + (c & 1), i < 8).
template <int kE>
__device__ __forceinline__ void issue_qk(float (&s)[kE], const uint32_t (&q)[48], uint64_t k_desc) {
  static_assert(kE == 64 || kE == 32, "a whole or a narrow tile");
#pragma unroll
  for (int kk = 0; kk < kDqk / 16; ++kk) {
    const uint64_t step = static_cast<uint64_t>(((kk / 4) * kBlockBytes + (kk % 4) * 32) >> 4);
    if constexpr (kE == 64) {
      wgmma::wgmma_m64n128k16_rs(s, q[4 * kk], q[4 * kk + 1], q[4 * kk + 2], q[4 * kk + 3], k_desc + step, kk > 0 ? 1 : 0);
    } else {
      wgmma::wgmma_m64n64k16_rs(s, q[4 * kk], q[4 * kk + 1], q[4 * kk + 2], q[4 * kk + 3], k_desc + step, kk > 0 ? 1 : 0);
    }
  }
}

// This warp's 16 Q rows (tile rows 64 cw + 16 warp .. + 15) as wgmma A fragments, from the
// swizzled Q blocks at q_base: per k16 step kk one ldmatrix.x4, lane L addressing row L % 16 at
// columns 16 kk + 8 (L / 16) (matrices: rows 0-7 / 8-15 at columns 0-7, then at 8-15 = a0..a3).
__device__ __forceinline__ void load_q(uint32_t (&q)[48], uint32_t q_base, int first_row, int lane) {
  const int row = first_row + lane % 16;
#pragma unroll
  for (int kk = 0; kk < kDqk / 16; ++kk) {
    const int col = 16 * kk + 8 * (lane / 16);
    uint32_t r[4];
    attn_dev::ldmatrix_x4(r, q_base + (col / 64) * kBlockBytes + swz(row, (col % 64) / 8));
#pragma unroll
    for (int j = 0; j < 4; ++j) q[4 * kk + j] = r[j];
  }
}

// O += P V over the tile's 128 keys (kSteps 8), or over its first 64 (kSteps 4: a narrow tile, whose
// P is 0 past them): k16 steps; p[4 kk .. 4 kk + 3] are the A fragments of k16 step kk (keys 16 kk
// .. + 15).
template <int kSteps = kKeys / 16>
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[32], uint64_t v_desc) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const uint64_t step = static_cast<uint64_t>((kk * 16 * 128) >> 4);
    wgmma::wgmma_m64n128k16_rs_bt(o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], v_desc + step);
  }
}

// The online softmax of one 128-key tile starting at key `key0`, one step (kSoftmaxStepKeys): the
// host's dense_mha with softmax_keys = 128. This thread holds rows g and g + 8 of its warp:
// s[4 i + c] = (row c >> 1, key 8 i + 2 tq + (c & 1)); keys 0..63 are i < 8 (half 0), 64..127
// i >= 8 (half 1; the halves matter only for the masks). On return s holds the fp32 p (masked
// keys: 0), m is the host's after the step, and factor = exp(m_old - m_new) (1 when m is
// unchanged), by which O is multiplied before P V adds this tile.
//   l: this thread's partial row sums (its 32 keys of the 128; 16 of 64 with kE = 32), rescaled by
//   the row's factor; the quad's four partials are summed once per item, before the epilogue,
//   instead of per tile (two shuffle rounds off every tile's softmax chain: 0.5-3 % faster,
//   docs/performance.md). l's fp32 sum runs in another order than the host's.
//   Scale: the maxima are taken over the unscaled scores and then scaled (scale > 0, validated:
//   rounding is monotonic, so this is the host's max of the scaled scores), and the scale folds into
//   the exp's FMA: p = 2^(s (scale log2 e) - m log2 e), one FFMA and one MUFU.EX2 per score.
//   Relative to exp(scale s - m): ~2 ulp from ex2.approx plus the rounding of scale log2 e and of
//   m log2 e (one factor for all p of a row while its m stays; in lse ~1e-7 |m|). Masked scores
//   (-inf) give +0; a row without a visible key yet has ref = 0 (exp_ref). Limit: |m| must stay
//   below FLT_MAX / log2(e) ~ 2.36e38 (beyond, m log2 e overflows: p = 0, or NaN for m < -2.36e38);
//   scores that large are outside any bf16 attention and would differ from the host, which
//   mla-check reports.
//   Masks (kMask0 / kMask1 for the halves that need one): key 8 i + (c & 1) >= lim[row] is masked,
//   lim = the row's visible keys - key0 - 2 tq.
//   kE = 32: a narrow tile's keys 0..63 only (issue_qk<32>); its keys 64..127 would all be masked,
//   p = 0, which adds exactly nothing to l and (issue_pv<4>) to O.
template <bool kMask0, bool kMask1, int kE = 64>
__device__ __forceinline__ void softmax_tile_masked(float (&s)[kE], float (&m)[2], float (&l)[2], float (&factor)[2],
                                                    float scale, int lim0, int lim1) {
  constexpr int kParts = 4;  // independent partial maxima / sums per row: short chains
  float pmax[2][kParts];     // [row][part]
#pragma unroll
  for (int i = 0; i < 2 * kParts; ++i) (&pmax[0][0])[i] = -INFINITY;
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    const int half = e >> 5, c = e & 3;
    const bool mask = half == 0 ? kMask0 : kMask1;
    float x = s[e];
    if (mask && 8 * (e >> 2) + (c & 1) >= (c < 2 ? lim0 : lim1)) x = -INFINITY;
    s[e] = x;
    pmax[c >> 1][(e >> 2) % kParts] = fmaxf(pmax[c >> 1][(e >> 2) % kParts], x);
  }
  float tmax[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) tmax[r] = fmaxf(fmaxf(pmax[r][0], pmax[r][1]), fmaxf(pmax[r][2], pmax[r][3]));
#pragma unroll
  for (int d = 1; d <= 2; d *= 2) {
#pragma unroll
    for (int r = 0; r < 2; ++r) tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xFFFFFFFFu, tmax[r], d));
  }
  float ref2[2];  // [row]: m log2 e after the step
  // The rescale factors by ex2.approx as well (2^((m_old - m_new) log2 e); -inf -> +0, subnormal
  // factors flushed to 0): expf's range reduction sits on the softmax's critical path, which is
  // what a key tile waits for (1.6-4.6 % faster than expf on every dense shape,
  // docs/performance.md).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    factor[r] = attn_dev::raise_row_max(m[r], tmax[r] * scale, attn_dev::exp_by_ex2);
    ref2[r] = attn_dev::exp_ref(m[r]) * kLog2e;
  }
  const float mul = scale * kLog2e;
  float psum[2][kParts];
#pragma unroll
  for (int i = 0; i < 2 * kParts; ++i) (&psum[0][0])[i] = 0.0f;
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    const int row = (e >> 1) & 1;
    const float p = attn_dev::ex2_approx(fmaf(s[e], mul, -ref2[row]));
    psum[row][(e >> 2) % kParts] += p;
    s[e] = p;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) l[r] = l[r] * factor[r] + ((psum[r][0] + psum[r][1]) + (psum[r][2] + psum[r][3]));
}

// softmax_tile_masked with the masks the tile needs: a half is masked where the warpgroup's first
// row (the fewest visible keys, vis_first) does not see all of it.
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&m)[2], float (&l)[2], float (&factor)[2], float scale,
                                             int key0, int vis_first, int vis_lo, int vis_hi, int tq) {
  const int lim0 = vis_lo - key0 - 2 * tq, lim1 = vis_hi - key0 - 2 * tq;
  if (key0 + 64 > vis_first) {
    softmax_tile_masked<true, true>(s, m, l, factor, scale, lim0, lim1);
  } else if (key0 + 128 > vis_first) {
    softmax_tile_masked<false, true>(s, m, l, factor, scale, lim0, lim1);
  } else {
    softmax_tile_masked<false, false>(s, m, l, factor, scale, lim0, lim1);
  }
}

// O *= factor per row; skipped when no row of the warp raised its max (every factor exactly 1: the
// identity), which after the first tiles is the common case.
__device__ __forceinline__ void scale_rows(float (&o)[64], const float (&factor)[2]) {
  if (!__any_sync(0xFFFFFFFFu, factor[0] != 1.0f || factor[1] != 1.0f)) return;
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] *= factor[(i >> 1) & 1];
}

// The S accumulators of a tile with kE scores per thread: `wide` (64) or `narrow` (32).
template <int kE>
__device__ __forceinline__ auto& scores_of(float (&wide)[64], float (&narrow)[32]) {
  if constexpr (kE == 64) {
    return wide;
  } else {
    return narrow;
  }
}

// P's A fragments from the softmax's p: all 32 words from a 128-key tile, p[0..15] from a narrow
// tile's 32 values (p[16..31] then unused: issue_pv<4>).
template <int kE>
__device__ __forceinline__ void pack_p(uint32_t (&p)[32], const float (&s)[kE]) {
#pragma unroll
  for (int j = 0; j < kE / 2; ++j) p[j] = pack_bf16x2(s[2 * j], s[2 * j + 1]);
}

// One row of out from this thread's words (bf16 pairs) w[i] = columns 8 i + 2 tq, + 1, i = 0..15
// (the 4 lanes tq = 0..3 of a quad share the row), in 16-byte stores: per 4 words a 4 x 4
// transpose across the quad, after which lane tq holds columns 8 (4 j + tq) .. + 7. A store
// instruction of the warp then writes 64 contiguous bytes per row instead of 16: the 4-byte stores
// had queued in the LSU (ncu: long-scoreboard stalls on their address registers at the
// epilogue's end; docs/performance.md). Every lane of the warp must call this (shuffles); only
// lanes with `store` write.
__device__ __forceinline__ void store_row_words(bf16_t* row, const uint32_t (&w)[16], int tq, bool store) {
  const bool t0 = tq & 1, t1 = tq & 2;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t* b = w + 4 * j;  // M[tq][k] = b[k]; wanted here: M[0..3][tq]
    // Lanes tq, tq ^ 1: keep the words with (k & 1) == t0, swap the others.
    const uint32_t r0 = __shfl_xor_sync(0xFFFFFFFFu, t0 ? b[0] : b[1], 1);
    const uint32_t r1 = __shfl_xor_sync(0xFFFFFFFFu, t0 ? b[2] : b[3], 1);
    // c0 = M[tq][t0], c1 = M[tq ^ 1][t0], c2 = M[tq][2 + t0], c3 = M[tq ^ 1][2 + t0]
    const uint32_t c0 = t0 ? b[1] : b[0], c1 = r0, c2 = t0 ? b[3] : b[2], c3 = r1;
    // Lanes tq, tq ^ 2: keep the pair for k = tq, swap the other.
    const uint32_t v0 = __shfl_xor_sync(0xFFFFFFFFu, t1 ? c0 : c2, 2);
    const uint32_t v1 = __shfl_xor_sync(0xFFFFFFFFu, t1 ? c1 : c3, 2);
    const uint32_t k0 = t1 ? c2 : c0, k1 = t1 ? c3 : c1;
    // M[tq ^ x][tq] for x = 0, 1, 2, 3 is k0, k1, v0, v1; put M[s][tq] at s.
    const uint32_t a0 = t0 ? k1 : k0, a1 = t0 ? k0 : k1, a2 = t0 ? v1 : v0, a3 = t0 ? v0 : v1;
    const uint4 v = t1 ? make_uint4(a2, a3, a0, a1) : make_uint4(a0, a1, a2, a3);
    if (store) *reinterpret_cast<uint4*>(row + 8 * (4 * j + tq)) = v;
  }
}

// One work item: a (request, 128-query tile, head), numbered tile-major within a request (later
// query tiles first: the longest causal rows start first), then requests, then heads, except the
// last a.tail_heads heads, numbered tile-major across their requests and heads
// (kernels/cuda/dense_mha/dense_item_order.h). CTAs take items in this order (persistent: the next
// unclaimed one; grid: CTA c takes item c, and c + gridDim.x, ... past the grid's x limit), so
// that the CTAs running at once share their heads' K / V in L2 and the last claims are short.
struct WorkItem {
  int r, h, i0;   // request, head, first query row of the tile (in the request)
  Range rq, rk;   // the request's queries and keys
  int rows;       // query rows of the tile (<= 0: empty item, every role skips it)
  int n_kt;       // key tiles the CTA loads (those its last row sees)
};

template <Debug kDebug>
__device__ __forceinline__ WorkItem work_item(const DenseArgs& a, int64_t w) {
  WorkItem it;
  const DenseItemCoords c = dense_item_coords(w, a.q_tiles, a.num_reqs, a.num_heads, a.tail_heads);
  const int x = static_cast<int>(c.slot);
  it.h = c.head;
  it.r = x / a.q_tiles;
  const int tile = a.q_tiles - 1 - x % a.q_tiles;
  it.rq = request_range(a.cu_q, it.r, a.total_q);
  it.rk = request_range(a.cu_k, it.r, a.total_k);
  it.i0 = tile * kRows;
  it.rows = it.rq.count - it.i0 < kRows ? it.rq.count - it.i0 : kRows;
  it.n_kt = 0;
  if (it.rows > 0) {
    it.n_kt = (visible_keys(a.causal, it.i0 + it.rows - 1, it.rq.count, it.rk.count) + kKeys - 1) / kKeys;
    if constexpr (kDebug != Debug::kNone) it.n_kt = it.rk.count > 0 ? 1 : 0;
  }
  return it;
}

// A work item as the fetching warp publishes it (kDynamic): the index and its WorkItem, resolved
// once (request ranges from cu_seqlens, the 64-bit divisions) instead of by every warp. Four
// 16-byte chunks (52 bytes of fields, zero padding); past the last item only w is meaningful.
struct alignas(16) PublishedItem {
  long long w;  // >= the item count: no more work
  long long rq_begin, rk_begin;
  int r, h, i0, rows, n_kt, rq_count, rk_count;
};
static_assert(sizeof(PublishedItem) == kItemBytes, "the slot size");

struct ItemView {
  int64_t w;    // >= the item count: no more work (it unset)
  WorkItem it;
};

// The CTA's slot s (0, 1) of published items in a.work_slots (16-byte aligned: WorkSchedule).
__device__ __forceinline__ PublishedItem* item_slot(const DenseArgs& a, int s) {
  return reinterpret_cast<PublishedItem*>(a.work_slots + kWorkSlotWords * static_cast<int64_t>(blockIdx.x)) + s;
}

// A reader warp's read of published item n in two parts (the dynamic schedule; see nth_item):
// start_read waits for sched_full[n & 1] and issues the slot's four 16-byte loads; finish_read
// unpacks the item and frees the slot (__syncwarp, then lane 0's release arrive on
// sched_empty[n & 1], which orders the warp's loads before the slot's next store, as in
// nth_item). The consumers start item n + 1's read before item n's epilogue and finish it after,
// so that the loads' round trip to L2 overlaps the epilogue.
__device__ __forceinline__ PublishedItem start_read(uint32_t sbase, const DenseArgs& a, int n) {
  const int s = n & 1;
  wgmma::mbar_wait(sbase + bar_sched_full(s), (n >> 1) & 1);
  PublishedItem p;
  const volatile uint4* src = reinterpret_cast<const volatile uint4*>(item_slot(a, s));
#pragma unroll
  for (int i = 0; i < kItemBytes / 16; ++i) reinterpret_cast<uint4*>(&p)[i] = wgmma::ld_volatile_global_v4(src + i);
  return p;
}

__device__ __forceinline__ ItemView finish_read(const PublishedItem& p, uint32_t sbase, int n, int lane) {
  ItemView v;
  v.w = p.w;
  v.it.r = p.r;
  v.it.h = p.h;
  v.it.i0 = p.i0;
  v.it.rq = Range{p.rq_begin, p.rq_count};
  v.it.rk = Range{p.rk_begin, p.rk_count};
  v.it.rows = p.rows;
  v.it.n_kt = p.n_kt;
  __syncwarp();
  if (lane == 0) wgmma::mbar_arrive(sbase + bar_sched_empty(n & 1));
  return v;
}

// The CTA's n-th work item as every warp sees it (every warp asks for n = 0, 1, ... in turn until
// w >= the item count). kDynamic false: items c, c + gridDim.x, ... of CTA c, each warp resolving
// its own WorkItem. kDynamic true: the next unclaimed item, atomicAdd on a.work_counter[0] by
// lane 0 of the producer's warp 0, which resolves it (its warp's lanes too, for their own use) and
// publishes it, resolved, in the CTA's slot n & 1 of a.work_slots (global memory: after lane 0's
// wait on sched_empty[n & 1] and a __syncwarp, lanes 0..3 of the warp store one 16-byte chunk
// each, then __syncwarp and lane 0's arrive on sched_full[n & 1]
// (1 arrival, release) publish it to the other kSchedReaders warps (acquire), which read it with
// four 16-byte loads, and whose lane 0 each arrive on sched_empty[n & 1] after reading (after
// __syncwarp), which frees the slot for item n + 2. The ordering is the mbarriers' release /
// acquire at CTA scope; the volatile accesses only keep the compiler from moving or merging them.
// Launches that share the counters and slots must not overlap (launch(): one state per stream).
//   Why global memory: racecheck does not follow mbarrier synchronization of generic
// shared-memory accesses and reported a slot in shared memory as a hazard, whether written by the
// fetching thread or by a bulk copy that completes sched_full (the latter is ~1 % faster on the
// short shapes; docs/performance.md).
//   The CTA's terminating fetch (an index past the last item) also counts it in work_counter[1];
// the last CTA to count resets both counters to 0 for the next launch (every CTA has made its last
// atomicAdd on work_counter[0] by then: the fence orders it before the count).
// kProducer: called from the producer warpgroup (whose warp 0 fetches); the consumers' copy has no
// fetching code (keeping it out of the consumers' register allocation around their wgmma).
template <Debug kDebug, bool kDynamic, bool kProducer>
__device__ __forceinline__ ItemView nth_item(const DenseArgs& a, uint32_t sbase, int n, int64_t items, int cta_warp,
                                             int lane) {
  ItemView v;
  if constexpr (!kDynamic) {
    v.w = static_cast<int64_t>(blockIdx.x) + static_cast<int64_t>(n) * gridDim.x;
    if (v.w < items) v.it = work_item<kDebug>(a, v.w);
    return v;
  } else {
    const int s = n & 1;
    if (!kProducer || cta_warp != 0) return finish_read(start_read(sbase, a, n), sbase, n, lane);
    int64_t w = 0;
    if (lane == 0) {
      if (n >= 2) wgmma::mbar_wait(sbase + bar_sched_empty(s), ((n >> 1) - 1) & 1);
      w = static_cast<int64_t>(atomicAdd(a.work_counter, 1ULL));
      // A clean launch sees at most items + gridDim.x - 1 here and fewer than gridDim.x CTAs
      // done below. A best-effort guard against counters shared by overlapping launches (which
      // launch() rules out) or left dirty: it traps where it can tell, but a dirty counter
      // below `items` goes unnoticed (items skipped).
      if (w >= items + gridDim.x) __trap();
      if (w >= items) {
        __threadfence();
        const unsigned long long done = atomicAdd(a.work_counter + 1, 1ULL);
        if (done >= gridDim.x) __trap();
        if (done == gridDim.x - 1) {
          __threadfence();
          a.work_counter[0] = 0;
          a.work_counter[1] = 0;
        }
      }
    }
    v.w = __shfl_sync(0xFFFFFFFFu, w, 0);
    if (v.w < items) v.it = work_item<kDebug>(a, v.w);
    // Lane c < 4 stores chunk c (every lane of the warp resolved the item; one lane storing all 64
    // bytes spilled in the producer's 24 registers). Ordering: lanes 1..3's stores must follow
    // lane 0's acquire of sched_empty (the readers' loads of item n - 2 from this slot) and precede
    // its release on sched_full: __syncwarp before and after (a shuffle orders no memory).
    __syncwarp();
    if (lane < kItemBytes / 16) {
      PublishedItem p{};
      p.w = v.w;
      if (v.w < items) {
        p.rq_begin = v.it.rq.begin;
        p.rk_begin = v.it.rk.begin;
        p.r = v.it.r;
        p.h = v.it.h;
        p.i0 = v.it.i0;
        p.rows = v.it.rows;
        p.n_kt = v.it.n_kt;
        p.rq_count = v.it.rq.count;
        p.rk_count = v.it.rk.count;
      }
      const uint4* chunks = reinterpret_cast<const uint4*>(&p);
      const uint4 c = lane == 0 ? chunks[0] : lane == 1 ? chunks[1] : lane == 2 ? chunks[2] : chunks[3];
      wgmma::st_volatile_global_v4(reinterpret_cast<volatile uint4*>(item_slot(a, s)) + lane, c);
    }
    __syncwarp();
    if (lane == 0) wgmma::mbar_arrive(sbase + bar_sched_full(s));  // release: the warp's stores (ordered by __syncwarp)
    return v;
  }
}

#endif  // MLA_WGMMA_ENABLED

template <Debug kDebug, bool kDynamic>
__global__ void __launch_bounds__(kThreads, 1) dense_mha_wgmma_kernel(const DenseArgs a, const __grid_constant__ TmaMaps maps) {
#if MLA_WGMMA_ENABLED
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t sbase = (wgmma::smem_u32(smem_raw) + 1023u) & ~1023u;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  const int64_t H = a.num_heads;
  const int64_t items = static_cast<int64_t>(a.q_tiles) * a.num_reqs * a.num_heads;
  const int cta_warp = tid / 32;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      wgmma::mbar_init(sbase + bar_k_full(s), kFullArrivals);
      wgmma::mbar_init(sbase + bar_v_full(s), kFullArrivals);
      wgmma::mbar_init(sbase + bar_k_empty(s), kEmptyArrivals);
      wgmma::mbar_init(sbase + bar_v_empty(s), kEmptyArrivals);
    }
    wgmma::mbar_init(sbase + bar_q_full(), 1);
    wgmma::mbar_init(sbase + bar_q_empty(), kEmptyArrivals);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      wgmma::mbar_init(sbase + bar_sched_full(s), 1);
      wgmma::mbar_init(sbase + bar_sched_empty(s), kSchedReaders);
    }
    wgmma::mbar_init_fence();  // TMA completes these barriers (async proxy)
  }
  __syncthreads();

  // Key tile t of an item is the CTA's key tile g = g_base + t (g_base: the key tiles of its earlier
  // items): stage g & 1, and the (g >> 1)-th use of that stage, whose phase parity is (g >> 1) & 1.
  // The Q buffer's u-th use (`uses`: the non-empty items so far) has parity u & 1.

  // ---------------------------------------------------------------- producer warpgroup
  if (wg == 0) {
    wgmma::setmaxnreg_dec<kProducerRegs>();
    // The warp index through __shfl_sync from lane 0 (as the consumers take theirs): ptxas then
    // keeps the stage, buffer and barrier addresses below in uniform registers. With the plain
    // index they live in the producer's 24 registers and spill, and the empty-barrier spin
    // reloads its address from local memory on every poll.
    const int pwarp = __shfl_sync(0xFFFFFFFFu, warp, 0);
    const int stage = pwarp & 1;
    const bool is_v = pwarp >= 2;
    const uint32_t dst = sbase + (is_v ? kOffV + stage * kVBytes : kOffK + stage * kKBytes);
    const uint32_t full = sbase + (is_v ? bar_v_full(stage) : bar_k_full(stage));
    const uint32_t empty = sbase + (is_v ? bar_v_empty(stage) : bar_k_empty(stage));
    int64_t g_base = 0;
    int uses = 0;  // non-empty items so far
    for (int n = 0;; ++n) {
      const ItemView view = nth_item<kDebug, kDynamic, true>(a, sbase, n, items, pwarp, lane);
      if (view.w >= items) break;
      const WorkItem& it = view.it;
      if (it.rows <= 0) continue;
      if (pwarp == 0) {
        // The item's Q rows (past the request: the next request's rows, or zeros past total_q;
        // their outputs are never stored), once every consumer warp has copied the previous item's Q into registers.
        if (uses > 0) wgmma::mbar_wait(sbase + bar_q_empty(), (uses - 1) & 1);
        if (lane == 0) {
          const uint32_t q_full = sbase + bar_q_full();
          const int row = static_cast<int>(it.rq.begin + it.i0);
          wgmma::mbar_arrive_expect_tx(q_full, kQBytes);
          wgmma::tma_load_3d(sbase + kOffQ, &maps.q_nope, 0, it.h, row, q_full);
          wgmma::tma_load_3d(sbase + kOffQ + kBlockBytes, &maps.q_nope, 64, it.h, row, q_full);
          wgmma::tma_load_3d(sbase + kOffQ + 2 * kBlockBytes, &maps.q_pe, 0, it.h, row, q_full);
        }
      }
      ++uses;
      for (int t = 0; t < it.n_kt; ++t) {
        const int64_t g = g_base + t;
        if ((g & 1) != stage) continue;
        if (g >= 2) wgmma::mbar_wait(empty, ((g >> 1) - 1) & 1);  // consumers released tile g - 2
        const int64_t tok = it.rk.begin + static_cast<int64_t>(t) * kKeys;
        const int valid = it.rk.count - t * kKeys;  // keys of the tile inside the request
        if (valid >= kKeys) {
          // A whole tile: lane 0 issues the boxes, the other lanes only arrive (the phase also
          // waits for the bytes).
          if (lane == 0) {
            wgmma::mbar_arrive_expect_tx(full, is_v ? kVBytes : kKBytes);
            const int row = static_cast<int>(tok);
            if (is_v) {
              wgmma::tma_load_3d(dst, &maps.v, 0, it.h, row, full);
              wgmma::tma_load_3d(dst + kBlockBytes, &maps.v, 64, it.h, row, full);
            } else {
              wgmma::tma_load_3d(dst, &maps.k_nope, 0, it.h, row, full);
              wgmma::tma_load_3d(dst + kBlockBytes, &maps.k_nope, 64, it.h, row, full);
              wgmma::tma_load_2d(dst + 2 * kBlockBytes, &maps.k_pe, 0, row, full);
            }
          } else {
            wgmma::mbar_arrive(full);
          }
          continue;
        }
        // A request's partial last tile: cp.async with zero fill past its keys (the next request's
        // keys there could hold Inf / NaN, and 0 * Inf would reach O through P V).
        if (is_v) {
          load_rows<kDv / 8>(dst, a.v + tok * a.v_stride + it.h * kDv, a.v_stride, valid, a.v, lane);
        } else {
          load_rows<kDn / 8>(dst, a.k_nope + tok * a.k_nope_stride + it.h * kDn, a.k_nope_stride, valid, a.k_nope, lane);
          load_rows<kDr / 8>(dst + 2 * kBlockBytes, a.k_pe + tok * a.k_pe_stride, a.k_pe_stride, valid, a.k_pe, lane);
        }
        wgmma::cp_async_commit();
        wgmma::cp_async_wait_all();
        wgmma::fence_proxy_async();
        wgmma::mbar_arrive(full);
      }
      g_base += it.n_kt;
    }
    return;
  }

  // ---------------------------------------------------------------- consumer warpgroups
  wgmma::setmaxnreg_inc<kConsumerRegs>();
  // Warp-uniform values through __shfl_sync from lane 0, so that ptxas can keep what derives from
  // them (the wgmma descriptors) in uniform registers instead of moving them there per wgmma.
  const int cw = __shfl_sync(0xFFFFFFFFu, wg - 1, 0);  // rows 64 cw .. 64 cw + 63 of each tile
  const int g = lane / 4, tq = lane % 4;
  const int row_lo = 64 * cw + 16 * warp + g;  // this thread's rows (tile-local): row_lo, row_lo + 8
  const uint64_t k_desc0 = wgmma::desc_sw128(sbase + kOffK, 16, 1024);
  const uint64_t v_desc0 = wgmma::desc_sw128(sbase + kOffV, kBlockBytes, 1024);
  const uint64_t k_stage_step = kKBytes >> 4, v_stage_step = kVBytes >> 4;
  const float scale = a.scale;
  int64_t g_base = 0;
  int uses = 0;
  ItemView next = nth_item<kDebug, kDynamic, false>(a, sbase, 0, items, cta_warp, lane);
  for (int n = 0;; ++n) {
    const ItemView view = next;
    if (view.w >= items) break;
    const WorkItem it = view.it;
    if (it.rows <= 0) {
      next = nth_item<kDebug, kDynamic, false>(a, sbase, n + 1, items, cta_warp, lane);
      continue;
    }
    const int nq = it.rq.count, nk = it.rk.count;
    const int wg_rows = it.rows - 64 * cw < 0 ? 0 : (it.rows - 64 * cw > 64 ? 64 : it.rows - 64 * cw);
    const int vis_last = wg_rows == 0 ? 0 : visible_keys(a.causal, it.i0 + 64 * cw + wg_rows - 1, nq, nk);
    int n_kt_wg = (vis_last + kKeys - 1) / kKeys;
    // The warpgroup's last tile is narrow where none of its rows sees that tile's keys 64..127
    // (issue_qk<32>; the cases: the header). vis_last bounds every row's keys (visible_keys grows
    // with the row); rows past the request may see more, but they are not stored.
    bool narrow = n_kt_wg > 0 && vis_last - (n_kt_wg - 1) * kKeys <= 64;
    if constexpr (kDebug != Debug::kNone) {
      n_kt_wg = wg_rows == 0 ? 0 : it.n_kt;
      narrow = false;
    }
    auto stage_of = [&](int t) { return __shfl_sync(0xFFFFFFFFu, static_cast<int>((g_base + t) & 1), 0); };
    auto parity_of = [&](int t) { return static_cast<uint32_t>(((g_base + t) >> 1) & 1); };

    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    // Q: waited for even when unused (its phases stay in step); copied into registers and released
    // at once, so that the producer loads the next item's Q while this one runs.
    wgmma::mbar_wait(sbase + bar_q_full(), uses & 1);
    ++uses;
    uint32_t q[48];
    if (n_kt_wg > 0) load_q(q, sbase + kOffQ, 64 * cw + 16 * warp, lane);
    // The warp's ldmatrix reads (generic proxy) before the producer's TMA overwrite (async proxy).
    wgmma::fence_proxy_async();
    __syncwarp();
    if (lane == 0) wgmma::mbar_arrive(sbase + bar_q_empty());

    if (n_kt_wg > 0) {
      const int vis_lo = visible_keys(a.causal, it.i0 + row_lo, nq, nk);
      const int vis_hi = visible_keys(a.causal, it.i0 + row_lo + 8, nq, nk);
      const int vis_first = visible_keys(a.causal, it.i0 + 64 * cw, nq, nk);  // fewest keys in the warpgroup

      float s[64];
      uint32_t p[32];
      float factor[2] = {1.0f, 1.0f};

      // Key tile 0 (a narrow one where it is the warpgroup's only tile).
      const int st0 = stage_of(0);
      wgmma::mbar_wait(sbase + bar_k_full(st0), parity_of(0));
      wgmma::wgmma_fence();
      if (narrow && n_kt_wg == 1) {
        float sn[32];
        issue_qk(sn, q, k_desc0 + st0 * k_stage_step);
        wgmma::wgmma_commit();
        wgmma::wgmma_wait<0>();
        wgmma::fence_operands(sn);
        if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(st0));
        softmax_tile_masked<true, true, 32>(sn, m, l, factor, scale, vis_lo - 2 * tq, vis_hi - 2 * tq);
        pack_p(p, sn);
      } else {
        issue_qk(s, q, k_desc0 + st0 * k_stage_step);
        wgmma::wgmma_commit();
        wgmma::wgmma_wait<0>();
        wgmma::fence_operands(s);
        if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(st0));
        if constexpr (kDebug == Debug::kValues) {
#pragma unroll
          for (int i = 0; i < 64; ++i) s[i] = 8 * (i / 4) + 2 * tq + (i & 1) == row_lo + 8 * ((i >> 1) & 1) ? 1.0f : 0.0f;
          m[0] = m[1] = 0.0f;
          l[0] = l[1] = tq == 0 ? 1.0f : 0.0f;
        } else if constexpr (kDebug == Debug::kNone) {
          softmax_tile(s, m, l, factor, scale, 0, vis_first, vis_lo, vis_hi, tq);  // O is 0: no rescale
        }
        pack_p(p, s);
      }
      if constexpr (kDebug == Debug::kScores) {
#pragma unroll
        for (int i = 0; i < 64; ++i) o[i] = s[i] * scale;
        m[0] = m[1] = 0.0f;
        l[0] = l[1] = tq == 0 ? 1.0f : 0.0f;  // partial sums (softmax_tile_masked): the quad's sum to 1
        wgmma::mbar_wait(sbase + bar_v_full(st0), parity_of(0));  // V tile 0 unused: released unread
        if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(st0));
      } else {
        // Tile t: S_t = Q K_t^T, then P_{t-1} V_{t-1}, which runs with the softmax of S_t; O is
        // rescaled for tile t once that P V is done. kE: the scores per thread, 64 (a whole tile)
        // or 32 (a narrow one: issue_qk<32>, P V over its first 64 keys after the loop).
        auto key_tile = [&](const int t, auto scores) {
          constexpr int kE = decltype(scores)::value;
          const int st = stage_of(t), pst = stage_of(t - 1);
          // Through __shfl_sync for the same reason as cw: uniform registers for P V's descriptors.
          const uint64_t v_desc = __shfl_sync(0xFFFFFFFFu, static_cast<unsigned long long>(v_desc0 + pst * v_stage_step), 0);
          wgmma::mbar_wait(sbase + bar_k_full(st), parity_of(t));
          wgmma::mbar_wait(sbase + bar_v_full(pst), parity_of(t - 1));
          float narrow_s[32];
          auto& st_s = scores_of<kE>(s, narrow_s);
          wgmma::wgmma_fence();
          issue_qk(st_s, q, k_desc0 + st * k_stage_step);
          wgmma::wgmma_commit();
          issue_pv(o, p, v_desc);
          wgmma::wgmma_commit();
          wgmma::wgmma_wait<1>();  // S_t done; P V may still run
          wgmma::fence_operands(st_s);
          if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(st));
          if constexpr (kE == 64) {
            softmax_tile(st_s, m, l, factor, scale, t * kKeys, vis_first, vis_lo, vis_hi, tq);
          } else {
            softmax_tile_masked<true, true, 32>(st_s, m, l, factor, scale, vis_lo - t * kKeys - 2 * tq, vis_hi - t * kKeys - 2 * tq);
          }
          wgmma::wgmma_wait<0>();
          wgmma::fence_operands(o);
          wgmma::fence_operands(p);
          if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(pst));
          scale_rows(o, factor);
          pack_p(p, st_s);
        };
        const int wide_end = narrow ? n_kt_wg - 1 : n_kt_wg;
        for (int t = 1; t < wide_end; ++t) key_tile(t, std::integral_constant<int, 64>{});
        if (narrow && n_kt_wg > 1) key_tile(n_kt_wg - 1, std::integral_constant<int, 32>{});

        // P V of the warpgroup's last tile (a narrow tile's first 64 keys only).
        const int stl = stage_of(n_kt_wg - 1);
        const uint64_t v_desc = v_desc0 + stl * v_stage_step;
        wgmma::mbar_wait(sbase + bar_v_full(stl), parity_of(n_kt_wg - 1));
        wgmma::wgmma_fence();
        if (narrow) {
          issue_pv<4>(o, p, v_desc);
        } else {
          issue_pv(o, p, v_desc);
        }
        wgmma::wgmma_commit();
        wgmma::wgmma_wait<0>();
        wgmma::fence_operands(o);
        wgmma::fence_operands(p);
        if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(stl));
      }
    }
    // Tiles the CTA loads that this warpgroup's rows do not see: take them and hand them back.
    for (int t = n_kt_wg; t < it.n_kt; ++t) {
      const int st = stage_of(t);
      wgmma::mbar_wait(sbase + bar_k_full(st), parity_of(t));
      if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(st));
      wgmma::mbar_wait(sbase + bar_v_full(st), parity_of(t));
      if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(st));
    }
    g_base += it.n_kt;

    // Item n + 1's read starts here and ends after the epilogue (start_read).
    PublishedItem pending;
    if constexpr (kDynamic) pending = start_read(sbase, a, n + 1);

    // The rows' l from the quad's partial sums (softmax_tile_masked).
#pragma unroll
    for (int d = 1; d <= 2; d *= 2) {
#pragma unroll
      for (int r = 0; r < 2; ++r) l[r] += __shfl_xor_sync(0xFFFFFFFFu, l[r], d);
    }
    // Epilogue (runs while the producer loads the next item's Q and key tiles): this thread's two
    // rows, columns 8 i + 2 tq, + 1. out = bf16(o r), r = 1 / l rounded once per row: one multiply
    // per value, within an fp32 ulp of normalize()'s division before the bf16 rounding, so at most
    // one bf16 ulp from it, in rare values. A row without a visible key (l = 0) is 0, as
    // normalize() gives, also where o is not (an inf or NaN value times a masked p = 0).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_lo + 8 * half;
      const bool stored = row < it.rows;
      const int64_t t = it.rq.begin + it.i0 + (stored ? row : 0);
      const bool seen = l[half] != 0.0f;
      const float r = seen ? __frcp_rn(l[half]) : 0.0f;
      uint32_t w[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) w[i] = seen ? pack_bf16x2(o[4 * i + 2 * half] * r, o[4 * i + 2 * half + 1] * r) : 0u;
      // Rows past the request are not stored; the lane exchange runs in every lane.
      store_row_words(a.out + (t * H + it.h) * kDv, w, tq, stored);
      if (stored && tq == 0) a.lse[t * H + it.h] = row_lse(m[half], l[half]);
    }
    if constexpr (kDynamic) next = finish_read(pending, sbase, n + 1, lane);
    else next = nth_item<kDebug, kDynamic, false>(a, sbase, n + 1, items, cta_warp, lane);
  }
#endif  // MLA_WGMMA_ENABLED
}

}  // namespace

int smem_bytes() { return kSmemBytes; }

namespace {

using Kernel = void (*)(const DenseArgs, const TmaMaps);

// The probe behind runs_on (not cached).
bool probe(int device) {
  if (!is_compute_capability(device, 9, 0)) return false;
  const Kernel kernels[] = {dense_mha_wgmma_kernel<Debug::kNone, false>, dense_mha_wgmma_kernel<Debug::kNone, true>,
                            dense_mha_wgmma_kernel<Debug::kScores, false>, dense_mha_wgmma_kernel<Debug::kValues, false>};
  for (auto kernel : kernels) {
    cudaFuncAttributes attr{};
    if (!kernel_attributes(kernel, &attr)) return false;
    // Launched with the register count the setmaxnreg budget assumes.
    if (attr.numRegs != kLaunchRegs) return false;
  }
  return true;
}

// The tensor maps of `a` (TmaMaps). Fails only where the driver cannot encode them: launch()'s
// contract (16-byte aligned pointers, token strides multiples of 8 elements) is what TMA needs.
Status make_maps(const DenseArgs& a, TmaMaps* maps) {
  *maps = TmaMaps{};
  // Extents of at least 1: a map is encoded even when there are no keys (no tile is then loaded).
  auto extent = [](int64_t n) { return static_cast<cuuint64_t>(n > 0 ? n : 1); };
  const cuuint64_t heads = extent(a.num_heads), queries = extent(a.total_q), keys = extent(a.total_k);
  constexpr auto kElem = static_cast<cuuint64_t>(sizeof(bf16_t));
  auto token_stride = [&](int64_t elements) { return static_cast<cuuint64_t>(elements) * kElem; };
  const cuuint32_t box3[3] = {64, 1, kKeys};  // 64 elements x 1 head x 128 tokens
  const cuuint32_t box2[2] = {64, kKeys};
  static_assert(kRows == kKeys, "Q and key tiles share the box");
  const cuuint64_t q_nope_dims[3] = {kDn, heads, queries}, q_nope_strides[2] = {kDn * kElem, token_stride(a.q_nope_stride)};
  const cuuint64_t q_pe_dims[3] = {kDr, heads, queries}, q_pe_strides[2] = {kDr * kElem, token_stride(a.q_pe_stride)};
  const cuuint64_t k_nope_dims[3] = {kDn, heads, keys}, k_nope_strides[2] = {kDn * kElem, token_stride(a.k_nope_stride)};
  const cuuint64_t v_dims[3] = {kDv, heads, keys}, v_strides[2] = {kDv * kElem, token_stride(a.v_stride)};
  const cuuint64_t k_pe_dims[2] = {kDr, keys}, k_pe_strides[1] = {token_stride(a.k_pe_stride)};
  struct Map {
    const char* name;
    CUtensorMap* map;
    const bf16_t* base;
    cuuint32_t rank;
    const cuuint64_t* dims;
    const cuuint64_t* strides;
    const cuuint32_t* box;
  };
  // Without keys validate() lets the key pointers be null: their maps then point at q_nope (never
  // read: no item has a key tile).
  auto key_base = [&](const bf16_t* p) { return a.total_k > 0 ? p : a.q_nope; };
  const Map all[] = {{"q_nope", &maps->q_nope, a.q_nope, 3, q_nope_dims, q_nope_strides, box3},
                     {"q_pe", &maps->q_pe, a.q_pe, 3, q_pe_dims, q_pe_strides, box3},
                     {"k_nope", &maps->k_nope, key_base(a.k_nope), 3, k_nope_dims, k_nope_strides, box3},
                     {"k_pe", &maps->k_pe, key_base(a.k_pe), 2, k_pe_dims, k_pe_strides, box2},
                     {"v", &maps->v, key_base(a.v), 3, v_dims, v_strides, box3}};
  for (const Map& m : all) {
    bool no_driver = false;
    if (!cuda_tma::encode_bf16_sw128(m.map, m.base, m.rank, m.dims, m.strides, m.box, &no_driver)) {
      if (no_driver) return Status::error("dense MHA (wgmma): the driver has no cuTensorMapEncodeTiled");
      return Status::error(std::string("dense MHA (wgmma): cuTensorMapEncodeTiled failed for ") + m.name +
                           " (token stride " + std::to_string(m.strides[m.rank - 2]) + " bytes)");
    }
  }
  return Status();
}

}  // namespace

bool runs_on(int device) {
  static PerDeviceAnswer answer(probe);
  return answer.get(device);
}

Status launch(const DenseArgs& args, Debug debug, Schedule schedule, int64_t max_ctas_cap, cudaStream_t stream) {
  WorkSchedule sched;
  const int64_t items = static_cast<int64_t>(args.q_tiles) * args.num_reqs * args.num_heads;
  if (items == 0) return Status();
  if (reinterpret_cast<uintptr_t>(args.out) % 16 != 0) {
    return Status::error("dense MHA (wgmma): out is not 16-byte aligned (its 16-byte stores need it)");
  }
  TmaMaps maps;
  MLA_RETURN_IF_ERROR(make_maps(args, &maps));
  // Persistent: min(items, SMs, max_ctas_cap) CTAs, each taking the next unclaimed item
  // (nth_item), so that a CTA loads its next item's Q and first key tiles while it finishes the
  // current one. Schedule::kGrid: one CTA per item instead (past the grid's x limit, CTAs loop).
  // max_ctas_cap (a test hook) makes the loop over items run on small problems. The Debug kernels
  // always run the grid.
  int64_t max_ctas = INT_MAX;
  if (max_ctas_cap > 0 && max_ctas_cap < max_ctas) max_ctas = max_ctas_cap;
  const bool dynamic = debug == Debug::kNone && schedule == Schedule::kPersistent;
  if (dynamic) {
    int device = 0, sms = 0;
    MLA_CUDA_CHECK(cudaGetDevice(&device));
    MLA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (sms < max_ctas) max_ctas = sms;
    const Status st = work_schedule_for(device, sms, stream, &sched);
    if (!st.ok()) return Status::error("dense MHA (wgmma): " + st.message());
  }
  const auto ctas = static_cast<unsigned>(items < max_ctas ? items : max_ctas);
  if (dynamic && static_cast<int64_t>(ctas) > sched.capacity) {
    return Status::error("dense MHA (wgmma): " + std::to_string(ctas) + " CTAs but item slots for " +
                         std::to_string(sched.capacity));
  }
  Kernel kernel = dynamic ? dense_mha_wgmma_kernel<Debug::kNone, true> : dense_mha_wgmma_kernel<Debug::kNone, false>;
  if (debug == Debug::kScores) kernel = dense_mha_wgmma_kernel<Debug::kScores, false>;
  if (debug == Debug::kValues) kernel = dense_mha_wgmma_kernel<Debug::kValues, false>;
  MLA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  DenseArgs launch_args = args;
  launch_args.work_counter = sched.counter;
  launch_args.work_slots = sched.slots;
  kernel<<<ctas, kThreads, kSmemBytes, stream>>>(launch_args, maps);
  MLA_CUDA_CHECK_LAUNCH("dense_mha_wgmma_kernel");
  return Status();
}

}  // namespace mla::dense_wgmma
