// CUDA errors as mla::Status values (DESIGN.md: every CUDA call and launch is checked with file and
// line). Host-only; include from .cu or .cpp files that see the CUDA runtime headers.
//
//   MLA_CUDA_CHECK(cudaMemcpy(...));        // returns a Status naming the call on failure
//   kernel<<<grid, block, 0, stream>>>(...);
//   MLA_CUDA_CHECK_LAUNCH("pack_kernel");   // cudaGetLastError() after the launch
//
// Both macros `return` from the enclosing function, which must return mla::Status.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/common/status.h"

namespace mla {

// ok for cudaSuccess; otherwise "file:line: what: cudaErrorName (description)".
inline Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return Status();
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  return Status::error(std::move(msg));
}

}  // namespace mla

#define MLA_CUDA_CHECK(call)                                                             \
  do {                                                                                   \
    const cudaError_t mla_cuda_err_ = (call);                                            \
    if (mla_cuda_err_ != cudaSuccess)                                                    \
      return ::mla::cuda_status(mla_cuda_err_, #call, __FILE__, __LINE__);               \
  } while (0)

// After a <<<...>>> launch: configuration errors (and any earlier asynchronous error that is
// still pending) surface here. Execution errors of the kernel itself surface at synchronize().
#define MLA_CUDA_CHECK_LAUNCH(kernel_name)                                               \
  do {                                                                                   \
    const cudaError_t mla_cuda_err_ = cudaGetLastError();                                \
    if (mla_cuda_err_ != cudaSuccess)                                                    \
      return ::mla::cuda_status(mla_cuda_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
