// What the attention launchers (dense_mha_launcher.cu, sparse_mqa_launcher.cu) check before they
// choose and launch an implementation: whether the wgmma kernels are built, the device's opt-in
// shared memory per block, the simple kernel's shared memory and the grid's x limit. Host-only.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "kernels/common/status.h"
#include "kernels/cuda/common/cuda_check.h"

// 1 where kernels/CMakeLists.txt builds the sm_90a wgmma kernels, else 0.
#if !defined(MLA_HAVE_WGMMA)
#define MLA_HAVE_WGMMA 0
#endif

namespace mla {

// The shared memory per block that `device` allows a kernel which opts in.
inline Status smem_optin(int device, int* optin) {
  MLA_CUDA_CHECK(cudaDeviceGetAttribute(optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return Status();
}

// The current device and its opt-in shared memory per block.
inline Status current_device_smem_optin(int* device, int* optin) {
  MLA_CUDA_CHECK(cudaGetDevice(device));
  return smem_optin(*device, optin);
}

// The simple kernel, the last fallback, needs `smem` bytes of shared memory per block: an error
// naming `launcher` where the device allows fewer (`optin`).
inline Status require_simple_smem(const char* launcher, int optin, int smem) {
  if (optin >= smem) return Status();
  return Status::error(std::string(launcher) + ": the device allows " + std::to_string(optin) +
                       " bytes of shared memory per block; the simple kernel needs " + std::to_string(smem));
}

// A grid of `blocks` CTAs along x: an error naming `launcher` past the grid's x limit.
inline Status require_grid_x(const char* launcher, int64_t blocks) {
  if (blocks <= INT_MAX) return Status();
  return Status::error(std::string(launcher) + ": " + std::to_string(blocks) + " CTAs exceed the grid's x limit");
}

}  // namespace mla
