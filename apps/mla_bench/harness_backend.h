// The harness's own backend of the device under test, made once, on first need: it prepares a
// benchmark's inputs and measures the GEMM ceiling when the backend under test is an adapter that
// lacks the operation (the same base --adapter-fallback runs lacking operations on). Inputs it
// prepares are not timed, and the ceiling is the device's, not the implementation's.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/kernel_policy.h"
#include "kernels/common/status.h"

namespace mla::bench {

class HarnessBackend {
 public:
  HarnessBackend() = default;
  HarnessBackend(NativeDevice::Kind device, const KernelPolicy& kernels) : device_(device), kernels_(kernels) {}

  // The backend, made on the first call; an error (why it cannot be made) otherwise, every call.
  Status get(Backend** out);

 private:
  NativeDevice::Kind device_ = NativeDevice::Kind::kHost;
  KernelPolicy kernels_;
  std::unique_ptr<Backend> backend_;
  std::string error_;
};

}  // namespace mla::bench
