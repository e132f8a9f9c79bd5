// bfloat16 as raw bits (uint16_t): conversion from fp32 with round-to-nearest-even, and back.
// Storage is uint16_t everywhere so host code needs no CUDA headers; the bits are the same as
// __nv_bfloat16's.
#pragma once

#include "kernels/common/hd.h"

namespace mla {

using bf16_t = uint16_t;  // raw bfloat16 bits

inline constexpr bf16_t kBf16QuietNaN = 0x7FC0;

MLA_HD float bf16_to_f32(bf16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// Round-to-nearest-even on the 16 dropped bits. NaN stays NaN (quiet, sign kept); values that
// round past the largest finite bf16 become infinity, as IEEE rounding requires.
MLA_HD bf16_t f32_to_bf16_rne(float x) {
  const uint32_t u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<bf16_t>((u >> 16) | 0x0040u);
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<bf16_t>((u + 0x7FFFu + lsb) >> 16);
}

}  // namespace mla
