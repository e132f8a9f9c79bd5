#include "apps/mla_bench/roofline.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#if defined(MLA_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/common/cuda_check.h"
#endif

namespace mla::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

constexpr int kCopySamples = 9;
constexpr int kCopyWarmup = 2;
constexpr int kLaunchSamples = 201;
constexpr int kLaunchWarmup = 20;

Status measure_host(Roofline* out) {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<unsigned char> src(bytes, 0x5A), dst(bytes, 0x00);  // touched: no page faults timed
  std::vector<double> t;
  for (int i = 0; i < kCopyWarmup + kCopySamples; ++i) {
    src[static_cast<size_t>(i) * 4096 % bytes] = static_cast<unsigned char>(i);
    const auto a = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const auto b = std::chrono::steady_clock::now();
    if (i >= kCopyWarmup) t.push_back(std::chrono::duration<double>(b - a).count());
  }
  volatile unsigned char sink = dst[bytes / 2];
  (void)sink;
  out->copy_buffer_bytes = bytes;
  out->copy_samples = kCopySamples;
  out->copy_bytes_per_second = 2.0 * static_cast<double>(bytes) / median(t);
  out->method = "std::memcpy of 256 MiB, (read + written) / median of " + std::to_string(kCopySamples);
  return Status();
}

#if defined(MLA_HAVE_CUDA)
// Fills src with 0x5A (not zeros: METHOD, never time zeros), then times kCopyWarmup + kCopySamples
// device-to-device copies of `bytes` with events, the L2 flushed before each when `flusher` is
// given; *t receives the kCopySamples timed ones.
Status time_copies(DeviceTimer& timer, L2Flusher* flusher, void* src, void* dst, std::size_t bytes,
                   std::vector<double>* t) {
  const auto stream = static_cast<cudaStream_t>(timer.stream());
  MLA_CUDA_CHECK(cudaMemsetAsync(src, 0x5A, bytes, stream));
  for (int i = 0; i < kCopyWarmup + kCopySamples; ++i) {
    if (flusher != nullptr) MLA_RETURN_IF_ERROR(flusher->flush());
    MLA_RETURN_IF_ERROR(timer.start());
    MLA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    double s = 0.0;
    MLA_RETURN_IF_ERROR(timer.stop(&s));
    if (i >= kCopyWarmup) t->push_back(s);
  }
  return Status();
}

Status measure_cuda(Backend& backend, DeviceTimer& timer, Roofline* out) {
  const auto stream = static_cast<cudaStream_t>(timer.stream());
  // 2 GiB source and destination; halve on allocation failure (a small device), down to 256 MiB.
  std::size_t bytes = std::size_t{2} << 30;
  void* src = nullptr;
  void* dst = nullptr;
  while (true) {
    Status a = backend.allocate(bytes, &src);
    Status b = a.ok() ? backend.allocate(bytes, &dst) : a;
    if (a.ok() && b.ok()) break;
    if (a.ok()) backend.release(src);
    src = dst = nullptr;
    if (bytes <= (std::size_t{256} << 20)) return Status::error("copy-bandwidth buffers: " + b.message());
    bytes /= 2;
  }
  auto release = [&] {
    backend.release(src);
    backend.release(dst);
  };
  std::vector<double> t;
  Status st = time_copies(timer, nullptr, src, dst, bytes, &t);
  release();
  MLA_RETURN_IF_ERROR(st);
  out->copy_buffer_bytes = bytes;
  out->copy_samples = kCopySamples;
  out->copy_bytes_per_second = 2.0 * static_cast<double>(bytes) / median(t);

  std::vector<double> l;
  for (int i = 0; i < kLaunchWarmup + kLaunchSamples; ++i) {
    MLA_RETURN_IF_ERROR(timer.start());
    MLA_CUDA_CHECK(static_cast<cudaError_t>(launch_empty_kernel(stream)));
    double s = 0.0;
    MLA_RETURN_IF_ERROR(timer.stop(&s));
    if (i >= kLaunchWarmup) l.push_back(s);
  }
  out->empty_launch_seconds = median(l);
  out->launch_samples = kLaunchSamples;
  out->method = "cudaMemcpyAsync D2D of " + std::to_string(bytes >> 20) + " MiB, (read + written) / median of " +
                std::to_string(kCopySamples) + " event-timed copies; empty kernel: median of " +
                std::to_string(kLaunchSamples) + " event-timed launches";
  return Status();
}
#endif

}  // namespace

Status measure_sized_copy(Backend& backend, DeviceTimer& timer, L2Flusher& flusher, std::size_t total_bytes,
                          double* bytes_per_second) {
  *bytes_per_second = 0.0;
#if defined(MLA_HAVE_CUDA)
  if (!timer.on_device()) return Status();
  const std::size_t bytes = std::max<std::size_t>(total_bytes / 2, 16);
  void* src = nullptr;
  void* dst = nullptr;
  // The shape's own buffers are still held: when the copy's do not fit as well, the ceiling is
  // not measured (0), which is not an error of the benchmark.
  if (!backend.allocate(bytes, &src).ok()) return Status();
  if (!backend.allocate(bytes, &dst).ok()) {
    backend.release(src);
    return Status();
  }
  std::vector<double> t;
  Status st = time_copies(timer, &flusher, src, dst, bytes, &t);
  backend.release(src);
  backend.release(dst);
  MLA_RETURN_IF_ERROR(st);
  *bytes_per_second = 2.0 * static_cast<double>(bytes) / median(t);
#else
  (void)backend;
  (void)timer;
  (void)flusher;
  (void)total_bytes;
#endif
  return Status();
}

Status measure_roofline(Backend& backend, DeviceTimer& timer, Roofline* out) {
  *out = Roofline();
#if defined(MLA_HAVE_CUDA)
  if (timer.on_device()) return measure_cuda(backend, timer, out);
#endif
  (void)backend;
  (void)timer;
  return measure_host(out);
}

}  // namespace mla::bench
