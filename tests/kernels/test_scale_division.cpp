// div_by_scale (kernels/common/scale_division.h), the CUDA pack's division, against the host
// pack's IEEE division: the E4M3 byte of both quotients must agree, for the pack's operands (a
// tile's amax A, scale = max(A / 448, FLT_MIN), every bf16 x with |x| <= A, both signs). Every A
// up to 0x0C00 (the tiny scales where the corrections' residual can underflow, with every x) and
// every 7th A above it (every x) run here; the host replay over all A found no difference.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/fp8_e4m3.h"
#include "kernels/common/scale_division.h"

namespace {

using mla::bf16_t;

float pack_scale(float amax) { return std::fmax(amax / mla::kE4m3MaxFinite, FLT_MIN); }

// The pack's byte for x: exact division where the kernel divides exactly, else div_by_scale.
uint8_t kernel_byte(float x, float scale) {
  if (mla::scale_division_is_exact_only(scale)) return mla::f32_to_e4m3_satfinite(x / scale);
  return mla::f32_to_e4m3_satfinite(mla::div_by_scale(x, scale, 1.0f / scale));
}

// Mismatching bytes over every bf16 x with |x| <= amax (both signs).
int64_t mismatches_for(bf16_t amax_bits, bool use_threshold) {
  const float amax = mla::bf16_to_f32(amax_bits);
  const float scale = pack_scale(amax);
  int64_t bad = 0;
  for (uint32_t b = 0; b <= amax_bits; ++b) {
    for (const uint32_t sign : {0u, 0x8000u}) {
      const float x = mla::bf16_to_f32(static_cast<bf16_t>(b | sign));
      const uint8_t want = mla::f32_to_e4m3_satfinite(x / scale);
      const uint8_t got = use_threshold ? kernel_byte(x, scale)
                                        : mla::f32_to_e4m3_satfinite(mla::div_by_scale(x, scale, 1.0f / scale));
      if (got != want) ++bad;
    }
  }
  return bad;
}

TEST(ScaleDivision, MatchesIeeeDivisionByteForByte) {
  int64_t bad = 0, checked_amax = 0;
  for (uint32_t a = 1; a < 0x7F80; a += (a < 0x0C00 ? 1 : 7)) {
    const int64_t n = mismatches_for(static_cast<bf16_t>(a), /*use_threshold=*/true);
    EXPECT_EQ(n, 0) << "amax bf16 0x" << std::hex << a;
    bad += n;
    ++checked_amax;
  }
  EXPECT_EQ(bad, 0) << "over " << checked_amax << " amax values";
}

// Why the exact path exists: without it, a scale just above FLT_MIN gives a different byte
// (amax 0x04F8, x = 0x005D: IEEE 0x1.500002p-1 -> 0x33, corrections without the exact path land
// on the tie 0x1.5p-1 -> 0x32).
TEST(ScaleDivision, TinyScalesNeedTheExactPath) {
  const float scale = pack_scale(mla::bf16_to_f32(0x04F8));
  EXPECT_TRUE(mla::scale_division_is_exact_only(scale));
  const float x = mla::bf16_to_f32(0x005D);
  EXPECT_EQ(mla::f32_to_e4m3_satfinite(x / scale), 0x33);
  EXPECT_EQ(mla::f32_to_e4m3_satfinite(mla::div_by_scale(x, scale, 1.0f / scale)), 0x32);
  EXPECT_GT(mismatches_for(0x04F8, /*use_threshold=*/false), 0);
}

TEST(ScaleDivision, SignedZerosAndSpecialScales) {
  const float scale = pack_scale(1.0f);
  EXPECT_TRUE(std::signbit(mla::div_by_scale(-0.0f, scale, 1.0f / scale)));
  EXPECT_FALSE(std::signbit(mla::div_by_scale(0.0f, scale, 1.0f / scale)));
  EXPECT_TRUE(mla::scale_division_is_exact_only(INFINITY));
  EXPECT_TRUE(mla::scale_division_is_exact_only(FLT_MIN));
  EXPECT_FALSE(mla::scale_division_is_exact_only(mla::kScaleDivisionMinScale));
  EXPECT_FALSE(mla::scale_division_is_exact_only(1.0f / 448.0f));
}

}  // namespace
