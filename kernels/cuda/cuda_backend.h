// The CUDA backend (kernels/backend.h on one CUDA device). Memory comes from cudaMalloc; every
// kernel runs on one non-default stream that the backend owns, in issue order; copies are
// synchronous for the host (they are ordered on that stream, then the stream is synchronised).
// Create it with make_cuda_backend(); this header exposes the stream so that the benchmark can
// record CUDA events around the operations:
//
//   if (auto* cuda = dynamic_cast<mla::CudaBackend*>(backend.get())) cudaEventRecord(ev, cuda->stream());
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
};

}  // namespace mla
