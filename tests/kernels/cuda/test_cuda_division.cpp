// attn_dev::divide_by (one reciprocal per attention row, the dense wgmma kernel's epilogue) has
// __fdiv_rn's bits wherever attn_dev::division_divisor_ok and division_value_ok hold: checked on
// the GPU over 2^30 pairs per operand kind (division_device.cu). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#if defined(MLA_HAVE_CUDA) && MLA_HAVE_CUDA

#include "tests/kernels/cuda/division_device.h"

namespace {

using mla::test_device::DivisionOperands;

bool skip_reason(const std::string& why) { return why == "no CUDA device" || why == "no kernel image for this device"; }

void expect_division_bits(DivisionOperands operands, const char* label) {
  mla::test_device::DivisionCounts counts;
  std::string why;
  if (!mla::test_device::compare_row_division(operands, 1ULL << 30, &counts, &why)) {
    if (skip_reason(why)) GTEST_SKIP() << why;
    FAIL() << label << ": " << why;
  }
  // Most pairs are in range (whole range: l's exponents past 2^32 are drawn and skipped).
  EXPECT_GT(counts.tested, 1ULL << 29) << label;
  EXPECT_EQ(counts.differ, 0ULL) << label << ": divide_by differs from __fdiv_rn";
  // A multiply by the reciprocal differs often: the comparison can tell the two apart.
  EXPECT_GT(counts.naive_differ, counts.tested / 10) << label;
}

TEST(CudaDivision, RowReciprocalMatchesDivisionOverTheWholeRange) {
  expect_division_bits(DivisionOperands::kWholeRange, "whole range");
}

TEST(CudaDivision, RowReciprocalMatchesDivisionOnSoftmaxRows) {
  expect_division_bits(DivisionOperands::kSoftmaxRows, "softmax rows");
}

// The edges of the accepted range and the values outside it (every value against every l): each
// pair the range checks accept must give __fdiv_rn's bits, and exactly the pairs inside the range
// are accepted. Among the values: -0 (the fast path gives +0 for it: accepting it fails here), +0,
// subnormals, infinities, NaN, l = 0 and the values just past each limit.
TEST(CudaDivision, RowReciprocalMatchesDivisionAtTheRangeEdges) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float denorm = std::numeric_limits<float>::denorm_min(), big = std::numeric_limits<float>::max();
  const float lo = std::ldexp(1.0f, -64), hi = std::ldexp(1.0f, 64);
  std::vector<float> acc = {0.0f, -0.0f, denorm, -denorm, std::ldexp(1.0f, -126), std::nextafter(lo, 0.0f), lo,
                            -lo, std::nextafter(lo, 1.0f), 1.0f, -1.0f, 3.14159265f, 1e-18f, -7e18f,
                            std::nextafter(hi, 0.0f), hi, -hi, std::nextafter(hi, inf), big, inf, -inf, nan};
  const float l_hi = std::ldexp(1.0f, 32);
  const std::vector<float> l = {0.0f, -0.0f, 0.25f, std::nextafter(0.5f, 0.0f), 0.5f, std::nextafter(0.5f, 1.0f), 1.0f,
                                1.5f, 3.0f, 4096.0f, 123456.7f, std::nextafter(l_hi, 0.0f), l_hi,
                                std::nextafter(l_hi, inf), inf, nan, -1.0f};
  mla::test_device::DivisionCounts counts;
  std::string why;
  if (!mla::test_device::compare_division_pairs(acc, l, &counts, &why)) {
    if (skip_reason(why)) GTEST_SKIP() << why;
    FAIL() << why;
  }
  // Accepted: acc in {lo, -lo, just above lo, 1, -1, pi, 1e-18, -7e18, just below hi, hi, -hi}
  // (11) x l in {0.5, just above 0.5, 1, 1.5, 3, 4096, 123456.7, just below 2^32, 2^32} (9).
  EXPECT_EQ(counts.tested, 11ULL * 9ULL);
  EXPECT_EQ(counts.differ, 0ULL);
}

}  // namespace

#else  // !MLA_HAVE_CUDA

TEST(CudaDivision, SkippedWithoutCudaBuild) { GTEST_SKIP() << "built without the CUDA backend"; }

#endif
