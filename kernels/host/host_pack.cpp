// Host pack (docs/semantics.md §1.1): bf16 kv_c / k_pe rows -> 656-byte fp8_ds_mla entries.
// Arithmetic is fp32 exactly as the CUDA kernel does it: amax of |x| per 128-tile, scale =
// max(amax / 448, FLT_MIN) by a true division, byte = e4m3(x / scale) by a true division (a
// reciprocal multiply would round differently). Must not be built with -ffast-math.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/fp8_e4m3.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {
namespace {

void store_f32_le(uint8_t* dst, float value) {
  const uint32_t u = f32_bits(value);
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(u >> (8 * i));
}

// One token: quantize 512 latent values tile by tile, write the scales, copy the RoPE bits.
void pack_token(const bf16_t* kv_c, const bf16_t* k_pe, uint8_t* entry) {
  for (int t = 0; t < DsMlaEntry::kNumTiles; ++t) {
    const bf16_t* tile = kv_c + t * DsMlaEntry::kTileDims;
    float amax = 0.0f;
    // NaN never raises the max (as on the GPU). Not fmaxf: glibc's quiets a signaling NaN and then
    // drops the running max, which makes the result depend on element order.
    for (int i = 0; i < DsMlaEntry::kTileDims; ++i) {
      const float a = fabsf(bf16_to_f32(tile[i]));
      if (a > amax) amax = a;
    }
    const float scale = fmaxf(amax / kE4m3MaxFinite, FLT_MIN);
    uint8_t* bytes = entry + DsMlaEntry::kNopeOffset + t * DsMlaEntry::kTileDims;
    for (int i = 0; i < DsMlaEntry::kTileDims; ++i) {
      bytes[i] = f32_to_e4m3_satfinite(bf16_to_f32(tile[i]) / scale);
    }
    store_f32_le(entry + DsMlaEntry::kScaleOffset + 4 * t, scale);
  }
  std::memcpy(entry + DsMlaEntry::kRopeOffset, k_pe, DsMlaEntry::kRopeBytes);
}

}  // namespace

void pack(const PackParams& p) {
  const PagedCacheView& c = p.cache;
  const int64_t num_slots = c.num_slots();
  for (int64_t i = 0; i < p.num_tokens; ++i) {
    const int64_t slot = p.slot_mapping[i];
    if (slot < 0 || slot >= num_slots) continue;  // < 0: skip by contract; >= num_slots: never write OOB
    const int64_t block = slot / c.block_size;
    const int64_t offset = slot % c.block_size;
    uint8_t* entry = c.data + block * c.page_stride_bytes + offset * DsMlaEntry::kBytes;
    pack_token(p.kv_c + i * p.kv_c_row_stride, p.k_pe + i * p.k_pe_row_stride, entry);
  }
}

}  // namespace mla::host
