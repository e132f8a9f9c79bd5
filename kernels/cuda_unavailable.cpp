// The CUDA backend's factory in a build without CUDA (MLA_ENABLE_CUDA=OFF).
#include "kernels/backend.h"

namespace mla {

bool cuda_backend_available(std::string* why_not) {
  if (why_not) *why_not = "this build has no CUDA backend (configured with MLA_ENABLE_CUDA=OFF)";
  return false;
}

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(const KernelPolicy&, std::string* error) {
  cuda_backend_available(error);
  return nullptr;
}

}  // namespace mla
