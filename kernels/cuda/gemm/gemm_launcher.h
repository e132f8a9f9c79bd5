// Row-major strided-batched C = A op(B) on cuBLAS (gemm_cublas.cu): bf16 in and out, fp32 compute
// (CUBLAS_COMPUTE_32F, reduced-precision reductions disallowed). Calls params.validate() and
// returns its error unchanged; sets the handle's stream, pointer mode and math mode for the call
// and checks every cuBLAS call (the message names the file and line). stride_a / stride_b may be 0
// (an operand shared by every batch). Pointers are device pointers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/common/attention_params.h"
#include "kernels/common/status.h"

namespace mla {

Status launch_gemm(const GemmParams& p, cudaStream_t stream, cublasHandle_t handle);

}  // namespace mla
