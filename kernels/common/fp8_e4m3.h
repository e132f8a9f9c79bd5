// FP8 E4M3 "fn" codec (no infinities; max finite 448; NaN = 0x7F / 0xFF).
// Layout: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal
// (value = m/8 * 2^-6). Encoding rounds to nearest even and saturates finite overflow to +-448,
// the behaviour of __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3). NaN encodes as 0x7F.
#pragma once

#include "kernels/common/hd.h"

namespace mla {

using e4m3_t = uint8_t;  // raw E4M3 bits

inline constexpr float kE4m3MaxFinite = 448.0f;
inline constexpr e4m3_t kE4m3NaN = 0x7F;

MLA_HD float e4m3_to_f32(e4m3_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xFu;
  const uint32_t man = v & 0x7u;
  if (exp == 0xFu && man == 0x7u) return f32_from_bits(sign | 0x7FC00000u);
  if (exp == 0) {
    // Subnormal: man * 2^-9, exact in fp32.
    const float mag = static_cast<float>(man) * 0.001953125f;
    return f32_from_bits(sign | f32_bits(mag));
  }
  // Normal: rebias 7 -> 127 and widen the mantissa 3 -> 23 bits.
  return f32_from_bits(sign | ((exp + 120u) << 23) | (man << 20));
}

MLA_HD e4m3_t f32_to_e4m3_satfinite(float x) {
  const uint32_t u = f32_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return kE4m3NaN;
  // 448 = 0x43E00000. Anything at or above the midpoint between 448 and the next (absent)
  // code 480 would round up; with saturation every magnitude > 448 becomes 448 (incl. inf).
  if (mag >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7Eu);
  const int32_t exp32 = static_cast<int32_t>(mag >> 23);  // biased by 127
  if (exp32 < 121) {
    // |x| < 2^-6: subnormal range. Quantum is 2^-9; value/quantum rounded to nearest even.
    // mag as fp32 is exact; scale by 2^9 exactly and round with integer arithmetic on bits.
    if (exp32 < 127 - 9 - 2) return sign;  // |x| < 2^-11: rounds to zero (below half quantum)
    const uint32_t full = (mag & 0x7FFFFFu) | (exp32 ? 0x800000u : 0u);  // 24-bit significand
    // value = full * 2^(exp32 - 150); in quanta of 2^-9: full * 2^(exp32 - 141)
    const int32_t shift = 141 - exp32;  // >= 21 here
    const uint32_t q = full >> shift;
    const uint32_t rem = full & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
    return static_cast<uint8_t>(sign | r);  // r == 8 carries into the smallest normal, 0x08
  }
  // Normal: keep 3 mantissa bits, round the dropped 20 to nearest even; a carry bumps the exponent.
  const uint32_t lsb = (mag >> 20) & 1u;
  const uint32_t rounded = (mag + 0x7FFFFu + lsb) >> 20;  // exponent and 3-bit mantissa, biased 127
  const uint32_t code = rounded - (120u << 3);             // rebias 127 -> 7
  return static_cast<uint8_t>(sign | (code > 0x7Eu ? 0x7Eu : code));
}

}  // namespace mla
