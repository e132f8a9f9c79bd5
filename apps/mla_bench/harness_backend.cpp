#include "apps/mla_bench/harness_backend.h"

#include "lib/backends/backend_choice.h"

namespace mla::bench {

Status HarnessBackend::get(Backend** out) {
  if (!backend_ && error_.empty()) {
    backend_ = make_harness_backend(device_, kernels_, &error_);
    if (!backend_ && error_.empty()) error_ = "it could not be made";
  }
  if (!backend_) return Status::error("the harness's own backend of the device: " + error_);
  *out = backend_.get();
  return Status();
}

}  // namespace mla::bench
