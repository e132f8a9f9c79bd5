// Cold-L2 timing: before each timed iteration, write a buffer of at least twice the device's L2
// size (cudaDeviceProp::l2CacheSize) on the backend's stream, so that the operation's inputs are
// no longer cached when it starts. The writes are issued before the start event: outside the
// timed region. On the host backend flush() does nothing (host figures are warm-cache).
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/backend.h"

namespace mla::bench {

class L2Flusher {
 public:
  // stream: the CUDA backend's stream (DeviceTimer::stream()); nullptr on the host.
  static Status create(Backend& backend, void* stream, std::unique_ptr<L2Flusher>* out);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;

  Status flush();
  std::size_t l2_bytes() const { return l2_bytes_; }
  std::size_t buffer_bytes() const { return buffer_bytes_; }

 private:
  L2Flusher(Backend& backend, void* stream) : backend_(backend), stream_(stream) {}
  Backend& backend_;
  void* stream_ = nullptr;
  void* buffer_ = nullptr;
  std::size_t l2_bytes_ = 0;
  std::size_t buffer_bytes_ = 0;
  unsigned flushes_ = 0;
};

}  // namespace mla::bench
