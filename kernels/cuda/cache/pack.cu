// Pack (docs/semantics.md §1.1): kv_c [N, 512] and k_pe [N, 64] bf16 rows -> 656-byte fp8_ds_mla
// entries at slot_mapping[i]. Bit for bit the host backend's pack (kernels/host/host_pack.cpp).
//
// Work split: one warp per token, one token per warp step, on a persistent grid (as many blocks as
// fit at once, fewer when the tokens need fewer); each warp issues the next step's loads before it
// quantizes this step's token (pack_kernel): the pack's loads do not depend on its work, so they
// stay in flight while it computes. Lane l owns elements [16 l, 16 l + 16) of kv_c, which lie in
// tile l / 8, so the per-tile amax is a max over the 8 lanes of a group (3 xor shuffles). Lane l
// writes entry bytes [16 l, 16 l + 16) with one 16-byte store; lanes 0, 8, 16, 24 write the four
// scales; lanes 0..7 copy the 128 RoPE bytes, 16 each.
//
// Arithmetic (must match the host exactly): amax = max |x| over the tile starting from 0, NaN
// inputs ignored (fmaxf / max.f32; the order of the maxima does not matter), scale =
// fmaxf(amax / 448, FLT_MIN) with an IEEE division (__fdiv_rn), byte = e4m3_satfinite(x / scale)
// with the same byte as from an IEEE quotient (div_by_scale: a reciprocal per tile and two FMA
// corrections per element, never a bare reciprocal multiply), two conversions per instruction
// (fp8_codec.cuh, same bits as f32_to_e4m3_satfinite).
//
// Hazards: a slot < 0 or >= num_blocks * block_size skips the token (the whole warp, uniformly),
// so no value in slot_mapping can make the kernel write outside the cache. Two tokens with the
// same slot race: the winner is unspecified (the host keeps the last).
#include <cfloat>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/fp8_e4m3.h"
#include "kernels/common/scale_division.h"
#include "kernels/cuda/cache/cache_launchers.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/common/device_probe.h"
#include "kernels/cuda/common/fp8_codec.cuh"

namespace mla {
namespace {

using cuda_io::kFullMask;
using cuda_io::kWarpSize;

constexpr int kPackThreads = 256;
constexpr int kPackWarpsPerBlock = kPackThreads / kWarpSize;
// Tokens per warp step. 1 (under 64 registers: 4 blocks per SM) reached 89 / 92 / 90 % of the copy
// rate at 64k / 256k / 1M tokens on an H200, 2 (105 registers: 2 blocks) 84 / 92 / 93 %, 4 less.
constexpr int kPackTokensPerWarp = 1;
constexpr int kLanesPerTile = DsMlaEntry::kTileDims / 16;  // 8 lanes x 16 elements = one tile

static_assert(DsMlaEntry::kNopeDims == kWarpSize * 16, "a warp covers the NoPE part, 16 per lane");
static_assert(DsMlaEntry::kRopeBytes == 8 * 16, "lanes 0..7 copy the RoPE part, 16 bytes each");
static_assert(DsMlaEntry::kScaleOffset % 16 == 0 && DsMlaEntry::kRopeOffset % 16 == 0,
              "16-byte aligned fields inside an aligned entry");

struct PackArgs {
  const bf16_t* kv_c;            // [num_tokens, kv_c_row_stride]
  int64_t kv_c_row_stride;
  const bf16_t* k_pe;            // [num_tokens, k_pe_row_stride]
  int64_t k_pe_row_stride;
  const int64_t* slot_mapping;   // [num_tokens]
  int64_t num_tokens;
  uint8_t* cache;                // [num_blocks, page_stride_bytes]
  int64_t num_slots;             // num_blocks * block_size
  int64_t page_stride_bytes;
  int32_t block_size;
};

__device__ __forceinline__ float bf16_lo(uint32_t w) { return bf16_to_f32(static_cast<bf16_t>(w & 0xFFFFu)); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return bf16_to_f32(static_cast<bf16_t>(w >> 16)); }

// Four E4M3 bytes (little-endian) from the 4 bf16 values in words a (elements 0, 1) and b (2, 3):
// e4m3_satfinite(x / scale), the quotient from div_by_scale (kernels/common/scale_division.h: a
// reciprocal per tile, two FMA corrections, the IEEE quotient's byte) or (kExactDiv) __fdiv_rn,
// two conversions per instruction.
template <bool kExactDiv>
__device__ __forceinline__ uint32_t quantize4(uint32_t a, uint32_t b, float scale, float y) {
  auto div = [&](float x) { return kExactDiv ? __fdiv_rn(x, scale) : div_by_scale(x, scale, y); };
  const uint32_t q01 = cuda_codec::f32x2_to_e4m3x2(div(bf16_lo(a)), div(bf16_hi(a)));
  const uint32_t q23 = cuda_codec::f32x2_to_e4m3x2(div(bf16_lo(b)), div(bf16_hi(b)));
  return q01 | (q23 << 16);
}

template <bool kExactDiv>
__device__ __forceinline__ uint4 quantize16(const uint32_t (&w)[8], float scale) {
  const float y = kExactDiv ? 0.0f : __frcp_rn(scale);
  return make_uint4(quantize4<kExactDiv>(w[0], w[1], scale, y), quantize4<kExactDiv>(w[2], w[3], scale, y),
                    quantize4<kExactDiv>(w[4], w[5], scale, y), quantize4<kExactDiv>(w[6], w[7], scale, y));
}

// One token's inputs as lane `lane` holds them.
struct TokenInputs {
  int64_t slot;
  uint4 x0, x1;  // kv_c elements 16 lane + 0..7 and + 8..15
  uint4 rope;    // lanes 0..7: k_pe elements 8 lane + 0..7
};

template <bool kVecIn>
__device__ __forceinline__ TokenInputs load_token(const PackArgs& a, int64_t tok, int lane) {
  TokenInputs in;
  in.slot = __ldg(a.slot_mapping + tok);
  const bf16_t* src = a.kv_c + tok * a.kv_c_row_stride + 16 * lane;
  in.x0 = cuda_io::load16<kVecIn>(src);
  in.x1 = cuda_io::load16<kVecIn>(src + 8);
  in.rope = make_uint4(0, 0, 0, 0);
  if (lane < 8) in.rope = cuda_io::load16<kVecIn>(a.k_pe + tok * a.k_pe_row_stride + 8 * lane);
  return in;
}

// Quantizes and writes one token whose slot is valid. Called by the whole warp (shuffles).
template <bool kVecOut>
__device__ __forceinline__ void pack_token(const PackArgs& a, const TokenInputs& in, int lane) {
  const uint32_t w[8] = {in.x0.x, in.x0.y, in.x0.z, in.x0.w, in.x1.x, in.x1.y, in.x1.z, in.x1.w};
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(fmaxf(amax, fabsf(bf16_lo(w[i]))), fabsf(bf16_hi(w[i])));
#pragma unroll
  for (int d = 1; d < kLanesPerTile; d *= 2) amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, d));
  const float scale = fmaxf(__fdiv_rn(amax, kE4m3MaxFinite), FLT_MIN);

  // The scale is the same in the tile's 8 lanes, but tiles differ: lanes may diverge here.
  const bool exact = scale_division_is_exact_only(scale);
  const uint4 q = exact ? quantize16<true>(w, scale) : quantize16<false>(w, scale);

  uint8_t* entry = a.cache + (in.slot / a.block_size) * a.page_stride_bytes +
                   (in.slot % a.block_size) * static_cast<int64_t>(DsMlaEntry::kBytes);
  cuda_io::store16<kVecOut>(entry + DsMlaEntry::kNopeOffset + 16 * lane, q);
  if (lane % kLanesPerTile == 0) {
    cuda_io::store_f32<kVecOut>(entry + DsMlaEntry::kScaleOffset + 4 * (lane / kLanesPerTile), scale);
  }
  if (lane < 8) cuda_io::store16<kVecOut>(entry + DsMlaEntry::kRopeOffset + 16 * lane, in.rope);
}

// Loads one step's kPackTokensPerWarp tokens (token tok0 + u; slot -1 past the end).
template <bool kVecIn>
__device__ __forceinline__ void load_step(const PackArgs& a, int64_t tok0, int lane,
                                          TokenInputs (&in)[kPackTokensPerWarp]) {
#pragma unroll
  for (int u = 0; u < kPackTokensPerWarp; ++u) {
    if (tok0 + u < a.num_tokens) in[u] = load_token<kVecIn>(a, tok0 + u, lane);
    else in[u].slot = -1;
  }
}

// kVecIn: kv_c and k_pe rows allow 16-byte loads. kVecOut: the cache base is 16-byte aligned (the
// page stride and 656 are multiples of 16, so every entry is). A persistent grid (launch()): warp w
// takes the steps at tokens kPackTokensPerWarp w, + step, ... and issues the next step's loads
// before it quantizes this step's tokens, so that its loads stay in flight while it computes (the
// pack's arithmetic, ~200 instructions per token and lane, otherwise delays each warp's next
// loads: one step per warp of two tokens, over a grid of one block per 16 tokens, reaches 76-85 %
// of the copy rate at 64k tokens, this 89 %; docs/performance.md).
template <bool kVecIn, bool kVecOut>
__global__ void __launch_bounds__(kPackThreads) pack_kernel(const PackArgs a) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kPackWarpsPerBlock + threadIdx.x / kWarpSize;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPackWarpsPerBlock * kPackTokensPerWarp;

  TokenInputs cur[kPackTokensPerWarp], next[kPackTokensPerWarp];
  int64_t tok0 = warp * kPackTokensPerWarp;
  load_step<kVecIn>(a, tok0, lane, cur);
  for (; tok0 < a.num_tokens; tok0 += step) {
    load_step<kVecIn>(a, tok0 + step, lane, next);
#pragma unroll
    for (int u = 0; u < kPackTokensPerWarp; ++u) {
      // The slot is the same in every lane: the warp packs or skips the token together.
      if (cur[u].slot >= 0 && cur[u].slot < a.num_slots) pack_token<kVecOut>(a, cur[u], lane);
    }
#pragma unroll
    for (int u = 0; u < kPackTokensPerWarp; ++u) cur[u] = next[u];
  }
}

// How many blocks of pack_kernel<kVecIn, kVecOut> `device` holds at once (at least one per SM); 0
// when the device cannot be queried (the runtime error cleared).
template <bool kVecIn, bool kVecOut>
int64_t resident_blocks(int device) {
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pack_kernel<kVecIn, kVecOut>, kPackThreads, 0) !=
          cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
}

// The grid: as many blocks as fit on the device at once (persistent), fewer when the tokens need
// fewer.
template <bool kVecIn, bool kVecOut>
Status launch(const PackArgs& a, cudaStream_t stream) {
  static PerDeviceAnswer<int64_t> resident_on(resident_blocks<kVecIn, kVecOut>);
  int device = 0;
  MLA_CUDA_CHECK(cudaGetDevice(&device));
  const int64_t resident = resident_on.get(device);
  if (resident <= 0) return Status::error("pack: cannot query the device's multiprocessors and occupancy");
  const int64_t needed = cuda_io::grid_blocks(a.num_tokens, kPackWarpsPerBlock * kPackTokensPerWarp);
  const auto grid = static_cast<unsigned>(needed < resident ? needed : resident);
  pack_kernel<kVecIn, kVecOut><<<grid, kPackThreads, 0, stream>>>(a);
  MLA_CUDA_CHECK_LAUNCH("pack_kernel");
  return Status();
}

}  // namespace

Status launch_pack(const PackParams& p, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  const int64_t num_slots = p.cache.num_slots();
  if (p.num_tokens == 0 || num_slots == 0) return Status();  // nothing can be written

  const PackArgs a{p.kv_c, p.kv_c_row_stride, p.k_pe, p.k_pe_row_stride, p.slot_mapping, p.num_tokens,
                   p.cache.data, num_slots, p.cache.page_stride_bytes, p.cache.block_size};
  // 16-byte loads need 16-byte aligned rows: base aligned and the row stride a multiple of 8 bf16.
  const bool vec_in = cuda_io::aligned16(p.kv_c) && p.kv_c_row_stride % 8 == 0 && cuda_io::aligned16(p.k_pe) &&
                      p.k_pe_row_stride % 8 == 0;
  // Entries start at base + block * page_stride + offset * 656; validate() makes the stride a
  // multiple of 16, so the base decides.
  const bool vec_out = cuda_io::aligned16(p.cache.data) && p.cache.page_stride_bytes % 16 == 0;
  if (vec_in) return vec_out ? launch<true, true>(a, stream) : launch<true, false>(a, stream);
  return vec_out ? launch<false, true>(a, stream) : launch<false, false>(a, stream);
}

}  // namespace mla
