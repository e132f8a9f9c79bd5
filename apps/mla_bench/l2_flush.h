// Cold-L2 timing: before each timed iteration, read a buffer of at least twice the device's L2
// size (cudaDeviceProp::l2CacheSize) on the backend's stream, so that the operation's inputs are
// no longer cached when it starts. The reads are issued before the start event: outside the
// timed region. A read, not a write: a written flush leaves tens of MB of dirty lines in L2 whose
// write-back then lands inside the next timed region (measured on an H200: a 118 MB gather took
// 37 us after a written flush), a cost of the benchmark, not of the operation. The buffer is
// written once, at creation (never read uninitialised). On the host backend flush() does nothing
// (host figures are warm-cache).
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
  unsigned* sink_ = nullptr;  // 4 bytes the read pass would write only on an impossible value
  int blocks_ = 0;
};

// Defined in l2_flush_kernels.cu (CUDA builds only): launches the read pass over `bytes` (a multiple
// of 16) of `buffer` on `stream`; returns the launch's cudaError_t.
int launch_read_flush(const void* buffer, std::size_t bytes, unsigned impossible, unsigned* sink, int blocks,
                      void* stream);

}  // namespace mla::bench
