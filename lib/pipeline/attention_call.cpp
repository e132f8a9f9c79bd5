#include "lib/pipeline/attention_call.h"

#include <numeric>

#include "kernels/common/mla_dims.h"

namespace mla {

SparseMqaParams sparse_mqa_params(const SparseMqaCall& c) {
  SparseMqaParams p;
  p.q_nope_lat = c.q_nope_lat;
  p.q_nope_token_stride = int64_t{c.heads} * kDc;
  p.q_nope_head_stride = kDc;
  p.q_pe = c.q_pe;
  p.q_pe_token_stride = int64_t{c.heads} * kDr;
  p.q_pe_head_stride = kDr;
  p.num_tokens = c.tokens;
  p.num_heads = c.heads;
  p.indices = c.indices;
  p.indices_row_stride = c.topk;
  p.topk = c.topk;
  p.cache = c.cache;
  p.scale = c.scale;
  p.out_lat = c.out_lat;
  p.lse = c.lse;
  return p;
}

DenseMhaParams dense_mha_params(const DenseMhaCall& c) {
  DenseMhaParams p;
  p.q_nope = c.q_nope;
  p.q_nope_stride = int64_t{c.heads} * kDn;
  p.q_pe = c.q_pe;
  p.q_pe_stride = int64_t{c.heads} * kDr;
  p.k_nope = c.k_nope;
  p.k_nope_stride = int64_t{c.heads} * kDn;
  p.k_pe = c.k_pe;
  p.k_pe_stride = c.k_pe_stride;
  p.v = c.v;
  p.v_stride = int64_t{c.heads} * kDv;
  p.cu_seqlens_q = c.cu_q;
  p.cu_seqlens_k = c.cu_k;
  p.cu_seqlens_q_host = c.cu_q_host->data();
  p.cu_seqlens_k_host = c.cu_k_host->data();
  p.num_reqs = static_cast<int32_t>(c.cu_q_host->size()) - 1;
  p.num_heads = c.heads;
  p.total_q = c.cu_q_host->back();
  p.total_k = c.cu_k_host->back();
  p.causal = c.causal;
  p.scale = c.scale;
  p.out = c.out;
  p.lse = c.lse;
  return p;
}

MergeParams merge_in_place_params(bf16_t* out, float* lse, const bf16_t* out_b, const float* lse_b, int64_t rows,
                                  int32_t width) {
  MergeParams m;
  m.out_a = out;
  m.lse_a = lse;
  m.out_b = out_b;
  m.lse_b = lse_b;
  m.out = out;  // the result over part a
  m.lse = lse;
  m.rows = rows;
  m.width = width;
  return m;
}

std::vector<int32_t> prefix_sums(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu(lens.size() + 1, 0);
  std::partial_sum(lens.begin(), lens.end(), cu.begin() + 1);
  return cu;
}

}  // namespace mla
