// Params structs of the attention kernels (docs/semantics.md §4): batched GEMM for the projections, sparse MQA
// over the FP8 cache with its work partition and combine, dense MHA (varlen, bottom-right causal
// or unmasked) and the LSE merge. Precision contract shared by every backend: bf16 operands, fp32
// accumulation, softmax in fp32 with exp(), probabilities rounded to bf16 before the P·V product,
// outputs rounded to bf16 once at the end; LSE in fp32, natural log.
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/cache_params.h"
#include "kernels/common/mla_dims.h"
#include "kernels/common/status.h"

namespace mla {

// C[b] = A[b] (M x K) * op(B[b]) (K x N), row-major, batch b in [0, batch) with element strides.
// op(B) = B (B stored K x N, ldb >= N) or B^T (B stored N x K, ldb >= K). fp32 accumulation, C
// rounded to bf16.
struct GemmParams {
  const bf16_t* a = nullptr;  // [batch][M, lda]
  int64_t lda = 0, stride_a = 0;
  const bf16_t* b = nullptr;  // [batch][K, ldb] or [batch][N, ldb] when transpose_b
  int64_t ldb = 0, stride_b = 0;
  bool transpose_b = false;
  bf16_t* c = nullptr;        // [batch][M, ldc]
  int64_t ldc = 0, stride_c = 0;
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;

  Status validate() const;
};

// One unit of sparse-MQA work: token `token`, all heads, top-k columns [k_begin, k_end). When the
// token's range is split, each split writes fp32 partials at `partial` (an index into
// partial_out / partial_lse) and the combine step merges them; partial < 0 writes out/lse directly.
struct SparseMqaWorkItem {
  int32_t token = 0;
  int32_t k_begin = 0;
  int32_t k_end = 0;
  int32_t partial = -1;
};

// The work partition ("scheduler metadata"), built on the host for exactly the tokens passed
// (plan_sparse_mqa in lib/). validate() refuses a plan whose num_tokens_planned is not num_tokens
// (failure mode 4, docs/semantics.md §6.4); the arrays themselves are device data the kernels trust, so a plan
// whose items name other tokens than it counts still corrupts memory.
struct SparseMqaMetadata {
  const SparseMqaWorkItem* items = nullptr;  // [num_items]
  int32_t num_items = 0;
  const int32_t* split_offsets = nullptr;    // [num_tokens_planned + 1] into partials; a token
                                             // with one split has offsets[t+1] - offsets[t] == 0
  int32_t num_tokens_planned = 0;
  int32_t num_partials = 0;                  // rows of partial_out / partial_lse
};

// docs/semantics.md §4.1 in latent space. The absorbed query is given in its two parts (no device copy needed
// to concatenate them): q_lat[t,h] = [q_nope_lat[t,h] (512), q_pe[t,h] (64)]. For token t, head h,
// valid j (indices[t][j] in [0, num_slots)): s_j = scale * q_lat[t,h] . k_j (576 wide),
// p = softmax(s), out_lat = sum p_j v_j (512 wide), lse = ln sum exp(s_j).
// No valid index: out_lat = 0, lse = -inf (FlashMLA reports +inf there; we use the merge identity).
struct SparseMqaParams {
  const bf16_t* q_nope_lat = nullptr;  // [num_tokens, num_heads, 512], token stride q_nope_token_stride,
  int64_t q_nope_token_stride = 0;     //   head stride q_nope_head_stride (elements)
  int64_t q_nope_head_stride = 0;
  const bf16_t* q_pe = nullptr;        // [num_tokens, num_heads, 64], strides likewise
  int64_t q_pe_token_stride = 0;
  int64_t q_pe_head_stride = 0;
  int64_t num_tokens = 0;              // rows of q, indices, out_lat, lse
  int32_t num_heads = 0;
  const int32_t* indices = nullptr;    // [num_tokens, indices_row_stride], first topk used, -1 invalid
  int64_t indices_row_stride = 0;
  int32_t topk = 0;
  PagedCacheView cache;                // read only
  float scale = 0.0f;
  bf16_t* out_lat = nullptr;           // [num_tokens, num_heads, 512] contiguous
  float* lse = nullptr;                // [num_tokens, num_heads]
  SparseMqaMetadata metadata;
  float* partial_out = nullptr;        // [num_partials, num_heads, 512] fp32 workspace
  float* partial_lse = nullptr;        // [num_partials, num_heads]

  Status validate() const;
};

// docs/semantics.md §4.2, one call over a varlen batch. q = [q_nope (128), q_pe (64)] and k = [k_nope (128),
// k_pe (64, shared by all heads)] are given in parts, so gathered cache rows ([rows, 576]: k_pe at
// column 512) and up-projected K need no concatenation. Request r has queries
// [cu_q[r], cu_q[r+1]) and keys [cu_k[r], cu_k[r+1]). Causal is bottom-right: query i of a request
// with nq queries and nk keys sees keys j <= i + (nk - nq). A query that sees no key: out = 0,
// lse = -inf. Token strides are in elements; head strides are the part's width.
struct DenseMhaParams {
  const bf16_t* q_nope = nullptr;  // [total_q, num_heads, 128], token stride q_nope_stride
  int64_t q_nope_stride = 0;
  const bf16_t* q_pe = nullptr;    // [total_q, num_heads, 64], token stride q_pe_stride
  int64_t q_pe_stride = 0;
  const bf16_t* k_nope = nullptr;  // [total_k, num_heads, 128], token stride k_nope_stride
  int64_t k_nope_stride = 0;
  const bf16_t* k_pe = nullptr;    // [total_k, 64] shared by heads, token stride k_pe_stride
  int64_t k_pe_stride = 0;
  const bf16_t* v = nullptr;       // [total_k, num_heads, 128], token stride v_stride
  int64_t v_stride = 0;
  const int32_t* cu_seqlens_q = nullptr;       // [num_reqs + 1] device memory
  const int32_t* cu_seqlens_k = nullptr;       // [num_reqs + 1] device memory
  const int32_t* cu_seqlens_q_host = nullptr;  // the same values in host memory (launch sizing,
  const int32_t* cu_seqlens_k_host = nullptr;  //   validation)
  int32_t num_reqs = 0;
  int32_t num_heads = 0;
  int64_t total_q = 0, total_k = 0;
  bool causal = true;
  float scale = 0.0f;
  bf16_t* out = nullptr;           // [total_q, num_heads, 128] contiguous
  float* lse = nullptr;            // [total_q, num_heads]

  Status validate() const;
};

// docs/semantics.md §4.2 merge of two partial attentions over the same rows: with m = max(lse_a, lse_b) (NaN
// and +inf treated as -inf), out = (e^{a-m} out_a + e^{b-m} out_b) / (e^{a-m} + e^{b-m}); both
// -inf: out = out_a, lse = -inf. out may alias out_a.
struct MergeParams {
  const bf16_t* out_a = nullptr;  // [rows, width]
  const float* lse_a = nullptr;   // [rows]
  const bf16_t* out_b = nullptr;
  const float* lse_b = nullptr;
  bf16_t* out = nullptr;
  float* lse = nullptr;
  int64_t rows = 0;               // token x head pairs
  int32_t width = 0;              // values per row (128 or 512)

  Status validate() const;
};

}  // namespace mla
