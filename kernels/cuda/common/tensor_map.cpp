#include "kernels/cuda/common/tensor_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace mla::cuda_tma {
namespace {

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// The driver's cuTensorMapEncodeTiled (looked up once); nullptr when the driver does not have it.
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = []() -> EncodeTiled {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
#else  // CUDA 12.0 - 12.4: the by-version query does not exist yet
    const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &found);
#endif
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

}  // namespace

bool encode_bf16_sw128(CUtensorMap* map, const void* base, uint32_t rank, const cuuint64_t* dims,
                       const cuuint64_t* strides, const cuuint32_t* box, bool* no_driver) {
  const EncodeTiled fn = encode_tiled();
  if (no_driver != nullptr) *no_driver = fn == nullptr;
  if (fn == nullptr || rank < 1 || rank > 5) return false;
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, const_cast<void*>(base), dims, strides, box,
            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace mla::cuda_tma
