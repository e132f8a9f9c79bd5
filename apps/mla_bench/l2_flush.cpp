#include "apps/mla_bench/l2_flush.h"

#include <algorithm>
#include <string>

#if defined(MLA_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#endif

namespace mla::bench {

Status L2Flusher::create(Backend& backend, void* stream, std::unique_ptr<L2Flusher>* out) {
  std::unique_ptr<L2Flusher> f(new L2Flusher(backend, stream));
#if defined(MLA_HAVE_CUDA)
  if (stream != nullptr) {
    int device = 0;
    cudaDeviceProp prop{};
    MLA_CUDA_CHECK(cudaGetDevice(&device));
    MLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    f->l2_bytes_ = static_cast<std::size_t>(prop.l2CacheSize);
    // Twice the L2, at least 64 MiB (a device reporting no L2 still gets a real flush).
    f->buffer_bytes_ = std::max<std::size_t>(2 * f->l2_bytes_, std::size_t{64} << 20);
    Status st = backend.allocate(f->buffer_bytes_, &f->buffer_);
    if (!st.ok()) return Status::error("L2 flush buffer of " + std::to_string(f->buffer_bytes_) +
                                       " bytes: " + st.message());
  }
#endif
  *out = std::move(f);
  return Status();
}

L2Flusher::~L2Flusher() {
  if (buffer_) backend_.release(buffer_);
}

Status L2Flusher::flush() {
#if defined(MLA_HAVE_CUDA)
  if (buffer_ != nullptr) {
    // A different byte each time, so no layer can treat the writes as redundant.
    const int value = static_cast<int>(++flushes_ & 0x7F) | 0x01;
    MLA_CUDA_CHECK(cudaMemsetAsync(buffer_, value, buffer_bytes_, static_cast<cudaStream_t>(stream_)));
  }
#endif
  return Status();
}

}  // namespace mla::bench
