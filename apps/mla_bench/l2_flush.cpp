#include "apps/mla_bench/l2_flush.h"

#include <algorithm>
#include <string>

#if defined(MLA_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/common/cuda_check.h"
#endif

namespace mla::bench {

Status L2Flusher::create(Backend& backend, void* stream, int64_t lead_cycles, std::unique_ptr<L2Flusher>* out) {
  if (lead_cycles < 0 || lead_cycles > kMaxLeadCycles) {
    return Status::error("lead of " + std::to_string(lead_cycles) + " cycles: outside [0, " +
                         std::to_string(kMaxLeadCycles) + "]");
  }
  std::unique_ptr<L2Flusher> f(new L2Flusher(backend, stream));
#if defined(MLA_HAVE_CUDA)
  if (stream != nullptr) {
    f->lead_cycles_ = lead_cycles;
    int device = 0;
    cudaDeviceProp prop{};
    MLA_CUDA_CHECK(cudaGetDevice(&device));
    MLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    f->l2_bytes_ = static_cast<std::size_t>(prop.l2CacheSize);
    // Twice the L2, at least 64 MiB (a device reporting no L2 still gets a real flush).
    f->buffer_bytes_ = std::max<std::size_t>(2 * f->l2_bytes_, std::size_t{64} << 20);
    f->buffer_bytes_ = (f->buffer_bytes_ + 15) / 16 * 16;
    Status st = backend.allocate(f->buffer_bytes_, &f->buffer_);
    if (!st.ok()) return Status::error("L2 flush buffer of " + std::to_string(f->buffer_bytes_) +
                                       " bytes: " + st.message());
    void* sink = nullptr;
    st = backend.allocate(sizeof(unsigned), &sink);
    if (!st.ok()) return Status::error("L2 flush sink (4 bytes): " + st.message());
    f->sink_ = static_cast<unsigned*>(sink);
    // Every byte 0x5A: the xor of four words of 0x5A5A5A5A is 0, never 0xFFFFFFFF.
    const auto s = static_cast<cudaStream_t>(stream);
    MLA_CUDA_CHECK(cudaMemsetAsync(f->buffer_, 0x5A, f->buffer_bytes_, s));
    MLA_CUDA_CHECK(cudaMemsetAsync(f->sink_, 0, sizeof(unsigned), s));
    f->blocks_ = 4 * prop.multiProcessorCount;
  }
#endif
  *out = std::move(f);
  return Status();
}

L2Flusher::~L2Flusher() {
  if (buffer_) backend_.release(buffer_);
  if (sink_) backend_.release(sink_);
}

Status L2Flusher::flush() {
#if defined(MLA_HAVE_CUDA)
  if (buffer_ != nullptr) {
    if (lead_cycles_ > 0) MLA_CUDA_CHECK(static_cast<cudaError_t>(launch_lead_spin(lead_cycles_, stream_)));
    MLA_CUDA_CHECK(static_cast<cudaError_t>(
        launch_read_flush(buffer_, buffer_bytes_, 0xFFFFFFFFu, sink_, blocks_, stream_)));
  }
#endif
  return Status();
}

}  // namespace mla::bench
