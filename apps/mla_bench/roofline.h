// Ceilings measured at startup, in the same run as the benchmarks, so that every figure can be
// read against what this machine actually does:
//   - copy bandwidth: CUDA backend, cudaMemcpyAsync device-to-device of a 2 GiB buffer on the
//     backend's stream, timed with events; host backend, std::memcpy of a 256 MiB buffer. Bytes
//     read + bytes written over the median time of several copies.
//   - empty-kernel latency (CUDA only): events around the launch of a kernel that does nothing,
//     the floor of any launch timed the same way; median of many.
#pragma once

#include <cstddef>
#include <string>

#include "apps/mla_bench/device_timer.h"
#include "apps/mla_bench/l2_flush.h"
#include "kernels/backend.h"

namespace mla::bench {

struct Roofline {
  double copy_bytes_per_second = 0.0;   // (read + written) / median time
  std::size_t copy_buffer_bytes = 0;    // one buffer (the copy reads it and writes another)
  int copy_samples = 0;
  double empty_launch_seconds = 0.0;    // 0: not measured (host backend)
  int launch_samples = 0;
  std::string method;                   // one line: how the numbers were taken
};

Status measure_roofline(Backend& backend, DeviceTimer& timer, Roofline* out);

// The ceiling of a memory-bound operation at its own size: a cudaMemcpyAsync device-to-device of
// total_bytes / 2 (so total_bytes read + written), timed exactly like a benchmark iteration (L2
// flushed, events, median of the same number of copies as the startup figure). A copy of 118 MB
// does not reach the 2 GiB copy's rate (ramp-up and tail are a larger share), so this says how
// much of an operation's gap to the startup figure any kernel moving those bytes would have.
// *bytes_per_second = 0 when not measured: the host backend, or the copy's buffers do not fit
// beside the shape's.
Status measure_sized_copy(Backend& backend, DeviceTimer& timer, L2Flusher& flusher, std::size_t total_bytes,
                          double* bytes_per_second);

// Launches an empty kernel on `stream` (a cudaStream_t); returns the cudaError_t of the launch.
// Defined in roofline_kernels.cu, only in CUDA builds.
int launch_empty_kernel(void* stream);

}  // namespace mla::bench
