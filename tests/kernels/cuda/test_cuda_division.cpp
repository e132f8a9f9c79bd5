// attn_dev::divide_by (one reciprocal per attention row, the dense wgmma kernel's epilogue) has
// __fdiv_rn's bits wherever attn_dev::division_divisor_ok and division_value_ok hold: checked on
// the GPU over 2^30 pairs per operand kind (division_device.cu). Skipped without a GPU.
#include <gtest/gtest.h>

#include <string>

#if defined(MLA_HAVE_CUDA) && MLA_HAVE_CUDA

#include "tests/kernels/cuda/division_device.h"

namespace {

using mla::test_device::DivisionOperands;

void expect_division_bits(DivisionOperands operands, const char* label) {
  mla::test_device::DivisionCounts counts;
  std::string why;
  if (!mla::test_device::compare_row_division(operands, 1ULL << 30, &counts, &why)) {
    if (why == "no CUDA device") GTEST_SKIP() << why;
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

}  // namespace

#else  // !MLA_HAVE_CUDA

TEST(CudaDivision, SkippedWithoutCudaBuild) { GTEST_SKIP() << "built without the CUDA backend"; }

#endif
