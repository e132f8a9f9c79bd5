// The one place the attention params are assembled from the harness's token-major layouts:
// queries, keys and values contiguous per token ([tokens, heads, width]), top-k indices
// [tokens, topk], per-request lengths as prefix sums. The checks, the forward step, the dcp merge
// tree and mla-bench describe a call by what it works on; the strides and counts follow from that here.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/attention_params.h"

namespace mla {

// Sparse MQA (docs/semantics.md §4.1) over `tokens` query tokens of `heads` heads.
struct SparseMqaCall {
  int64_t tokens = 0;
  int32_t heads = 0;
  int32_t topk = 0;
  float scale = 0.0f;
  const bf16_t* q_nope_lat = nullptr;  // [tokens, heads, 512]
  const bf16_t* q_pe = nullptr;        // [tokens, heads, 64]
  const int32_t* indices = nullptr;    // [tokens, topk] global slots, -1 invalid
  PagedCacheView cache;
  bf16_t* out_lat = nullptr;           // [tokens, heads, 512]
  float* lse = nullptr;                // [tokens, heads]
};
// The params without their work partition (attach_plan, lib/pipeline/sparse_mqa_plan.h, adds it).
SparseMqaParams sparse_mqa_params(const SparseMqaCall& c);

// Dense MHA (docs/semantics.md §4.2) over a varlen batch. k_pe is shared by the heads and may
// be a column block of wider rows (gathered cache rows: [rows, 576] with k_pe at column 512).
struct DenseMhaCall {
  int32_t heads = 0;
  bool causal = true;
  float scale = 0.0f;
  const std::vector<int32_t>* cu_q_host = nullptr;  // [requests + 1] prefix sums of query lengths
  const std::vector<int32_t>* cu_k_host = nullptr;  // [requests + 1] prefix sums of key lengths
  const int32_t* cu_q = nullptr;                    // the same values in backend memory
  const int32_t* cu_k = nullptr;
  const bf16_t* q_nope = nullptr;  // [total_q, heads, 128]
  const bf16_t* q_pe = nullptr;    // [total_q, heads, 64]
  const bf16_t* k_nope = nullptr;  // [total_k, heads, 128]
  const bf16_t* k_pe = nullptr;    // [total_k, k_pe_stride], first 64 used
  int64_t k_pe_stride = 64;
  const bf16_t* v = nullptr;       // [total_k, heads, 128]
  bf16_t* out = nullptr;           // [total_q, heads, 128]
  float* lse = nullptr;            // [total_q, heads]
};
DenseMhaParams dense_mha_params(const DenseMhaCall& c);

// The LSE merge (docs/semantics.md §4.2) of part b into part a, in place: out and lse [rows, width]
// hold part a and receive the merged result.
MergeParams merge_in_place_params(bf16_t* out, float* lse, const bf16_t* out_b, const float* lse_b, int64_t rows,
                                  int32_t width);

// Prefix sums [0, l0, l0 + l1, ...] of per-request lengths.
std::vector<int32_t> prefix_sums(const std::vector<int32_t>& lens);

}  // namespace mla
