// Row-major strided-batched GEMM on cuBLAS: C[b] = A[b] (M x K) * op(B[b]) (K x N), bf16 in and
// out, fp32 compute.
//
// cuBLAS is column-major. A row-major matrix X (rows x cols, leading dimension ld) is, read
// column-major with the same ld, X^T. So the row-major problem C = A op(B) is solved as the
// column-major C^T (N x M) = op(B)^T (N x K) * A^T (K x M):
//   cuBLAS "A" = our B: not transposed when B is stored K x N (column-major N x K = B^T, which is
//                op(B)^T), transposed when B is stored N x K (transpose_b: column-major K x N = B^T,
//                and op(B)^T = B is its transpose); leading dimension ldb either way.
//   cuBLAS "B" = our A, not transposed (column-major K x M = A^T), leading dimension lda.
//   cuBLAS "C" = our C (column-major N x M = C^T), leading dimension ldc.
// Batch strides carry over unchanged (0 = the operand is shared by every batch).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/cuda/gemm/gemm_launcher.h"
#include "kernels/cuda/common/cuda_check.h"

namespace mla {
namespace {

Status cublas_status(cublasStatus_t st, const char* what, const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return Status();
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                    cublasGetStatusName(st) + " (" + cublasGetStatusString(st) + ")";
  return Status::error(std::move(msg));
}

#define MLA_CUBLAS_CHECK(call)                                                          \
  do {                                                                                  \
    const cublasStatus_t mla_cublas_st_ = (call);                                       \
    if (mla_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                        \
      return cublas_status(mla_cublas_st_, #call, __FILE__, __LINE__);                  \
  } while (0)

Status require_int(const char* name, int64_t v) {
  if (v > INT_MAX) {
    return Status::error(std::string("launch_gemm: ") + name + " = " + std::to_string(v) +
                         " exceeds the 32-bit range of cublasGemmStridedBatchedEx");
  }
  return Status();
}

}  // namespace

Status launch_gemm(const GemmParams& p, cudaStream_t stream, cublasHandle_t handle) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.m == 0 || p.batch == 0) return Status();
  if (handle == nullptr) return Status::error("launch_gemm: the cuBLAS handle is null");
  MLA_RETURN_IF_ERROR(require_int("m", p.m));
  MLA_RETURN_IF_ERROR(require_int("n", p.n));
  MLA_RETURN_IF_ERROR(require_int("k", p.k));
  MLA_RETURN_IF_ERROR(require_int("lda", p.lda));
  MLA_RETURN_IF_ERROR(require_int("ldb", p.ldb));
  MLA_RETURN_IF_ERROR(require_int("ldc", p.ldc));

  MLA_CUBLAS_CHECK(cublasSetStream(handle, stream));
  MLA_CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
  // fp32 accumulation end to end: no split-K partial sums rounded to the output type.
  MLA_CUBLAS_CHECK(cublasSetMathMode(
      handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));

  const float alpha = 1.0f, beta = 0.0f;
  const cublasOperation_t op_b = p.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  MLA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, op_b, CUBLAS_OP_N, static_cast<int>(p.n), static_cast<int>(p.m), static_cast<int>(p.k), &alpha,
      p.b, CUDA_R_16BF, static_cast<int>(p.ldb), static_cast<long long>(p.stride_b),  //
      p.a, CUDA_R_16BF, static_cast<int>(p.lda), static_cast<long long>(p.stride_a),  //
      &beta, p.c, CUDA_R_16BF, static_cast<int>(p.ldc), static_cast<long long>(p.stride_c), p.batch,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // cuBLAS reports its own argument errors; a launch failure inside it shows here or at sync.
  MLA_CUDA_CHECK_LAUNCH("cublasGemmStridedBatchedEx");
  return Status();
}

}  // namespace mla
