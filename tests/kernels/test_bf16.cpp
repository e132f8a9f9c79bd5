// bf16 conversions (kernels/common/bf16.h) against the IEEE rules, checked with an independent
// rounding written here in double arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>

#include "kernels/common/bf16.h"

namespace {

uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Magnitude of non-negative bf16 bits from the format definition (8 exponent bits, bias 127,
// 7 mantissa bits). The exponent field 255 is taken as 2^128, the value the next step past the
// largest finite bf16 would have, which is where IEEE rounding overflows to infinity.
double bf16_magnitude(uint32_t b) {
  const int exponent = (b >> 7) & 0xFF, mantissa = b & 0x7F;
  if (exponent == 0) return std::ldexp(mantissa, -133);
  return std::ldexp(128 + mantissa, exponent - 134);
}

// Independent round-to-nearest-even of a finite or infinite fp32 value: bracket |x| between
// truncation and the next bf16 magnitude and compare with the midpoint (exact in double).
uint16_t reference_round(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isinf(x)) return sign | 0x7F80;
  const double a = std::fabs(static_cast<double>(x));
  const uint32_t lo = (bits_of(x) & 0x7FFFFFFFu) >> 16;
  const double mid = (bf16_magnitude(lo) + bf16_magnitude(lo + 1)) / 2;
  const uint32_t r = (a > mid || (a == mid && (lo & 1))) ? lo + 1 : lo;
  return static_cast<uint16_t>(sign | r);
}

TEST(Bf16, ToF32IsTheHighHalfForEveryPattern) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    EXPECT_EQ(bits_of(mla::bf16_to_f32(static_cast<mla::bf16_t>(b))), b << 16);
  }
}

TEST(Bf16, RoundsTiesToEven) {
  using mla::f32_to_bf16_rne;
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F818000u)), 0x3F82);  // tie, odd below -> up
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F808001u)), 0x3F81);  // just above the tie
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x3F807FFFu)), 0x3F80);  // just below the tie
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xBF818000u)), 0xBF82);  // negative tie
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x00008000u)), 0x0000);  // denormal tie -> 0
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x00018000u)), 0x0002);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x007F8000u)), 0x0080);  // carry into the smallest normal
  EXPECT_EQ(f32_to_bf16_rne(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16_rne(-0.0f), 0x8000);
}

TEST(Bf16, InfinityAndOverflow) {
  using mla::f32_to_bf16_rne;
  EXPECT_EQ(f32_to_bf16_rne(INFINITY), 0x7F80);
  EXPECT_EQ(f32_to_bf16_rne(-INFINITY), 0xFF80);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7F0000u)), 0x7F7F);  // largest finite bf16 stays
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7F7FFFu)), 0x7F7F);  // below the overflow midpoint
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7F8000u)), 0x7F80);  // tie with odd 0x7F7F -> inf
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX -> inf
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xFF7FFFFFu)), 0xFF80);
}

TEST(Bf16, NanStaysQuietNanWithItsSign) {
  using mla::f32_to_bf16_rne;
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7FC00000u)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xFFC00000u)), 0xFFC0);
  // Signalling NaNs with payload only in the dropped bits must not become infinity.
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7F800001u)), 0x7FC0);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0xFF800001u)), 0xFFC0);
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7FFFFFFFu)), 0x7FFF);  // no rounding carry out of a NaN
  EXPECT_EQ(f32_to_bf16_rne(float_of(0x7FA00000u)), 0x7FE0);
  for (uint32_t u = 0x7F800001u; u <= 0x7FFFFFFFu; u += 4099) {
    const mla::bf16_t b = f32_to_bf16_rne(float_of(u));
    EXPECT_TRUE((b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0 && (b & 0x40)) << std::hex << u;
  }
}

TEST(Bf16, MatchesIndependentDoubleRounding) {
  int64_t n = 0, mismatches = 0;
  auto check = [&](uint32_t u) {
    const float x = float_of(u);
    ++n;
    if (std::isnan(x)) return;  // NaN rules tested above
    const mla::bf16_t got = mla::f32_to_bf16_rne(x);
    const uint16_t want = reference_round(x);
    if (got != want && ++mismatches <= 10) {
      ADD_FAILURE() << "x bits 0x" << std::hex << u << ": got 0x" << got << ", want 0x" << want;
    }
  };
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 509) check(static_cast<uint32_t>(u));
  // Every high half with the dropped half at, just below and just above the tie.
  for (uint32_t hi = 0; hi < 0x10000; ++hi) {
    for (uint32_t low : {0x0000u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) check((hi << 16) | low);
  }
  EXPECT_EQ(mismatches, 0);
  std::cout << "[ info ] compared " << n << " fp32 patterns with the double-precision rounding\n";
}

}  // namespace
