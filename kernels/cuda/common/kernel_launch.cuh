// One checked launch of a kernel with dynamic shared memory, for the .cu files of the kernel
// families (it holds a <<<...>>> launch, so only nvcc-compiled files include it).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/common/status.h"
#include "kernels/cuda/common/cuda_check.h"

namespace mla {

// Raises the kernel's dynamic shared-memory limit to `smem` bytes (needed above 48 KiB), then
// launches kernel<<<grid, threads, smem, stream>>>(args...). Either step's error is returned as a
// Status naming the step and `name`; execution errors of the kernel surface at synchronize().
template <typename... Params, typename... Args>
Status launch_with_smem(void (*kernel)(Params...), const char* name, dim3 grid, int threads, int smem,
                        cudaStream_t stream, const Args&... args) {
  const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (attr != cudaSuccess) {
    return cuda_status(attr, (std::string("cudaFuncSetAttribute(") + name + ", max dynamic shared memory)").c_str(),
                       __FILE__, __LINE__);
  }
  kernel<<<grid, threads, smem, stream>>>(args...);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    return cuda_status(launched, (std::string("launch of ") + name).c_str(), __FILE__, __LINE__);
  }
  return Status();
}

}  // namespace mla
