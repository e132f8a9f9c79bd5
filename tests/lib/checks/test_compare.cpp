#include "lib/checks/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace mla {
namespace {

TEST(CompareBf16Exact, EqualIsBitExact) {
  const std::vector<uint16_t> a = {0x3F80, 0xBF80, 0x0000};
  const Metrics m = compare_bf16_exact(a, a);
  EXPECT_EQ(m.mismatches, 0);
  EXPECT_TRUE(*m.bit_exact);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kPass);
}

TEST(CompareBf16Exact, AnyNaNEqualsAnyNaNButPositionsMustMatch) {
  const std::vector<uint16_t> ref = {0x7FC0, 0x3F80};
  EXPECT_EQ(compare_bf16_exact(ref, {0x7FFF, 0x3F80}).mismatches, 0);  // GPU canonical NaN
  const Metrics m = compare_bf16_exact(ref, {0x3F80, 0x3F80});
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_EQ(m.nonfinite_mismatches, 1);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kFail);  // exact check: FAIL, not NONFINITE
}

TEST(CompareBf16Exact, OneUlpIsAMismatchWithItsPosition) {
  const std::vector<uint16_t> ref = {0x3F80, 0x4000, 0x4040};
  const Metrics m = compare_bf16_exact(ref, {0x3F80, 0x4001, 0x4040});
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_EQ(m.worst_index, 1);
  EXPECT_DOUBLE_EQ(m.worst_ref, 2.0);
  EXPECT_DOUBLE_EQ(m.worst_got, 2.015625);
  EXPECT_FALSE(*m.bit_exact);
}

TEST(CompareBytesExact, UntouchedBytesAreOobNotMismatch) {
  const std::vector<uint8_t> ref = {1, 2, 0xFF, 0xFF};
  const std::vector<bool> untouched = {false, false, true, true};
  const Metrics m = compare_bytes_exact(ref, {1, 2, 0xFF, 0}, &untouched);
  EXPECT_EQ(m.mismatches, 0);
  EXPECT_EQ(m.untouched_bytes_changed, 1);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kOob);
}

TEST(CompareInt32Exact, LengthDifferenceCounts) {
  const Metrics m = compare_int32_exact({1, 2, 3}, {1, 2});
  EXPECT_EQ(m.mismatches, 1);
}

TEST(Verdicts, OrderAndNames) {
  EXPECT_EQ(worst(Verdict::kFail, Verdict::kOob), Verdict::kOob);
  EXPECT_EQ(worst(Verdict::kPass, Verdict::kSkip), Verdict::kSkip);
  EXPECT_EQ(worst(Verdict::kError, Verdict::kNonFinite), Verdict::kError);
  for (Verdict v : {Verdict::kPass, Verdict::kSkip, Verdict::kFail, Verdict::kNonFinite, Verdict::kOob, Verdict::kError})
    EXPECT_EQ(verdict_from_string(to_string(v)), v);
  EXPECT_FALSE(verdict_from_string("pass").has_value());
}

TEST(Verdicts, GuardChangeOutranksMismatch) {
  Metrics m;
  m.mismatches = 3;
  m.guard_bytes_changed = 1;
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kOob);
  Metrics n;
  n.nonfinite_mismatches = 1;  // tolerance check (bit_exact unset)
  EXPECT_EQ(verdict_from_metrics(n), Verdict::kNonFinite);
}

TEST(MergeInto, AddsCountsAndKeepsWorst) {
  Metrics a = compare_int32_exact({1, 2}, {1, 2});
  const Metrics b = compare_int32_exact({5}, {6});
  merge_into(a, b);
  EXPECT_EQ(a.elements, 3);
  EXPECT_EQ(a.mismatches, 1);
  EXPECT_FALSE(*a.bit_exact);
  EXPECT_EQ(a.worst_index, 0);
  EXPECT_DOUBLE_EQ(a.max_abs_err, 1.0);
}

}  // namespace
}  // namespace mla

namespace mla {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

TEST(CompareTolerance, AbsOrRelAtTheBoundary) {
  const Tolerance tol{1e-3, 0.01, -1.0};
  // |err| = 1e-3 passes on abs; 0.5 vs 0.504 passes on rel (0.8 %); 0.5 vs 0.506 fails both.
  EXPECT_EQ(compare_tolerance({0.0}, {1e-3}, tol).mismatches, 0);
  EXPECT_EQ(compare_tolerance({0.5}, {0.504}, tol).mismatches, 0);
  const Metrics m = compare_tolerance({0.5, 0.1}, {0.506, 0.1}, tol);
  EXPECT_EQ(m.mismatches, 1);
  EXPECT_EQ(m.worst_index, 0);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kFail);
  EXPECT_FALSE(m.bit_exact.has_value());
}

TEST(CompareTolerance, NonFinitePositionsMustMatch) {
  const Tolerance tol{1e-3, 0.01, -1.0};
  const double nan = std::nan("");
  EXPECT_EQ(verdict_from_metrics(compare_tolerance({nan, -kInf}, {nan, -kInf}, tol)), Verdict::kPass);
  const Metrics m = compare_tolerance({1.0, -kInf}, {nan, kInf}, tol);
  EXPECT_EQ(m.nonfinite_mismatches, 2);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kNonFinite);  // a tolerance check: NONFINITE
}

TEST(CompareTolerance, CosineOverToleranceFailsEvenWhenElementsPass) {
  // Every element within abs 1, but the direction is wrong: cosine difference 1.
  const Tolerance tol{1.0, 0.0, 1e-6};
  const Metrics m = compare_tolerance({0.5, -0.5}, {-0.5, 0.5}, tol);
  EXPECT_EQ(m.mismatches, 0);
  EXPECT_NEAR(m.cos_diff, 2.0, 1e-12);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kFail);
  Tolerance unchecked = tol;
  unchecked.cos = -1.0;
  EXPECT_EQ(verdict_from_metrics(compare_tolerance({0.5, -0.5}, {-0.5, 0.5}, unchecked)), Verdict::kPass);
}

TEST(CompareTolerance, CosineOfIdenticalVectorsIsZeroAndLengthsCount) {
  const Metrics m = compare_tolerance({1.0, 2.0, 3.0}, {1.0, 2.0, 3.0}, Tolerance{});
  EXPECT_DOUBLE_EQ(m.cos_diff, 0.0);
  EXPECT_EQ(verdict_from_metrics(m), Verdict::kPass);
  EXPECT_EQ(compare_tolerance({1.0, 2.0}, {1.0}, Tolerance{}).mismatches, 1);
}

TEST(MergeInto, RefusesToMixExactAndTolerance) {
  Metrics exact = compare_int32_exact({1}, {1});
  EXPECT_THROW(merge_into(exact, compare_tolerance({1.0}, {1.0}, Tolerance{})), std::logic_error);
}

}  // namespace
}  // namespace mla
