// Whether an arch-specific kernel can run on a device (the `wgmma` kernels: compute capability 9.0
// and an sm_90a image that loads there), asked by the launchers at every call and answered once
// per device. Host-only.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>

namespace mla {

// True when `device` is compute capability major.minor (false, with the runtime error cleared, when
// the device cannot be queried).
inline bool is_compute_capability(int device, int major, int minor) {
  int got_major = 0, got_minor = 0;
  if (cudaDeviceGetAttribute(&got_major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&got_minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return got_major == major && got_minor == minor;
}

// The attributes of `kernel`'s image for the current device; false, with the runtime error cleared,
// when there is no loadable image (the caller falls back to another implementation).
template <class Kernel>
bool kernel_attributes(Kernel kernel, cudaFuncAttributes* attr) {
  *attr = cudaFuncAttributes{};
  if (cudaFuncGetAttributes(attr, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

// probe(device), computed the first time each device is asked about and kept (the answer cannot
// change while the process runs). Thread-safe. T: bool for "can this kernel run here", or a
// number the launcher sizes its grid with.
template <class T = bool>
class PerDeviceAnswer {
 public:
  explicit PerDeviceAnswer(T (*probe)(int device)) : probe_(probe) {}

  T get(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = answers_.find(device);
    if (it != answers_.end()) return it->second;
    const T answer = probe_(device);
    answers_.emplace(device, answer);
    return answer;
  }

 private:
  std::mutex mu_;
  T (*probe_)(int device);
  std::map<int, T> answers_;
};

}  // namespace mla
