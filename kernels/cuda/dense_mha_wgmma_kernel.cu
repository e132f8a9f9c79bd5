// Dense MHA (SPEC 4.2) for Hopper, `wgmma` implementation: FlashAttention-3-style forward with
// warpgroup MMA, warp specialisation and register reallocation. Built only for sm_90a
// (kernels/CMakeLists.txt); launch_dense_mha (dense_mha_kernel.cu) chooses it. Semantics are those
// of the host and the `tc` kernel (see dense_mha_kernel.cu), to fp32 accumulation order and
// exp's last bits (p through ex2.approx, see softmax_half): the
// kernel loads and multiplies 128-key tiles but runs the online softmax per 64-key half, as the
// host does per 64-key tile, so m, the bf16 rounding of P and l follow the host step by step.
// (A 128-key softmax step differs from the host by P's rounding: up to about 2 bf16 ulps of out at
// scale 0.5, i.e. past the tests' 2e-2 tolerance at scale >= 1.)
//
// CTA (384 threads) = one (request, 128-query tile, head); later query tiles of a request first.
//   warpgroup 0, producer (setmaxnreg 40): warp 0 / 1 load the K tiles of stage 0 / 1, warp 2 / 3
//     the V tiles of stage 0 / 1, with 16-byte cp.async (zero-filled past the request's keys).
//     Each warp, per tile: wait until its stage is free (empty mbarrier), issue, wait for its own
//     copies, fence.proxy.async (the tile is then visible to wgmma), arrive on the full mbarrier.
//   warpgroups 1, 2, consumers (setmaxnreg 232): query rows 0..63 / 64..127 of the tile. Each
//     loads its Q rows once (cp.async, fence.proxy.async, named barrier), then per key tile t:
//       issue  O += P_{t-1}[keys 0..63] V           4 x wgmma m64n128k16, A = P from registers,
//                                                     B = V from shared memory (MN-major, transposed)
//       issue  S_t = Q K_t^T                        12 x wgmma m64n128k16, A = Q and B = K from
//                                                     shared memory (K-major)
//       wait for the first; O *= factor of the second half of tile t - 1;
//       issue  O += P_{t-1}[keys 64..127] V         4 x wgmma
//       wait for S_t (release K_t's stage); softmax of S_t (both halves) while that P V runs;
//       wait for it (release V_{t-1}'s stage); O *= factor of the first half of tile t; P_t = bf16(p).
//   Online softmax per row on the S accumulators (4 lanes share a row: quad shuffles), in fp32
//   with p = 2^(s log2 e - m log2 e) (ex2.approx; expf for the rescale factors), masked (causal
//   and past the request's keys) only on the halves that need it; l sums the fp32 p.
//   out = bf16(O / l) (IEEE division), lse = m + logf(l); no visible key: 0 and -inf. Rows past
//   the request are computed on zero Q rows and not stored. A warpgroup whose rows need fewer key
//   tiles than the CTA's other one waits for and releases the rest without computing.
//
// Shared memory (dynamic, 214,080 bytes, one CTA per SM), every tile in 128-byte-swizzled column
// blocks of [128 rows][64 bf16] = 16 KiB (layout and descriptors: wgmma_device.cuh):
//   Q [128][192] 3 blocks | K[2] [128 keys][192] 3 blocks each | V[2] [128 keys][128] 2 blocks each |
//   8 mbarriers (k_full, k_empty, v_full, v_empty per stage) | + up to 1 KiB to align the base.
// Descriptors: Q / K K-major (SBO 1024, LBO unused = 16; k16 step kk: + 16 KiB * (kk / 4) +
// 32 B * (kk % 4)); V MN-major (SBO 1024 = next 8 keys, LBO 16 KiB = next 64 value columns;
// k16 step kk: + 2 KiB * kk).
//
// Measured on an H200 (docs/performance.md, fourth session): exp2 instead of expf took causal 8k
// from 360 to 428 TFLOP/s. Ping-pong of the two consumer warpgroups (named barriers: one issues its
// GEMMs for tile t, P V halves included, then passes the turn) was correct but slower (351), alone
// and with exp2 (424): the turn is held across the wait for the first P V half. Toward FA3 speed
// (not done here): TMA loads into the same layout (the producer shrinks to one thread), a ping-pong
// that passes the turn before that wait, 3 consumer warpgroups (192 rows) to cut the K/V traffic
// per FLOP.
#include "kernels/cuda/dense_mha_wgmma.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/attention_params.h"
#include "kernels/cuda/attention_device.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_probe.h"
#include "kernels/cuda/wgmma_device.cuh"

namespace mla::dense_wgmma {
namespace {

constexpr int kDn = kNopeHeadDim;               // 128
constexpr int kDq = kQkHeadDim;                 // 192
constexpr int kDr = kQkHeadDim - kNopeHeadDim;  // 64
constexpr int kDv = kVHeadDim;                  // 128
constexpr int kRows = kRowsPerCta;              // 128 queries per CTA
constexpr int kKeys = 128;                      // keys per tile (loads, S = Q K^T)
constexpr int kSoftmaxKeys = 64;                // keys per online-softmax step: the host's kAttentionTile
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kConsumerWgs = 2;
constexpr int kThreads = 128 * (1 + kConsumerWgs);
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;
constexpr int kBlockBytes = 128 * 128;  // one swizzled column block: 128 rows x 128 bytes
constexpr int kQBytes = (kDq / 64) * kBlockBytes;
constexpr int kKBytes = (kDq / 64) * kBlockBytes;
constexpr int kVBytes = (kDv / 64) * kBlockBytes;
constexpr int kOffQ = 0;
constexpr int kOffK = kOffQ + kQBytes;
constexpr int kOffV = kOffK + 2 * kKBytes;
constexpr int kOffBar = kOffV + 2 * kVBytes;
constexpr int kBarBytes = 8 * 8;  // 8 mbarriers
constexpr int kSmemBytes = 1024 + kOffBar + kBarBytes;
constexpr int kEmptyArrivals = 4 * kConsumerWgs;  // lane 0 of every consumer warp
constexpr int kFullArrivals = 32;                 // every lane of the loading warp
static_assert(kSmemBytes == 214080, "one CTA per SM, within the 227 KiB opt-in limit");
static_assert(kRows == 64 * kConsumerWgs && kKeys == 128 && kDv == 128, "m64n128 tiles: S and O are 64 x 128");
static_assert(kKeys == 2 * kSoftmaxKeys, "two softmax halves per key tile (softmax_half, issue_pv)");
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

using attn_dev::normalize;
using attn_dev::pack_bf16x2;
using attn_dev::row_lse;

// Byte offset of logical 16-byte chunk `chunk` (0..7) of row `row` inside a swizzled block (rows of
// 128 bytes: the same XOR as every attention tile, attention_device.cuh).
__device__ __forceinline__ uint32_t swz(int row, int chunk) { return attn_dev::swizzled(row, chunk, 128); }

// --- producer -------------------------------------------------------------------------------------

// kKeys rows of kChunks 16-byte chunks (kChunks = 16 or 8: 32 / kChunks rows per instruction)
// from global `src` (row stride `stride` elements) into the swizzled block(s) at `dst`: chunk c of
// row j to block c / 8, row j, chunk c % 8. Rows j >= `valid` are zero-filled (`zero_src` is any
// valid global address). One warp; written for few registers (the producer runs with 40).
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

// S_t = Q K_t^T for this warpgroup's 64 rows: 12 k16 steps over the 192 dims.
__device__ __forceinline__ void issue_qk(float (&s)[64], uint64_t q_desc, uint64_t k_desc) {
#pragma unroll
  for (int kk = 0; kk < kDq / 16; ++kk) {
    const uint64_t step = static_cast<uint64_t>(((kk / 4) * kBlockBytes + (kk % 4) * 32) >> 4);
    wgmma::wgmma_m64n128k16_ss(s, q_desc + step, k_desc + step, kk > 0 ? 1 : 0);
  }
}

// O += P V for half `kHalf` of the tile (keys 64 kHalf .. + 63): 4 k16 steps; p[4 kk .. 4 kk + 3]
// are the A fragments of k16 step kk (kk = 4 kHalf .. 4 kHalf + 3).
template <int kHalf>
__device__ __forceinline__ void issue_pv(float (&o)[64], const uint32_t (&p)[32], uint64_t v_desc) {
#pragma unroll
  for (int kk = 4 * kHalf; kk < 4 * kHalf + 4; ++kk) {
    const uint64_t step = static_cast<uint64_t>((kk * 16 * 128) >> 4);
    wgmma::wgmma_m64n128k16_rs_bt(o, p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3], v_desc + step);
  }
}

// One online-softmax step of the host (a tile of 64 keys: kAttentionTile) on half `kHalf` of the
// S accumulators (this thread: rows g and g + 8 of its warp; s[4 i + c] = (row c >> 1, key
// 8 i + 2 t + (c & 1)), i = 8 kHalf .. 8 kHalf + 7). With kMask, keys with 8 i + (c & 1) >= lim[row]
// are masked (lim = visible keys - start of the 128-key tile - 2 t). On return those s hold the
// fp32 p, m / l are updated and factor[row] = exp(m_old - m_new) (1 when m is unchanged): the
// caller multiplies O by it before adding this half's P V.
template <int kHalf, bool kMask>
__device__ __forceinline__ void softmax_half(float (&s)[64], float (&m)[2], float (&l)[2], float (&factor)[2],
                                             float scale, int lim0, int lim1) {
  constexpr int kBegin = 32 * kHalf, kEnd = kBegin + 32;
  float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int e = kBegin; e < kEnd; ++e) {
    const int c = e & 3;
    float x = s[e] * scale;
    if (kMask && 8 * (e >> 2) + (c & 1) >= (c < 2 ? lim0 : lim1)) x = -INFINITY;
    s[e] = x;
    tmax[c >> 1] = fmaxf(tmax[c >> 1], x);
  }
  float ref[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    tmax[hh] = fmaxf(tmax[hh], __shfl_xor_sync(0xFFFFFFFFu, tmax[hh], 1));
    tmax[hh] = fmaxf(tmax[hh], __shfl_xor_sync(0xFFFFFFFFu, tmax[hh], 2));
    factor[hh] = attn_dev::raise_row_max(m[hh], tmax[hh]);
    l[hh] *= factor[hh];
    ref[hh] = attn_dev::exp_ref(m[hh]);
  }
  // p = exp(s - ref) as 2^(s log2(e) - ref log2(e)): one FMA and one MUFU.EX2 per score (expf
  // costs several more instructions, and the softmax's issue slots are what the tensor cores wait
  // for). Relative to expf: ~2 ulp from ex2.approx, plus ref log2(e)'s rounding, one factor for
  // all p of a row while its m stays (in lse: ~1e-7 |m|). Masked scores (-inf) give +0; a row
  // without a visible key yet has ref = 0. Limit: |m| must stay below FLT_MAX / log2(e) ~ 2.36e38
  // (ref log2(e) overflows beyond: p = 0, or NaN for m < -2.36e38); scores that large are outside
  // any bf16 attention and would differ from the host, which mla-check reports.
  const float ref2[2] = {ref[0] * kLog2e, ref[1] * kLog2e};
  float tsum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int e = kBegin; e < kEnd; ++e) {
    const float p = wgmma::ex2_approx(fmaf(s[e], kLog2e, -ref2[(e >> 1) & 1]));
    tsum[(e >> 1) & 1] += p;
    s[e] = p;
  }
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    tsum[hh] += __shfl_xor_sync(0xFFFFFFFFu, tsum[hh], 1);
    tsum[hh] += __shfl_xor_sync(0xFFFFFFFFu, tsum[hh], 2);
    l[hh] += tsum[hh];
  }
}

// Both halves of a 128-key tile starting at key `key0` (masked where a row's visible keys end
// inside it): factor_a / factor_b are the rescale factors of O before the first / second half's P V.
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&m)[2], float (&l)[2], float (&factor_a)[2],
                                             float (&factor_b)[2], float scale, int key0, int vis_first, int vis_lo,
                                             int vis_hi, int tq) {
  const int lim0 = vis_lo - key0 - 2 * tq, lim1 = vis_hi - key0 - 2 * tq;
  if (key0 + 64 > vis_first) {
    softmax_half<0, true>(s, m, l, factor_a, scale, lim0, lim1);
  } else {
    softmax_half<0, false>(s, m, l, factor_a, scale, lim0, lim1);
  }
  if (key0 + 128 > vis_first) {
    softmax_half<1, true>(s, m, l, factor_b, scale, lim0, lim1);
  } else {
    softmax_half<1, false>(s, m, l, factor_b, scale, lim0, lim1);
  }
}

__device__ __forceinline__ void scale_rows(float (&o)[64], const float (&factor)[2]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] *= factor[(i >> 1) & 1];
}

__device__ __forceinline__ void pack_p(uint32_t (&p)[32], const float (&s)[64]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) p[j] = pack_bf16x2(s[2 * j], s[2 * j + 1]);
}

#endif  // MLA_WGMMA_ENABLED

template <Debug kDebug>
__global__ void __launch_bounds__(kThreads, 1) dense_mha_wgmma_kernel(const DenseArgs a) {
#if MLA_WGMMA_ENABLED
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t sbase = (wgmma::smem_u32(smem_raw) + 1023u) & ~1023u;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  const int r = blockIdx.x / a.q_tiles, tile = a.q_tiles - 1 - static_cast<int>(blockIdx.x % a.q_tiles);
  const int h = blockIdx.y;
  const int64_t H = a.num_heads;
  const Range rq = request_range(a.cu_q, r, a.total_q);
  const Range rk = request_range(a.cu_k, r, a.total_k);
  const int nq = rq.count, nk = rk.count;
  const int i0 = tile * kRows;
  if (i0 >= nq) return;
  const int rows = nq - i0 < kRows ? nq - i0 : kRows;
  int n_kt = (visible_keys(a.causal, i0 + rows - 1, nq, nk) + kKeys - 1) / kKeys;
  if constexpr (kDebug != Debug::kNone) n_kt = nk > 0 ? 1 : 0;

  if (n_kt == 0) {  // no row of the tile sees a key: out 0, lse -inf
    for (int i = tid; i < rows * (kDv / 2); i += kThreads) {
      const int64_t t = rq.begin + i0 + i / (kDv / 2);
      reinterpret_cast<uint32_t*>(a.out + (t * H + h) * kDv)[i % (kDv / 2)] = 0u;
    }
    for (int i = tid; i < rows; i += kThreads) a.lse[(rq.begin + i0 + i) * H + h] = -INFINITY;
    return;
  }

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      wgmma::mbar_init(sbase + bar_k_full(s), kFullArrivals);
      wgmma::mbar_init(sbase + bar_v_full(s), kFullArrivals);
      wgmma::mbar_init(sbase + bar_k_empty(s), kEmptyArrivals);
      wgmma::mbar_init(sbase + bar_v_empty(s), kEmptyArrivals);
    }
  }
  __syncthreads();

  // ---------------------------------------------------------------- producer warpgroup
  if (wg == 0) {
    wgmma::setmaxnreg_dec<kProducerRegs>();
    const int stage = warp & 1;
    const bool is_v = warp >= 2;
    const uint32_t dst = sbase + (is_v ? kOffV + stage * kVBytes : kOffK + stage * kKBytes);
    const uint32_t full = sbase + (is_v ? bar_v_full(stage) : bar_k_full(stage));
    const uint32_t empty = sbase + (is_v ? bar_v_empty(stage) : bar_k_empty(stage));
    for (int t = stage; t < n_kt; t += 2) {
      if (t >= 2) wgmma::mbar_wait(empty, ((t >> 1) - 1) & 1);  // consumers released tile t - 2
      const int64_t tok = rk.begin + static_cast<int64_t>(t) * kKeys;
      const int valid = rk.count - t * kKeys;  // keys of the tile inside the request
      if (is_v) {
        load_rows<kDv / 8>(dst, a.v + tok * a.v_stride + h * kDv, a.v_stride, valid, a.v, lane);
      } else {
        load_rows<kDn / 8>(dst, a.k_nope + tok * a.k_nope_stride + h * kDn, a.k_nope_stride, valid, a.k_nope, lane);
        load_rows<kDr / 8>(dst + 2 * kBlockBytes, a.k_pe + tok * a.k_pe_stride, a.k_pe_stride, valid, a.k_pe, lane);
      }
      wgmma::cp_async_commit();
      wgmma::cp_async_wait_all();
      wgmma::fence_proxy_async();
      wgmma::mbar_arrive(full);
    }
    return;
  }

  // ---------------------------------------------------------------- consumer warpgroups
  wgmma::setmaxnreg_inc<kConsumerRegs>();
  const int cw = wg - 1;             // rows 64 cw .. 64 cw + 63 of the tile
  const int ctid = tid - 128 * wg;   // 0..127
  const int g = lane / 4, tq = lane % 4;
  const int row_lo = 64 * cw + 16 * warp + g;  // this thread's rows (tile-local): row_lo, row_lo + 8
  const int wg_rows = rows - 64 * cw < 0 ? 0 : (rows - 64 * cw > 64 ? 64 : rows - 64 * cw);
  int n_kt_wg = wg_rows == 0 ? 0 : (visible_keys(a.causal, i0 + 64 * cw + wg_rows - 1, nq, nk) + kKeys - 1) / kKeys;
  if constexpr (kDebug != Debug::kNone) n_kt_wg = wg_rows == 0 ? 0 : n_kt;

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  if (n_kt_wg > 0) {
    // Q rows of this warpgroup (rows past the request zero-filled).
    for (int i = ctid; i < 64 * (kDq / 8); i += 128) {
      const int row = 64 * cw + i / (kDq / 8), c = i % (kDq / 8);
      const uint32_t dst = sbase + kOffQ + (c / 8) * kBlockBytes + swz(row, c % 8);
      if (row < rows) {
        const int64_t t = rq.begin + i0 + row;
        const bf16_t* src = c < kDn / 8 ? a.q_nope + t * a.q_nope_stride + h * kDn + 8 * c
                                        : a.q_pe + t * a.q_pe_stride + h * kDr + 8 * (c - kDn / 8);
        cp_async16(dst, src, 16);
      } else {
        cp_async16(dst, a.q_nope, 0);
      }
    }
    wgmma::cp_async_commit();
    wgmma::cp_async_wait_all();
    wgmma::fence_proxy_async();
    wgmma::named_barrier_sync(1 + cw, 128);

    const uint64_t q_desc = wgmma::desc_sw128(sbase + kOffQ + 64 * cw * 128, 16, 1024);
    const uint64_t k_desc0 = wgmma::desc_sw128(sbase + kOffK, 16, 1024);
    const uint64_t v_desc0 = wgmma::desc_sw128(sbase + kOffV, kBlockBytes, 1024);
    const uint64_t k_stage_step = kKBytes >> 4, v_stage_step = kVBytes >> 4;
    const int vis_lo = visible_keys(a.causal, i0 + row_lo, nq, nk);
    const int vis_hi = visible_keys(a.causal, i0 + row_lo + 8, nq, nk);
    const int vis_first = visible_keys(a.causal, i0 + 64 * cw, nq, nk);  // fewest keys in the warpgroup
    const float scale = a.scale;

    float s[64];
    uint32_t p[32];
    float factor_a[2], factor_b[2] = {1.0f, 1.0f};

    // Key tile 0.
    wgmma::mbar_wait(sbase + bar_k_full(0), 0);
    wgmma::wgmma_fence();
    issue_qk(s, q_desc, k_desc0);
    wgmma::wgmma_commit();
    wgmma::wgmma_wait<0>();
    wgmma::fence_operands(s);
    if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(0));
    if constexpr (kDebug == Debug::kScores) {
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] = s[i] * scale;
      m[0] = m[1] = 0.0f;
      l[0] = l[1] = 1.0f;
    } else {
      if constexpr (kDebug == Debug::kValues) {
#pragma unroll
        for (int i = 0; i < 64; ++i) s[i] = 8 * (i / 4) + 2 * tq + (i & 1) == row_lo + 8 * ((i >> 1) & 1) ? 1.0f : 0.0f;
        m[0] = m[1] = 0.0f;
        l[0] = l[1] = 1.0f;
      } else {
        softmax_tile(s, m, l, factor_a, factor_b, scale, 0, vis_first, vis_lo, vis_hi, tq);  // O is 0: no rescale
      }
      pack_p(p, s);

      // Tile t: S_t = Q K_t^T runs with the first half of P_{t-1} V_{t-1}; O is rescaled for the
      // second half (the host's per-64-key m), whose P V then runs with the softmax of S_t.
      for (int t = 1; t < n_kt_wg; ++t) {
        const int st = t & 1, pst = st ^ 1;
        const uint64_t v_desc = v_desc0 + pst * v_stage_step;
        wgmma::mbar_wait(sbase + bar_k_full(st), (t >> 1) & 1);
        wgmma::mbar_wait(sbase + bar_v_full(pst), ((t - 1) >> 1) & 1);
        wgmma::wgmma_fence();
        issue_pv<0>(o, p, v_desc);
        wgmma::wgmma_commit();
        issue_qk(s, q_desc, k_desc0 + st * k_stage_step);
        wgmma::wgmma_commit();
        wgmma::wgmma_wait<1>();  // P V first half done; S_t may still run
        wgmma::fence_operands(o);
        scale_rows(o, factor_b);
        wgmma::wgmma_fence();
        issue_pv<1>(o, p, v_desc);
        wgmma::wgmma_commit();
        wgmma::wgmma_wait<1>();  // S_t done; P V second half may still run
        wgmma::fence_operands(s);
        if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(st));
        softmax_tile(s, m, l, factor_a, factor_b, scale, t * kKeys, vis_first, vis_lo, vis_hi, tq);
        wgmma::wgmma_wait<0>();
        wgmma::fence_operands(o);
        wgmma::fence_operands(p);
        if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(pst));
        scale_rows(o, factor_a);
        pack_p(p, s);
      }

      // P V of the warpgroup's last tile.
      const int tl = n_kt_wg - 1, stl = tl & 1;
      const uint64_t v_desc = v_desc0 + stl * v_stage_step;
      wgmma::mbar_wait(sbase + bar_v_full(stl), (tl >> 1) & 1);
      wgmma::wgmma_fence();
      issue_pv<0>(o, p, v_desc);
      wgmma::wgmma_commit();
      wgmma::wgmma_wait<0>();
      wgmma::fence_operands(o);
      scale_rows(o, factor_b);
      wgmma::wgmma_fence();
      issue_pv<1>(o, p, v_desc);
      wgmma::wgmma_commit();
      wgmma::wgmma_wait<0>();
      wgmma::fence_operands(o);
      wgmma::fence_operands(p);
      if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(stl));
    }
  }
  // Tiles the CTA loads that this warpgroup's rows do not see: take them and hand them back.
  if constexpr (kDebug == Debug::kNone) {
    for (int t = n_kt_wg; t < n_kt; ++t) {
      const int st = t & 1;
      wgmma::mbar_wait(sbase + bar_k_full(st), (t >> 1) & 1);
      if (lane == 0) wgmma::mbar_arrive(sbase + bar_k_empty(st));
      wgmma::mbar_wait(sbase + bar_v_full(st), (t >> 1) & 1);
      if (lane == 0) wgmma::mbar_arrive(sbase + bar_v_empty(st));
    }
  }

  // Epilogue: this thread's two rows, columns 8 i + 2 tq, + 1. The request range is read again
  // rather than kept live through the main loop (register pressure).
  const Range rq_end = request_range(a.cu_q, r, a.total_q);
  const int rows_end = rq_end.count - i0 < kRows ? rq_end.count - i0 : kRows;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_lo + 8 * half;
    if (row >= rows_end) continue;
    const int64_t t = rq_end.begin + i0 + row;
    uint32_t* out = reinterpret_cast<uint32_t*>(a.out + (t * H + h) * kDv + 2 * tq);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      out[4 * i] = pack_bf16x2(normalize(o[4 * i + 2 * half], l[half]), normalize(o[4 * i + 2 * half + 1], l[half]));
    }
    if (tq == 0) a.lse[t * H + h] = row_lse(m[half], l[half]);
  }
#endif  // MLA_WGMMA_ENABLED
}

}  // namespace

int smem_bytes() { return kSmemBytes; }

namespace {

// The probe behind runs_on (not cached).
bool probe(int device) {
  if (!is_compute_capability(device, 9, 0)) return false;
  void (*const kernels[])(const DenseArgs) = {dense_mha_wgmma_kernel<Debug::kNone>, dense_mha_wgmma_kernel<Debug::kScores>,
                                         dense_mha_wgmma_kernel<Debug::kValues>};
  for (auto kernel : kernels) {
    cudaFuncAttributes attr{};
    if (!kernel_attributes(kernel, &attr)) return false;
    // Launched with the register count the setmaxnreg budget assumes.
    if (attr.numRegs != kLaunchRegs) return false;
  }
  return true;
}

}  // namespace

bool runs_on(int device) {
  static PerDeviceAnswer answer(probe);
  return answer.get(device);
}

Status launch(const DenseArgs& args, dim3 grid, Debug debug, cudaStream_t stream) {
  void (*kernel)(const DenseArgs) = dense_mha_wgmma_kernel<Debug::kNone>;
  if (debug == Debug::kScores) kernel = dense_mha_wgmma_kernel<Debug::kScores>;
  if (debug == Debug::kValues) kernel = dense_mha_wgmma_kernel<Debug::kValues>;
  MLA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(args);
  MLA_CUDA_CHECK_LAUNCH("dense_mha_wgmma_kernel");
  return Status();
}

}  // namespace mla::dense_wgmma
