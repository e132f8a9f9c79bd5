// The empty kernel whose launch latency is the floor of every event-timed launch (roofline.h).
#include <cuda_runtime.h>

#include "apps/mla_bench/roofline.h"

namespace mla::bench {
namespace {
__global__ void empty_kernel() {}
}  // namespace

int launch_empty_kernel(void* stream) {
  empty_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>();
  return static_cast<int>(cudaGetLastError());
}

}  // namespace mla::bench
