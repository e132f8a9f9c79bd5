#include "apps/mla_bench/device_timer.h"

#include <chrono>

#if defined(MLA_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/common/cuda_check.h"
#endif

namespace mla::bench {
namespace {

class HostTimer final : public DeviceTimer {
 public:
  explicit HostTimer(Backend& backend) : backend_(backend) {}
  bool on_device() const override { return false; }
  Status start() override {
    MLA_RETURN_IF_ERROR(backend_.synchronize());
    start_ = std::chrono::steady_clock::now();
    return Status();
  }
  Status stop(double* seconds) override {
    MLA_RETURN_IF_ERROR(backend_.synchronize());
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return Status();
  }
  void* stream() const override { return nullptr; }

 private:
  Backend& backend_;
  std::chrono::steady_clock::time_point start_;
};

#if defined(MLA_HAVE_CUDA)
class CudaEventTimer final : public DeviceTimer {
 public:
  explicit CudaEventTimer(cudaStream_t stream) : stream_(stream) {}
  ~CudaEventTimer() override {
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
  }
  Status init() {
    MLA_CUDA_CHECK(cudaEventCreate(&start_));
    MLA_CUDA_CHECK(cudaEventCreate(&stop_));
    return Status();
  }
  bool on_device() const override { return true; }
  Status start() override {
    MLA_CUDA_CHECK(cudaEventRecord(start_, stream_));
    return Status();
  }
  Status stop(double* seconds) override {
    MLA_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    // cudaErrorNotReady (the GPU is still in the lead or the flush) is the expected answer, not an
    // error; it is not sticky.
    const cudaError_t reached = cudaEventQuery(start_);
    if (reached != cudaSuccess && reached != cudaErrorNotReady) MLA_CUDA_CHECK(reached);
    started_early_ = reached == cudaSuccess;
    MLA_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    MLA_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    *seconds = static_cast<double>(ms) * 1e-3;
    return Status();
  }
  void* stream() const override { return stream_; }
  bool last_started_early() const override { return started_early_; }

 private:
  cudaStream_t stream_;
  bool started_early_ = false;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};
#endif

}  // namespace

Status DeviceTimer::create(Backend& backend, std::unique_ptr<DeviceTimer>* out) {
#if defined(MLA_HAVE_CUDA)
  const NativeDevice device = backend.native_device();
  if (device.kind == NativeDevice::Kind::kCuda) {
    auto timer = std::make_unique<CudaEventTimer>(static_cast<cudaStream_t>(device.stream));
    MLA_RETURN_IF_ERROR(timer->init());
    *out = std::move(timer);
    return Status();
  }
#endif
  *out = std::make_unique<HostTimer>(backend);
  return Status();
}

}  // namespace mla::bench
