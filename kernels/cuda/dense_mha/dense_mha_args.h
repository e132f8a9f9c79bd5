// The dense MHA kernels' view of DenseMhaParams (kernels/common/attention_params.h): the same
// pointers and strides, device copies of cu_seqlens, and the number of query tiles per request
// that the launcher sized the grid with. Shared by the launcher and the three
// implementations (dense_mha_simple.cu, dense_mha_tc.cu, dense_mha_wgmma.cu).
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"

namespace mla {

struct DenseArgs {
  const bf16_t* q_nope;  // [total_q, H, 128]
  int64_t q_nope_stride;
  const bf16_t* q_pe;    // [total_q, H, 64]
  int64_t q_pe_stride;
  const bf16_t* k_nope;  // [total_k, H, 128]
  int64_t k_nope_stride;
  const bf16_t* k_pe;    // [total_k, 64]
  int64_t k_pe_stride;
  const bf16_t* v;       // [total_k, H, 128]
  int64_t v_stride;
  const int32_t* cu_q;   // [num_reqs + 1] device
  const int32_t* cu_k;
  int32_t num_heads;
  int64_t total_q, total_k;
  bool causal;
  float scale;
  bf16_t* out;           // [total_q, H, 128]
  float* lse;            // [total_q, H]
  int32_t q_tiles;       // query tiles per request in the grid
  int32_t num_reqs;      // requests (cu_q / cu_k have num_reqs + 1 entries)
  int32_t tail_heads;    // wgmma: the items' order (kernels/cuda/dense_mha/dense_item_order.h); 0 head-major
  unsigned long long* work_counter;  // wgmma's dynamic schedule: [next item, CTAs done], zero at launch; else null
  long long* work_slots;             // wgmma's dynamic schedule: kWorkSlotWords per CTA; else null
};

}  // namespace mla
