#include "tests/kernels/cuda/division_device.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_device.cuh"

namespace mla::test_device {
namespace {

constexpr int kThreads = 256;
constexpr int kPairsPerThread = 64;

__device__ uint32_t hash(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void compare_kernel(DivisionOperands operands, unsigned long long* counts) {
  const uint64_t thread = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  unsigned long long tested = 0, differ = 0, naive = 0;
  for (int k = 0; k < kPairsPerThread; ++k) {
    const uint64_t i = thread * kPairsPerThread + k;
    const uint32_t r1 = hash(2 * i), r2 = hash(2 * i + 1), r3 = hash(r1 ^ (uint64_t{r2} << 32));
    float acc, l;
    if (operands == DivisionOperands::kWholeRange) {
      acc = __uint_as_float(((r1 % 128u + 127u - 64u) << 23) | (r2 & 0x7FFFFFu) | (r1 & 0x80000000u));
      l = __uint_as_float(((r3 % 34u + 126u) << 23) | (hash(r3) & 0x7FFFFFu));
    } else {
      l = __uint_as_float(((r2 % 12u + 127u) << 23) | (r3 & 0x7FFFFFu));
      acc = l * ((__uint_as_float((r1 & 0x807FFFFFu) | (127u << 23)) - 1.0f) * 4.0f + 0x1p-40f);
    }
    if (!attn_dev::division_divisor_ok(l) || !attn_dev::division_value_ok(acc)) continue;
    ++tested;
    const uint32_t ref = __float_as_uint(__fdiv_rn(acc, l));
    if (__float_as_uint(attn_dev::divide_by(acc, l, attn_dev::division_reciprocal(l))) != ref) ++differ;
    if (__float_as_uint(__fmul_rn(acc, __frcp_rn(l))) != ref) ++naive;
  }
  atomicAdd(counts, tested);
  atomicAdd(counts + 1, differ);
  atomicAdd(counts + 2, naive);
}

bool fail(cudaError_t err, const char* what, std::string* why) {
  *why = std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  return false;
}

}  // namespace

bool compare_row_division(DivisionOperands operands, unsigned long long pairs, DivisionCounts* counts,
                          std::string* why) {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    *why = "no CUDA device";
    return false;
  }
  constexpr unsigned long long kPerBlock = static_cast<unsigned long long>(kThreads) * kPairsPerThread;
  const unsigned long long blocks = ((pairs + (1ULL << 20) - 1) >> 20 << 20) / kPerBlock;
  unsigned long long* d = nullptr;
  if ((err = cudaMalloc(&d, 3 * sizeof(unsigned long long))) != cudaSuccess) return fail(err, "cudaMalloc", why);
  unsigned long long h[3] = {0, 0, 0};
  err = cudaMemset(d, 0, sizeof(h));
  if (err == cudaSuccess) {
    compare_kernel<<<static_cast<unsigned>(blocks), kThreads>>>(operands, d);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  (void)cudaFree(d);
  if (err != cudaSuccess) return fail(err, "compare_kernel", why);
  *counts = DivisionCounts{h[0], h[1], h[2]};
  return true;
}

}  // namespace mla::test_device
