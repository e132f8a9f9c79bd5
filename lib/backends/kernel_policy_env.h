// The CUDA backend's kernel policy (kernels/kernel_policy.h) from the environment, read once by the
// apps where they make the backend. The variables and their values (unset or empty: the default):
//   MLA_SPARSE_MQA_IMPL       auto (default) | crossover | wgmma | tc | simple
//   MLA_DENSE_MHA_IMPL        wgmma (default) | tc | simple
//   MLA_DENSE_WGMMA_SCHEDULE  persistent (default) | grid
//   MLA_DENSE_WGMMA_DEBUG     off (default) | scores | values
//   MLA_DENSE_WGMMA_MAX_CTAS  a positive integer: at most that many CTAs for the dense wgmma kernel
//                             (0 or unset: no cap)
//   MLA_CUDA_SYNC_EACH        1: wait after every operation; 0 (default): do not
// Any other value is an error that names the variable and quotes the value.
#pragma once

#include <functional>

#include "kernels/common/status.h"
#include "kernels/kernel_policy.h"

namespace mla {

// From the process environment (std::getenv).
Status kernel_policy_from_environment(KernelPolicy* policy);

// From `lookup` (a variable's value, or nullptr when it is unset): the same rules, for tests.
Status kernel_policy_from_lookup(const std::function<const char*(const char* name)>& lookup, KernelPolicy* policy);

}  // namespace mla
