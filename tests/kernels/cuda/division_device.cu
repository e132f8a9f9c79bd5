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

// Counts one pair into tested / differ / naive (DivisionCounts' order).
__device__ void compare_pair(float acc, float l, unsigned long long (&c)[3]) {
  if (!attn_dev::division_divisor_ok(l) || !attn_dev::division_value_ok(acc)) return;
  ++c[0];
  const uint32_t ref = __float_as_uint(__fdiv_rn(acc, l));
  if (__float_as_uint(attn_dev::divide_by(acc, l, attn_dev::division_reciprocal(l))) != ref) ++c[1];
  if (__float_as_uint(__fmul_rn(acc, __frcp_rn(l))) != ref) ++c[2];
}

__global__ void compare_kernel(DivisionOperands operands, unsigned long long* counts) {
  const uint64_t thread = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  unsigned long long c[3] = {0, 0, 0};
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
    compare_pair(acc, l, c);
  }
  for (int i = 0; i < 3; ++i) atomicAdd(counts + i, c[i]);
}

__global__ void compare_pairs_kernel(const float* acc, int n_acc, const float* l, int n_l, unsigned long long* counts) {
  const int i = blockIdx.x * kThreads + threadIdx.x;
  if (i >= n_acc * n_l) return;
  unsigned long long c[3] = {0, 0, 0};
  compare_pair(acc[i % n_acc], l[i / n_acc], c);
  for (int k = 0; k < 3; ++k) atomicAdd(counts + k, c[k]);
}

bool fail(cudaError_t err, const char* what, std::string* why) {
  (void)cudaGetLastError();
  *why = err == cudaErrorNoKernelImageForDevice
             ? "no kernel image for this device"
             : std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  return false;
}

bool have_device(std::string* why) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    *why = "no CUDA device";
    return false;
  }
  return true;
}

// Runs `launch(counts)` on zeroed device counters and copies them into *counts.
template <typename Launch>
bool run_counted(Launch launch, DivisionCounts* counts, std::string* why) {
  unsigned long long* d = nullptr;
  cudaError_t err = cudaMalloc(&d, 3 * sizeof(unsigned long long));
  if (err != cudaSuccess) return fail(err, "cudaMalloc", why);
  unsigned long long h[3] = {0, 0, 0};
  err = cudaMemset(d, 0, sizeof(h));
  if (err == cudaSuccess) err = launch(d);
  if (err == cudaSuccess) err = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
  (void)cudaFree(d);
  if (err != cudaSuccess) return fail(err, "the comparison kernel", why);
  *counts = DivisionCounts{h[0], h[1], h[2]};
  return true;
}

}  // namespace

bool compare_row_division(DivisionOperands operands, unsigned long long pairs, DivisionCounts* counts,
                          std::string* why) {
  if (!have_device(why)) return false;
  constexpr unsigned long long kPerBlock = static_cast<unsigned long long>(kThreads) * kPairsPerThread;
  const unsigned long long blocks = ((pairs + (1ULL << 20) - 1) >> 20 << 20) / kPerBlock;
  return run_counted(
      [&](unsigned long long* d) {
        compare_kernel<<<static_cast<unsigned>(blocks), kThreads>>>(operands, d);
        return cudaGetLastError();
      },
      counts, why);
}

bool compare_division_pairs(const std::vector<float>& acc, const std::vector<float>& l, DivisionCounts* counts,
                            std::string* why) {
  if (!have_device(why)) return false;
  float* d_values = nullptr;
  const std::size_t n = acc.size() + l.size();
  cudaError_t err = cudaMalloc(&d_values, (n > 0 ? n : 1) * sizeof(float));
  if (err != cudaSuccess) return fail(err, "cudaMalloc", why);
  err = cudaMemcpy(d_values, acc.data(), acc.size() * sizeof(float), cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    err = cudaMemcpy(d_values + acc.size(), l.data(), l.size() * sizeof(float), cudaMemcpyHostToDevice);
  }
  bool ok = false;
  if (err != cudaSuccess) {
    ok = fail(err, "cudaMemcpy", why);
  } else {
    const int n_acc = static_cast<int>(acc.size()), n_l = static_cast<int>(l.size());
    const int blocks = (n_acc * n_l + kThreads - 1) / kThreads;
    ok = run_counted(
        [&](unsigned long long* d) {
          if (blocks > 0) compare_pairs_kernel<<<blocks, kThreads>>>(d_values, n_acc, d_values + n_acc, n_l, d);
          return cudaGetLastError();
        },
        counts, why);
  }
  (void)cudaFree(d_values);
  return ok;
}

}  // namespace mla::test_device
