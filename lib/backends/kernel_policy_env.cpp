#include "lib/backends/kernel_policy_env.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace mla {
namespace {

// The value of `name`, or nullptr when unset or empty (the default applies).
const char* value_of(const std::function<const char*(const char*)>& lookup, const char* name) {
  const char* v = lookup(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

Status named(const char* name, const char* value, const Status& st) {
  if (st.ok()) return st;
  return Status::error(std::string(name) + "='" + value + "': " + st.message());
}

// An enum variable through the policy's own names (kernels/kernel_policy.h).
template <typename E>
Status read_enum(const std::function<const char*(const char*)>& lookup, const char* name, E* out) {
  const char* v = value_of(lookup, name);
  return v == nullptr ? Status() : named(name, v, parse(std::string_view(v), out));
}

}  // namespace

Status kernel_policy_from_lookup(const std::function<const char*(const char* name)>& lookup, KernelPolicy* policy) {
  KernelPolicy p;
  MLA_RETURN_IF_ERROR(read_enum(lookup, "MLA_SPARSE_MQA_IMPL", &p.sparse_mqa));
  MLA_RETURN_IF_ERROR(read_enum(lookup, "MLA_DENSE_MHA_IMPL", &p.dense_mha));
  MLA_RETURN_IF_ERROR(read_enum(lookup, "MLA_DENSE_WGMMA_SCHEDULE", &p.dense_wgmma_schedule));
  MLA_RETURN_IF_ERROR(read_enum(lookup, "MLA_DENSE_WGMMA_DEBUG", &p.dense_wgmma_debug));
  if (const char* v = value_of(lookup, "MLA_DENSE_WGMMA_MAX_CTAS")) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 10);
    if (*end != '\0' || errno != 0 || n < 0 || n > INT32_MAX || !(v[0] >= '0' && v[0] <= '9')) {
      return Status::error(std::string("MLA_DENSE_WGMMA_MAX_CTAS='") + v +
                           "': expected a CTA count, an integer in [0, 2147483647] (0: no cap)");
    }
    p.dense_wgmma_max_ctas = n;
  }
  if (const char* v = value_of(lookup, "MLA_CUDA_SYNC_EACH")) {
    const std::string_view s(v);
    if (s != "0" && s != "1") {
      return Status::error(std::string("MLA_CUDA_SYNC_EACH='") + v + "': expected '1' (wait after every operation) or '0'");
    }
    p.sync_each = s == "1";
  }
  *policy = p;
  return Status();
}

Status kernel_policy_from_environment(KernelPolicy* policy) {
  return kernel_policy_from_lookup([](const char* name) -> const char* { return std::getenv(name); }, policy);
}

}  // namespace mla
