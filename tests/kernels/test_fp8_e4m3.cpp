// The E4M3 codec (kernels/common/fp8_e4m3.h) against the format definition, against an
// independent nearest-even encoder written here in double, and, when the CUDA toolkit headers
// are available, against the toolkit's own host-side conversions (cuda_fp8.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>

#include "kernels/common/fp8_e4m3.h"

#if defined(MLA_HAVE_CUDA_FP8_HEADER)
#include <cuda_fp8.h>
#endif

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

// The value of an E4M3 ("fn") code from the definition: 1 sign bit, 4 exponent bits with bias
// 7, 3 mantissa bits; exponent 0 is subnormal (m/8 * 2^-6); S.1111.111 is NaN; no infinities.
double definition_value(uint8_t code) {
  const int sign = code >> 7, exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return sign ? -magnitude : magnitude;
}

// Independent encoder: nearest of the 127 non-negative finite magnitudes (codes 0x00..0x7E are
// increasing), ties to the even code, every magnitude >= 448 saturated to 448, NaN -> 0x7F.
// Midpoints between neighbours have at most 5 significant bits, so the comparison is exact.
uint8_t reference_encode(float x) {
  static const std::array<double, 127> table = [] {
    std::array<double, 127> t{};
    for (int c = 0; c < 127; ++c) t[c] = definition_value(static_cast<uint8_t>(c));
    return t;
  }();
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (a >= 448.0) return sign | 0x7E;
  // lo: the largest code with value <= a.
  const int lo = static_cast<int>(std::upper_bound(table.begin(), table.end(), a) - table.begin()) - 1;
  const double mid = (table[lo] + table[lo + 1]) / 2;
  int code = lo;
  if (a > mid || (a == mid && (lo & 1))) code = lo + 1;
  return static_cast<uint8_t>(sign | code);
}

// The probe set: fp32 patterns where E4M3 rounding can go wrong, plus a stride over all 2^32.
// Returns the number of values passed to `visit`.
int64_t for_each_probe(const std::function<void(float)>& visit) {
  int64_t n = 0;
  auto both_signs = [&](uint32_t u) {
    visit(float_of(u & 0x7FFFFFFFu));
    visit(float_of(u | 0x80000000u));
    n += 2;
  };
  // 1. Every fp32 pattern with a prime stride (NaNs, infinities and denormals included).
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 101) {
    visit(float_of(static_cast<uint32_t>(u)));
    ++n;
  }
  // 2. Exact ties between adjacent finite codes (incl. 0 / smallest subnormal and 448 / the
  //    absent 480), each with its neighbours one fp32 ulp away.
  for (int c = 0; c < 0x7E; ++c) {
    const float mid = static_cast<float>((definition_value(c) + definition_value(c + 1)) / 2);
    for (int d = -2; d <= 2; ++d) both_signs(bits_of(mid) + d);
  }
  for (int d = -2; d <= 2; ++d) both_signs(bits_of(464.0f) + d);
  // 3. Every code value itself, with neighbours (exact encodings and the first rounding step).
  for (int c = 0; c <= 0x7E; ++c) {
    const float v = static_cast<float>(definition_value(c));
    for (int d = -2; d <= 2; ++d) {
      if (v == 0.0f && d < 0) continue;
      both_signs(bits_of(v) + d);
    }
  }
  // 4. The subnormal range and below: |x| in [2^-12, 2^-5), every 13th pattern.
  for (uint32_t u = bits_of(0x1p-12f); u < bits_of(0x1p-5f); u += 13) both_signs(u);
  // 5. Saturation: every pattern with |x| in [416, 496] (448, 464 and 480 inside).
  for (uint32_t u = bits_of(416.0f); u <= bits_of(496.0f); ++u) both_signs(u);
  // 6. Specials.
  for (uint32_t u : {0x7F800000u, 0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu, 0x7F7FFFFFu, 0x00000001u}) {
    both_signs(u);
  }
  return n;
}

TEST(Fp8E4m3, DecodesEveryCodeAsTheFormatDefines) {
  for (int c = 0; c < 256; ++c) {
    const double expected = definition_value(static_cast<uint8_t>(c));
    const float got = mla::e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << "code 0x" << std::hex << c;
    } else {
      // Every E4M3 value is exact in fp32; compare bits so -0 is distinguished from +0.
      EXPECT_EQ(bits_of(got), bits_of(static_cast<float>(expected))) << "code 0x" << std::hex << c;
    }
  }
  EXPECT_EQ(mla::e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(mla::e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(mla::e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(mla::e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(bits_of(mla::e4m3_to_f32(0x80)), 0x80000000u);
  EXPECT_TRUE(std::isnan(mla::e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(mla::e4m3_to_f32(0xFF)));
}

TEST(Fp8E4m3, EncodeOfDecodeIsIdentityOnEveryNonNanCode) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(mla::f32_to_e4m3_satfinite(mla::e4m3_to_f32(static_cast<uint8_t>(c))), c)
        << "code 0x" << std::hex << c;
  }
}

TEST(Fp8E4m3, EncodeRoundsToNearestEvenAndSaturates) {
  using mla::f32_to_e4m3_satfinite;
  EXPECT_EQ(f32_to_e4m3_satfinite(1.0625f), 0x38);  // tie 1 | 1.125 -> even 1
  EXPECT_EQ(f32_to_e4m3_satfinite(1.1875f), 0x3A);  // tie 1.125 | 1.25 -> even 1.25
  EXPECT_EQ(f32_to_e4m3_satfinite(-3.0f), 0xC4);
  EXPECT_EQ(f32_to_e4m3_satfinite(0x1p-10f), 0x00);           // tie 0 | 2^-9 -> 0
  EXPECT_EQ(f32_to_e4m3_satfinite(0x1.000002p-10f), 0x01);    // just above the tie
  EXPECT_EQ(f32_to_e4m3_satfinite(3 * 0x1p-10f), 0x02);       // tie 1 | 2 quanta -> 2
  EXPECT_EQ(f32_to_e4m3_satfinite(15 * 0x1p-10f), 0x08);      // tie 7 quanta | 2^-6 -> 0x08
  EXPECT_EQ(f32_to_e4m3_satfinite(-0.0f), 0x80);
  EXPECT_EQ(f32_to_e4m3_satfinite(-1e-30f), 0x80);
  EXPECT_EQ(f32_to_e4m3_satfinite(449.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3_satfinite(464.0f), 0x7E);
  EXPECT_EQ(f32_to_e4m3_satfinite(1e30f), 0x7E);
  EXPECT_EQ(f32_to_e4m3_satfinite(-480.0f), 0xFE);
  EXPECT_EQ(f32_to_e4m3_satfinite(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(f32_to_e4m3_satfinite(-std::numeric_limits<float>::infinity()), 0xFE);
  EXPECT_EQ(f32_to_e4m3_satfinite(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(f32_to_e4m3_satfinite(-std::numeric_limits<float>::quiet_NaN()), 0x7F);
}

TEST(Fp8E4m3, EncodeMatchesIndependentReferenceOnProbeSet) {
  int64_t mismatches = 0;
  const int64_t n = for_each_probe([&](float x) {
    const uint8_t got = mla::f32_to_e4m3_satfinite(x);
    const uint8_t want = reference_encode(x);
    if (got != want && ++mismatches <= 10) {
      ADD_FAILURE() << "x bits 0x" << std::hex << bits_of(x) << ": got 0x" << int(got) << ", want 0x"
                    << int(want);
    }
  });
  EXPECT_EQ(mismatches, 0);
  std::cout << "[ info ] compared " << n << " fp32 values with the independent encoder\n";
  RecordProperty("values_compared", std::to_string(n));
}

#if defined(MLA_HAVE_CUDA_FP8_HEADER)

// fp16 bits -> value, from the binary16 definition (independent of the toolkit's conversions).
double half_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  double magnitude;
  if (exponent == 0x1F) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

TEST(Fp8E4m3CudaToolkit, EncodeMatchesCvtFloatToFp8Satfinite) {
  int64_t mismatches = 0;
  const int64_t n = for_each_probe([&](float x) {
    const uint8_t got = mla::f32_to_e4m3_satfinite(x);
    const uint8_t want = static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
    if (got != want && ++mismatches <= 10) {
      ADD_FAILURE() << "x bits 0x" << std::hex << bits_of(x) << ": got 0x" << int(got)
                    << ", __nv_cvt_float_to_fp8 0x" << int(want);
    }
  });
  EXPECT_EQ(mismatches, 0);
  std::cout << "[ info ] compared " << n << " fp32 values with __nv_cvt_float_to_fp8\n";
  RecordProperty("values_compared", std::to_string(n));
}

TEST(Fp8E4m3CudaToolkit, DecodeMatchesCvtFp8ToHalfraw) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    const double want = half_value(h.x);
    const float got = mla::e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code 0x" << std::hex << c;
    } else {
      EXPECT_EQ(bits_of(got), bits_of(static_cast<float>(want))) << "code 0x" << std::hex << c;
    }
  }
}

#else

TEST(Fp8E4m3CudaToolkit, EncodeMatchesCvtFloatToFp8Satfinite) {
  GTEST_SKIP() << "CUDA toolkit headers not found at configure time (MLA_HAVE_CUDA_FP8_HEADER undefined)";
}
TEST(Fp8E4m3CudaToolkit, DecodeMatchesCvtFp8ToHalfraw) {
  GTEST_SKIP() << "CUDA toolkit headers not found at configure time (MLA_HAVE_CUDA_FP8_HEADER undefined)";
}

#endif

}  // namespace
