// The whole attention step of a mixed batch (docs/semantics.md §4.3, 4.4), in double: routing, the sparse
// route (absorb -> sparse MQA over the dequantized cache -> output projection) and the dense route
// (up-projected K/V, context unmasked + new tokens bottom-right causal). Independent of kernels/.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/attention_reference.h"
#include "reference/cache_reference.h"

namespace mla::ref {

enum class Route : uint8_t { kSparse, kDense };

// Where the dense route takes the K/V of the request's new tokens from (docs/semantics.md §4.3: the two routes
// agree to rounding with kFromCache and to FP8-quantization level with kBf16).
enum class NewTokenKv {
  kBf16,       // this step's bf16 kv_c / k_pe (what the backend does)
  kFromCache,  // the dequantized cache entries the new tokens were packed into
};

// docs/semantics.md §4.4: prefills (requests [num_decodes, R), every one of them, whatever its query length) go
// to dense MHA iff every prefill's seq_len <= topk and not force_sparse. Vacuously true without
// prefills. Decodes always go sparse.
// docs/semantics.md §4.4's split, the reference's own: the decodes are the leading requests whose query length
// is in [1, threshold] and equal to the first request's (a request with 0 new tokens is not a
// decode and ends the run).
int32_t count_decode_requests(const std::vector<int32_t>& query_len, int32_t threshold);

bool prefills_go_dense(const std::vector<int32_t>& seq_len, int32_t num_decodes, int32_t topk, bool force_sparse);

struct ForwardInputs {
  // Batch (docs/semantics.md §0): R requests in order, decodes first. context_len[r] = seq_len[r] - query_len[r].
  std::vector<int32_t> seq_len;    // [R], >= query_len[r]
  std::vector<int32_t> query_len;  // [R], >= 0
  int32_t num_decodes = 0;         // requests [0, num_decodes) are decodes

  // New tokens (T = sum query_len), in batch order: the tokens of request r are consecutive, in
  // increasing position, and are exactly positions [context_len[r], seq_len[r]) (checked).
  std::vector<int32_t> req_id;    // [T] request of each new token
  std::vector<int32_t> position;  // [T] its request-local position

  int32_t num_heads = 0;           // H
  std::vector<uint16_t> q_nope;    // bf16 [T, H, 128]
  std::vector<uint16_t> q_pe;      // bf16 [T, H, 64], RoPE applied
  std::vector<uint16_t> w_uk;      // bf16 [H, 128, 512], W_UK[h] = [Dn, Dc]
  std::vector<uint16_t> w_uv;      // bf16 [H, 128, 512], W_UV[h] = [Dv, Dc]

  // Latent of every position of every request (context and new), bf16: position p of request r is
  // row kv_row(r, p) = (seq_len[0] + ... + seq_len[r-1]) + p. Rows [sum seq_len) in all.
  std::vector<uint16_t> kv_c;  // [sum seq_len, 512]
  std::vector<uint16_t> k_pe;  // [sum seq_len, 64]

  // The cache as attention reads it (new tokens already packed, docs/semantics.md §4.4) lives in the `cache`
  // argument of forward(); position p of request r is slot block_table[r][p / B] * B + p % B.
  CacheGeometry geometry;
  BlockTable block_table;  // num_reqs >= R

  std::vector<int32_t> topk_positions;  // int32 [T, topk] request-local positions (the indexer's
                                        // pick), -1 padded
  int32_t topk = 0;                     // K
  double scale = 0.0;
  bool force_sparse = false;
  NewTokenKv new_token_kv = NewTokenKv::kBf16;
  // How the sparse route's sparse_mqa dequantizes the cache (kF32: docs/semantics.md §1.2; kBf16: the
  // rule an implementation may declare, §4.1). The dense route's cache rows keep §1.2 (the gather's rule).
  ScaleRounding sparse_dequant = ScaleRounding::kF32;
};

struct ForwardOutputs {
  std::vector<double> out;   // [T, H, 128]
  std::vector<double> lse;   // [T, H], natural log of the softmax denominator (the same quantity on
                             // both routes: the scores are equal in exact arithmetic); -inf = no key
  std::vector<Route> route;  // [T] the route each token took
  bool prefills_dense = false;
};

// The step:
// - Sparse route (decodes always; prefills unless they go dense): slots = ref::convert of the
//   token's top-k positions through its request's block-table row (invalid positions skipped, same
//   rules as convert; a slot outside the pool is skipped by sparse_mqa), then
//   out = project_out(sparse_mqa(absorb_q(q_nope, q_pe, w_uk), slots, cache), w_uv).
// - Dense route (prefill token at position c + i of request r): q = [q_nope, q_pe]; K/V =
//   up_project of the positions [0, c + i]: context positions [0, c) from the dequantized cache
//   (attended without a mask by every new token), the request's new positions from bf16 kv_c/k_pe
//   (kBf16) or the dequantized cache (kFromCache), bottom-right causal. The backend computes the
//   two parts separately and merges them by LSE (merge_lse); that equals one softmax over the
//   union, which is how it is computed here (dense_mha over all seq_len keys, causal). Every
//   position the dense route reads from the cache must be mapped by the block table into the pool
//   (throws otherwise: the batch itself is broken).
// cache: [num_blocks, page_stride] bytes (size >= geometry.bytes()).
ForwardOutputs forward(const ForwardInputs& in, const std::vector<uint8_t>& cache);

}  // namespace mla::ref
