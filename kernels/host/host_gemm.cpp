// Host batched GEMM (the projections of docs/semantics.md §4): C[b] = A[b] op(B[b]), bf16 in, fp32 accumulate,
// bf16 out. Single-threaded; the inner loop runs over contiguous columns of C so the compiler
// vectorises it without reassociating any sum.
//
// Per batch: B is widened to an fp32 panel [K, N] once (transposed on the way when
// transpose_b). Rows of A are taken kRowBlock at a time, widened to fp32; for k = 0..K-1 every
// C element of the block gets c += a[i][k] * panel[k][n] in fp32 (so each element sums its K
// products in increasing k), then the block is rounded to bf16 (RNE) and stored.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {
namespace {

constexpr int kRowBlock = 4;  // rows of A sharing one pass over the B panel

void widen_panel(const GemmParams& p, const bf16_t* b, std::vector<float>& panel) {
  const int64_t n_cols = p.n, depth = p.k;
  if (p.transpose_b) {
    // B stored [N, K]: element (k, n) at n * ldb + k.
    for (int64_t n = 0; n < n_cols; ++n) {
      const bf16_t* src = b + n * p.ldb;
      for (int64_t k = 0; k < depth; ++k) panel[k * n_cols + n] = bf16_to_f32(src[k]);
    }
  } else {
    for (int64_t k = 0; k < depth; ++k) {
      const bf16_t* src = b + k * p.ldb;
      float* dst = &panel[k * n_cols];
      for (int64_t n = 0; n < n_cols; ++n) dst[n] = bf16_to_f32(src[n]);
    }
  }
}

}  // namespace

void gemm(const GemmParams& p) {
  if (p.m == 0 || p.batch == 0) return;
  const int64_t M = p.m, N = p.n, K = p.k;
  std::vector<float> panel(static_cast<size_t>(K * N));
  std::vector<float> a_rows(static_cast<size_t>(kRowBlock * K));
  std::vector<float> c_rows(static_cast<size_t>(kRowBlock * N));
  const bf16_t* panel_of = nullptr;  // B pointer the panel holds (stride_b == 0 shares it)

  for (int32_t batch = 0; batch < p.batch; ++batch) {
    const bf16_t* a = p.a + batch * p.stride_a;
    const bf16_t* b = p.b + batch * p.stride_b;
    bf16_t* c = p.c + batch * p.stride_c;
    if (b != panel_of) {
      widen_panel(p, b, panel);
      panel_of = b;
    }
    for (int64_t i0 = 0; i0 < M; i0 += kRowBlock) {
      const int rows = static_cast<int>(std::min<int64_t>(kRowBlock, M - i0));
      // Missing rows of a partial block stay 0 and are computed but not stored.
      std::fill(a_rows.begin(), a_rows.end(), 0.0f);
      for (int r = 0; r < rows; ++r) {
        const bf16_t* src = a + (i0 + r) * p.lda;
        float* dst = &a_rows[static_cast<size_t>(r * K)];
        for (int64_t k = 0; k < K; ++k) dst[k] = bf16_to_f32(src[k]);
      }
      std::fill(c_rows.begin(), c_rows.end(), 0.0f);
      float* c0 = &c_rows[0];
      float* c1 = c0 + N;
      float* c2 = c1 + N;
      float* c3 = c2 + N;
      for (int64_t k = 0; k < K; ++k) {
        const float a0 = a_rows[k], a1 = a_rows[K + k], a2 = a_rows[2 * K + k], a3 = a_rows[3 * K + k];
        const float* bk = &panel[static_cast<size_t>(k * N)];
        for (int64_t n = 0; n < N; ++n) {
          const float bv = bk[n];
          c0[n] += a0 * bv;
          c1[n] += a1 * bv;
          c2[n] += a2 * bv;
          c3[n] += a3 * bv;
        }
      }
      for (int r = 0; r < rows; ++r) {
        bf16_t* dst = c + (i0 + r) * p.ldc;
        const float* src = &c_rows[static_cast<size_t>(r * N)];
        for (int64_t n = 0; n < N; ++n) dst[n] = f32_to_bf16_rne(src[n]);
      }
    }
  }
}

}  // namespace mla::host
