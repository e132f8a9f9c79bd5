// The CUDA backend (kernels/backend.h on one CUDA device). Memory comes from cudaMalloc; every
// kernel runs on one non-default stream that the backend owns, in issue order; copies are
// synchronous for the host (they are ordered on that stream, then the stream is synchronised).
// Create it with make_cuda_backend(). Code beside it (mla-bench's events, an adapter's tensors)
// reaches its stream and device through Backend::native_device(); this header adds what only the
// CUDA backend's own tests need (the policy switch).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/backend.h"

namespace mla {

class CudaBackend : public Backend {
 public:
  // The stream every operation of this backend is issued on (not the default stream).
  virtual cudaStream_t stream() const = 0;
  // The CUDA device ordinal the backend uses.
  virtual int device() const = 0;
  // The policy the launchers follow (make_cuda_backend's). set_kernel_policy replaces it for the
  // operations issued after the call (already issued ones keep theirs), so that a test runs every
  // implementation on one backend's stream and buffers; info() reflects it.
  virtual const KernelPolicy& kernel_policy() const = 0;
  virtual void set_kernel_policy(const KernelPolicy& policy) = 0;
};

// Whether this build has the sm_90a `wgmma` kernels (the configured CUDA architectures include 90).
bool wgmma_kernels_built();

}  // namespace mla
