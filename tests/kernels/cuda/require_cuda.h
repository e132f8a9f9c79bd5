// MLA_REQUIRE_CUDA: the GPU tests' skip for "no usable CUDA backend" becomes a failure.
//
// Without a GPU (CI) the CUDA tests skip with the reason. On a GPU machine a skip would hide a
// broken driver or device, so scripts/run_gpu.sh sets MLA_REQUIRE_CUDA=1 for its test stage: the
// same condition then fails the test, with the same message. Any value but empty or "0" counts.
// Only the "CUDA backend unavailable" skips go through here; skips that are legitimate on a working
// GPU (not compute capability 9.0, built without sm_90a) stay skips.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace mla::test {

inline bool cuda_required() {
  const char* v = std::getenv("MLA_REQUIRE_CUDA");
  return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace mla::test

// In a test body or SetUp(), as GTEST_SKIP(): `MLA_SKIP_WITHOUT_CUDA() << "why";` returns from
// the function with a skip, or (MLA_REQUIRE_CUDA set) with a fatal failure carrying the same
// message. GTEST_SKIP and GTEST_FAIL are this macro with a fixed result type.
#define MLA_SKIP_WITHOUT_CUDA()                                                              \
  return GTEST_MESSAGE_(::mla::test::cuda_required() ? "MLA_REQUIRE_CUDA is set: this skip is a failure" : "", \
                        ::mla::test::cuda_required() ? ::testing::TestPartResult::kFatalFailure          \
                                                     : ::testing::TestPartResult::kSkip)
