// The kernel policy from the MLA_* variables (lib/kernel_policy_env.h), through a lookup so that
// the process environment stays untouched.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "lib/backends/kernel_policy_env.h"

namespace {

using mla::KernelPolicy;

// The policy read from `vars` (unset: absent from the map).
mla::Status read(const std::map<std::string, std::string>& vars, KernelPolicy* out) {
  return mla::kernel_policy_from_lookup(
      [&](const char* name) -> const char* {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
      },
      out);
}

TEST(KernelPolicyEnv, UnsetAndEmptyVariablesGiveTheDefaults) {
  KernelPolicy p;
  p.sync_each = true;  // overwritten
  ASSERT_TRUE(read({}, &p).ok());
  EXPECT_TRUE(p == KernelPolicy{});
  ASSERT_TRUE(read({{"MLA_SPARSE_MQA_IMPL", ""},
                    {"MLA_DENSE_MHA_IMPL", ""},
                    {"MLA_DENSE_WGMMA_SCHEDULE", ""},
                    {"MLA_DENSE_WGMMA_DEBUG", ""},
                    {"MLA_DENSE_WGMMA_MAX_CTAS", ""},
                    {"MLA_CUDA_SYNC_EACH", ""}},
                   &p)
                  .ok());
  EXPECT_TRUE(p == KernelPolicy{});
}

TEST(KernelPolicyEnv, EveryVariableSetsItsField) {
  KernelPolicy p;
  const mla::Status st = read({{"MLA_SPARSE_MQA_IMPL", "tc"},
                               {"MLA_DENSE_MHA_IMPL", "simple"},
                               {"MLA_DENSE_WGMMA_SCHEDULE", "grid"},
                               {"MLA_DENSE_WGMMA_DEBUG", "scores"},
                               {"MLA_DENSE_WGMMA_MAX_CTAS", "3"},
                               {"MLA_CUDA_SYNC_EACH", "1"}},
                              &p);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(p.sparse_mqa, mla::SparseMqaImpl::kTc);
  EXPECT_EQ(p.dense_mha, mla::DenseMhaImpl::kSimple);
  EXPECT_EQ(p.dense_wgmma_schedule, mla::DenseWgmmaSchedule::kGrid);
  EXPECT_EQ(p.dense_wgmma_debug, mla::DenseWgmmaDebug::kScores);
  EXPECT_EQ(p.dense_wgmma_max_ctas, 3);
  EXPECT_TRUE(p.sync_each);

  ASSERT_TRUE(read({{"MLA_DENSE_WGMMA_MAX_CTAS", "0"}, {"MLA_CUDA_SYNC_EACH", "0"}}, &p).ok());
  EXPECT_EQ(p.dense_wgmma_max_ctas, 0);
  EXPECT_FALSE(p.sync_each);

  ASSERT_TRUE(read({{"MLA_SPARSE_MQA_IMPL", "crossover"}}, &p).ok());
  EXPECT_EQ(p.sparse_mqa, mla::SparseMqaImpl::kCrossover);
  ASSERT_TRUE(read({{"MLA_SPARSE_MQA_IMPL", "auto"}}, &p).ok());
  EXPECT_EQ(p.sparse_mqa, mla::SparseMqaImpl::kAuto);
}

// A bad value is an error naming the variable and quoting the value; the policy is left alone.
TEST(KernelPolicyEnv, BadValuesNameTheVariable) {
  const struct {
    const char* name;
    const char* value;
    const char* message;
  } cases[] = {
      {"MLA_SPARSE_MQA_IMPL", "fastest",
       "MLA_SPARSE_MQA_IMPL='fastest': unknown sparse MQA implementation 'fastest' (expected 'auto', 'crossover', "
       "'wgmma', 'tc' or 'simple')"},
      {"MLA_DENSE_MHA_IMPL", "TC",
       "MLA_DENSE_MHA_IMPL='TC': unknown dense MHA implementation 'TC' (expected 'wgmma', 'tc' or 'simple')"},
      {"MLA_DENSE_WGMMA_SCHEDULE", "gird",
       "MLA_DENSE_WGMMA_SCHEDULE='gird': unknown dense wgmma schedule 'gird' (expected 'persistent' or 'grid')"},
      {"MLA_DENSE_WGMMA_DEBUG", "on",
       "MLA_DENSE_WGMMA_DEBUG='on': unknown dense wgmma debug output 'on' (expected 'off', 'scores' or 'values')"},
      {"MLA_DENSE_WGMMA_MAX_CTAS", "-1",
       "MLA_DENSE_WGMMA_MAX_CTAS='-1': expected a CTA count, an integer in [0, 2147483647] (0: no cap)"},
      {"MLA_DENSE_WGMMA_MAX_CTAS", "3x", nullptr},
      {"MLA_DENSE_WGMMA_MAX_CTAS", " 3", nullptr},
      {"MLA_DENSE_WGMMA_MAX_CTAS", "+3", nullptr},
      {"MLA_DENSE_WGMMA_MAX_CTAS", "2147483648", nullptr},
      {"MLA_CUDA_SYNC_EACH", "yes", "MLA_CUDA_SYNC_EACH='yes': expected '1' (wait after every operation) or '0'"},
      {"MLA_CUDA_SYNC_EACH", "2", nullptr},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.value);
    KernelPolicy p;
    p.dense_wgmma_max_ctas = 7;
    const mla::Status st = read({{c.name, c.value}}, &p);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.message().rfind(std::string(c.name) + "='" + c.value + "': ", 0), 0u) << st.message();
    if (c.message != nullptr) {
      EXPECT_EQ(st.message(), c.message);
    }
    EXPECT_EQ(p.dense_wgmma_max_ctas, 7);
  }
}

}  // namespace
