// The host backend's kernels: the same algorithms as the CUDA kernels, one work item (token,
// row, element) at a time, single-threaded. Internal to kernels/host/.
//
// Contract: every function here expects params whose validate() returned ok (the backend checks
// first); with validated params they touch no byte outside the buffers the params describe, for
// any values in the pointed-to memory.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/common/attention_params.h"
#include "kernels/common/bf16.h"
#include "kernels/common/cache_params.h"
#include "kernels/common/online_softmax.h"

namespace mla::host {

// docs/semantics.md §1.1, one work item per token. Tokens whose slot is < 0 or >= num_slots are skipped.
// Duplicate slots: the last token wins here; on the GPU the winner is unspecified.
void pack(const PackParams& p);

// docs/semantics.md §2 (dequantizing gather), one work item per output row. num_rows == 0 does nothing.
void gather(const GatherParams& p);

// The flat-FP8 reader (failure mode 2 of docs/semantics.md §6, on purpose), one work item per output row.
void gather_flat_fp8(const FlatFp8GatherParams& p);

// docs/semantics.md §1.2: one fp8_ds_mla entry as the gather writes it, a row of 576 bf16.
void dequant_entry(const uint8_t* entry, bf16_t* row);

// docs/semantics.md §3, one work item per (row, column) element, then valid_count per row.
void convert(const ConvertParams& p);

// Byte offset, from the cache base, of the entry that feeds gather output row `row`, or -1 when
// the row's source is invalid (row before workspace_starts[0], negative position, logical block
// >= block_table_width, physical block < 0 or >= num_blocks). `entry_stride_bytes` is 656 for
// the fp8_ds_mla reader and the flat reader's own stride for the flat one. Shared by both
// gathers so their row mapping cannot drift apart.
int64_t gather_source_offset(const GatherParams& p, int64_t row, int64_t entry_stride_bytes);

// --- Attention (docs/semantics.md §4). Precision contract of attention_params.h: bf16 operands widened to
// fp32, fp32 accumulation, softmax in fp32 with exp(), P rounded to bf16 for P.V, outputs
// rounded to bf16 once. Column tiles of kAttentionTile keys, as the CUDA kernels use (dense MHA's
// `wgmma` kernel: 128, dense_mha's softmax_keys).

inline constexpr int kAttentionTile = 64;

// C[b] = A[b] op(B[b]) per batch. Each batch's B panel is widened to fp32 once in [K, N] layout
// (transposed first when transpose_b); every C element accumulates its K products in order
// k = 0, 1, ... in fp32, then is rounded to bf16.
void gemm(const GemmParams& p);

// docs/semantics.md §4.1 over the work items of p.metadata, then the combine of split tokens. The metadata is
// trusted (item.token, item.partial and split_offsets are not bounded: failure mode 4 must show
// as out-of-bounds accesses the guards catch); the column range is clipped to [0, topk) and an
// index outside [0, num_slots) is skipped without reading the cache.
void sparse_mqa(const SparseMqaParams& p);

// docs/semantics.md §4.2 attention of one varlen batch (bottom-right causal or unmasked), sized by the host
// copies of cu_seqlens. One online-softmax step per `softmax_keys` keys (values below 1 act as 1),
// from key 0: the host backend, and the `simple` and `tc` CUDA kernels, use kAttentionTile; the
// Hopper `wgmma` kernel 128 (dense_wgmma::kSoftmaxStepKeys). The same softmax, to rounding: p in
// fp32 against another running max, its bf16 rounding, the rescale factors and l's grouping;
// both match the double reference at docs/semantics.md §8's tolerances, and a kernel's tests compare it with its
// own step size.
void dense_mha(const DenseMhaParams& p, int softmax_keys = kAttentionTile);

// docs/semantics.md §4.2 LSE merge, row by row (out may alias out_a or out_b, lse may alias lse_a or lse_b).
void merge(const MergeParams& p);

// fp32 dot product of n values with a fixed accumulation order: 8 interleaved partial sums
// (lane l takes elements i = l mod 8, in increasing i), combined pairwise at the end. The
// pattern a SIMD loop (or a warp's lanes) produces, and one the compiler vectorises without
// reassociating anything.
inline float dot_f32(const float* a, const float* b, int n) {
  constexpr int kLanes = 8;
  float lane[kLanes] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  }
  for (int l = 0; l < kLanes && i + l < n; ++l) lane[l] += a[i + l] * b[i + l];
  return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

// One online-softmax tile of one row over n keys (docs/semantics.md §4), the order the attention
// kernels share: s_j = dot_f32(q, k_j, kKeyDims) * scale (k_j = keys + j kKeyDims; the scores go
// to scores[0, n)), factor = row.begin_tile(max_j s_j), acc = acc * factor (kValDims values),
// then key by key p_j = row.prob(s_j), acc += bf16_rne(p_j) v_j (v_j = vals + j kValStride), and
// l += the fp32 sum of the p_j in key order.
template <int kKeyDims, int kValDims, int kValStride>
void softmax_tile(OnlineSoftmaxRow& row, const float* q, const float* keys, const float* vals, int n, float scale,
                  float* scores, float* __restrict acc) {
  float tile_max = -INFINITY;
  for (int j = 0; j < n; ++j) {
    scores[j] = dot_f32(q, &keys[static_cast<size_t>(j) * kKeyDims], kKeyDims) * scale;
    tile_max = fmaxf(tile_max, scores[j]);
  }
  const float factor = row.begin_tile(tile_max);
  if (factor != 1.0f) {
    for (int e = 0; e < kValDims; ++e) acc[e] *= factor;
  }
  float tile_sum = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float pj = row.prob(scores[j]);
    tile_sum += pj;
    const float pv = bf16_to_f32(f32_to_bf16_rne(pj));
    const float* __restrict v = &vals[static_cast<size_t>(j) * kValStride];
    for (int e = 0; e < kValDims; ++e) acc[e] += pv * v[e];
  }
  row.l += tile_sum;
}

}  // namespace mla::host
