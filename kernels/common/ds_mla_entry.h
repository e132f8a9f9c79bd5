// The fp8_ds_mla cache entry: 656 bytes per token per layer (docs/semantics.md §1).
//   [0, 512)    512 x FP8 E4M3, element e at byte e
//   [512, 528)  4 x float32 little-endian, scale t covers elements [128t, 128t + 128)
//   [528, 656)  64 x bfloat16 RoPE values, copied bit for bit
// Every offset and size of the format is named here and only here.
#pragma once

#include <cstdint>

#include "kernels/common/mla_dims.h"

namespace mla {

struct DsMlaEntry {
  static constexpr int kNopeDims = kDc;    // latent width (mla_dims.h)
  static constexpr int kRopeDims = kDr;
  static constexpr int kLatentDims = kDl;  // width of a dequantized row
  static constexpr int kTileDims = 128;   // elements per scale
  static constexpr int kNumTiles = kNopeDims / kTileDims;

  static constexpr int kNopeOffset = 0;
  static constexpr int kNopeBytes = kNopeDims;  // one byte per FP8 element
  static constexpr int kScaleOffset = kNopeOffset + kNopeBytes;
  static constexpr int kScaleBytes = kNumTiles * 4;
  static constexpr int kRopeOffset = kScaleOffset + kScaleBytes;
  static constexpr int kRopeBytes = kRopeDims * 2;
  static constexpr int kBytes = kRopeOffset + kRopeBytes;
  static constexpr int kAlignment = 16;  // entry starts are 16-byte aligned when the page base is
};

static_assert(DsMlaEntry::kScaleOffset == 512, "scales follow the 512 FP8 bytes");
static_assert(DsMlaEntry::kRopeOffset == 528, "RoPE follows the 4 scales");
static_assert(DsMlaEntry::kBytes == 656, "fp8_ds_mla entry is 656 bytes");
static_assert(DsMlaEntry::kBytes % DsMlaEntry::kAlignment == 0, "656 = 41 x 16");
static_assert(DsMlaEntry::kNopeDims % DsMlaEntry::kTileDims == 0, "whole tiles");
static_assert(DsMlaEntry::kBytes == kDc + 4 * (kDc / DsMlaEntry::kTileDims) + 2 * kDr,
              "an entry: one FP8 byte per latent element, one fp32 scale per tile, the bf16 RoPE");
static_assert(DsMlaEntry::kLatentDims == DsMlaEntry::kNopeDims + DsMlaEntry::kRopeDims, "a dequantized row");

// Bytes per token per layer of the other cache dtypes (docs/semantics.md §1), for layout rules.
inline constexpr int kBf16CacheBytesPerToken = DsMlaEntry::kLatentDims * 2;  // 1152 ("auto")
inline constexpr int kFlatFp8CacheBytesPerToken = DsMlaEntry::kLatentDims;   // 576 ("fp8")

}  // namespace mla
