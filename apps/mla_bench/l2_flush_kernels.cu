// The read pass of the L2 flush (l2_flush.h): every 16-byte word of the buffer is loaded once, so
// the lines left in L2 afterwards are the flush buffer's own, clean ones; and the lead before it.
#include <cuda_runtime.h>

#include <cstddef>

#include "apps/mla_bench/l2_flush.h"

namespace mla::bench {
namespace {

// Grid-stride read of `words` uint4s. The xor of everything a thread read goes to `sink` only when
// it equals `impossible`, a value the buffer's contents cannot produce (l2_flush.cpp fills it with
// 0x5A bytes: every word xors to 0), so the loads cannot be dropped and nothing is written.
__global__ void read_flush_kernel(const uint4* __restrict__ buf, size_t words, unsigned impossible,
                                  unsigned* __restrict__ sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(buf + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == impossible) *sink = acc;
}

// The lead (l2_flush.h): one thread, no memory traffic, until its SM's clock64 has advanced by
// `cycles`.
__global__ void lead_spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

int launch_lead_spin(int64_t cycles, void* stream) {
  lead_spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<long long>(cycles));
  return static_cast<int>(cudaGetLastError());
}

int launch_read_flush(const void* buffer, size_t bytes, unsigned impossible, unsigned* sink, int blocks,
                      void* stream) {
  read_flush_kernel<<<blocks, 512, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<const uint4*>(buffer),
                                                                              bytes / sizeof(uint4), impossible, sink);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace mla::bench
