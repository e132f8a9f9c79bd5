// Timing of one operation per benchmark iteration on a backend.
//   CUDA backend: two CUDA events recorded on the backend's own stream (Backend::native_device())
//   around the work; stop() waits for the stop event and returns the device time between them.
//   Any other backend: std::chrono::steady_clock around the call, after Backend::synchronize().
// Work issued before start() (the L2 flush) is outside the timed region.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace mla::bench {

class DeviceTimer {
 public:
  static Status create(Backend& backend, std::unique_ptr<DeviceTimer>* out);
  virtual ~DeviceTimer() = default;

  virtual bool on_device() const = 0;  // true: CUDA events on the backend's stream
  virtual Status start() = 0;
  virtual Status stop(double* seconds) = 0;
  // True when the last stop() found the GPU already past the start event once the operation and
  // the stop event were queued: the caller was still launching when the timed region began (the
  // lead and the flush did not cover its launches), so the time includes launch gaps. Always false
  // for the host timer.
  virtual bool last_started_early() const { return false; }
  // The CUDA backend's stream as an opaque handle (cudaStream_t); nullptr on the host.
  virtual void* stream() const = 0;
};

}  // namespace mla::bench
