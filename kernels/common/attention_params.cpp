// validate() of the attention params structs (attention_params.h). Each check is a contract the
// host can see: pointer presence, counts, dims, strides against the widths used, scale, and the
// host copies of cu_seqlens. What lives only in device memory (indices, the work items, the
// split offsets) is not checked: the kernels skip out-of-range cache indices and trust the
// metadata (failure mode 4 of docs/semantics.md §6 is a wrong but well-formed plan, which validation cannot
// see). Every message names the struct and the field and says what was wrong.
#include "kernels/common/attention_params.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/validate_helpers.h"

namespace mla {
namespace {

using namespace validation;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Status require_scale(const char* what, float scale) {
  if (!std::isfinite(scale) || !(scale > 0.0f)) {
    return fail(what, ": scale is ", scale, " (must be finite and > 0)");
  }
  return Status();
}

// count * stride + extra for non-negative operands, or -1 when it overflows int64.
int64_t mul_add(int64_t count, int64_t stride, int64_t extra) {
  if (count != 0 && stride > (kInt64Max - extra) / count) return -1;
  return count * stride + extra;
}

// Per-token [num_heads, width] layout with a head stride and a token stride (elements): heads
// must not overlap (head_stride >= width) and a token's heads must fit in its stride.
Status validate_head_layout(const char* what, const char* token_field, int64_t token_stride,
                            const char* head_field, int64_t head_stride, int32_t num_heads, int width) {
  MLA_RETURN_IF_ERROR(require_stride(what, head_field, head_stride, "the part width", width));
  const int64_t need = mul_add(num_heads - 1, head_stride, width);
  if (need < 0) return fail(what, ": (num_heads - 1) x ", head_field, " ", head_stride, " overflows int64");
  if (token_stride < need) {
    return fail(what, ": ", token_field, " is ", token_stride, " but must be >= (num_heads - 1) x ", head_field,
                " + ", width, " (", need, ")");
  }
  return Status();
}

// A host copy of cu_seqlens: [num_reqs + 1], starts at 0, non-decreasing, ends at total.
Status validate_cu_seqlens(const char* what, const char* field, const int32_t* cu, int32_t num_reqs,
                           const char* total_name, int64_t total) {
  if (cu[0] != 0) return fail(what, ": ", field, "[0] is ", cu[0], " (must be 0)");
  for (int32_t r = 0; r < num_reqs; ++r) {
    if (cu[r + 1] < cu[r]) {
      return fail(what, ": ", field, " decreases at request ", r, " (", cu[r], " -> ", cu[r + 1],
                  "; must be non-decreasing)");
    }
  }
  if (cu[num_reqs] != total) {
    return fail(what, ": ", field, "[num_reqs = ", num_reqs, "] is ", cu[num_reqs], " but ", total_name, " is ",
                total);
  }
  return Status();
}

}  // namespace

Status GemmParams::validate() const {
  constexpr const char* what = "GemmParams";
  MLA_RETURN_IF_ERROR(require_non_negative(what, "batch", batch));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "m", m));
  MLA_RETURN_IF_ERROR(require_positive(what, "n", n));
  MLA_RETURN_IF_ERROR(require_positive(what, "k", k));
  MLA_RETURN_IF_ERROR(require_stride(what, "lda", lda, "k", k));
  if (transpose_b) {
    MLA_RETURN_IF_ERROR(require_stride(what, "ldb", ldb, "k (B is [N, K] when transpose_b)", k));
  } else {
    MLA_RETURN_IF_ERROR(require_stride(what, "ldb", ldb, "n (B is [K, N] unless transpose_b)", n));
  }
  MLA_RETURN_IF_ERROR(require_stride(what, "ldc", ldc, "n", n));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "stride_a", stride_a));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "stride_b", stride_b));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "stride_c", stride_c));
  const int64_t work = (m > 0 && batch > 0) ? m : 0;
  MLA_RETURN_IF_ERROR(require_pointer(what, "a", a, "m", work));
  MLA_RETURN_IF_ERROR(require_pointer(what, "b", b, "m", work));
  MLA_RETURN_IF_ERROR(require_pointer(what, "c", c, "m", work));
  if (work == 0) return Status();

  // Largest element offsets stay within int64.
  const int64_t b_rows = transpose_b ? n : k;
  if (mul_add(batch - 1, stride_a, 0) < 0 || mul_add(m - 1, lda, k) < 0 ||
      mul_add(batch - 1, stride_a, 0) > kInt64Max - mul_add(m - 1, lda, k)) {
    return fail(what, ": the extent of A (batch, stride_a, m, lda) overflows int64");
  }
  if (mul_add(batch - 1, stride_b, 0) < 0 || mul_add(b_rows - 1, ldb, ldb) < 0 ||
      mul_add(batch - 1, stride_b, 0) > kInt64Max - mul_add(b_rows - 1, ldb, ldb)) {
    return fail(what, ": the extent of B (batch, stride_b, rows, ldb) overflows int64");
  }
  const int64_t c_extent = mul_add(m - 1, ldc, n);  // elements one batch's C spans
  if (c_extent < 0 || mul_add(batch - 1, stride_c, 0) < 0 ||
      mul_add(batch - 1, stride_c, 0) > kInt64Max - c_extent) {
    return fail(what, ": the extent of C (batch, stride_c, m, ldc) overflows int64");
  }
  // Batches write disjoint parts of C: stacked (each batch's block after the previous one) or
  // side by side within the rows (batch b in columns [b stride_c, b stride_c + n) of each row).
  if (batch > 1) {
    const bool stacked = stride_c >= c_extent;
    const bool side_by_side = stride_c >= n && mul_add(batch - 1, stride_c, n) >= 0 &&
                              mul_add(batch - 1, stride_c, n) <= ldc;
    if (!stacked && !side_by_side) {
      return fail(what, ": stride_c ", stride_c, " makes the C blocks of different batches overlap (m ", m, ", n ", n,
                  ", ldc ", ldc, ", batch ", batch, "; need stride_c >= (m - 1) x ldc + n = ", c_extent,
                  " or stride_c >= n with (batch - 1) x stride_c + n <= ldc)");
    }
  }
  return Status();
}

Status SparseMqaParams::validate() const {
  constexpr const char* what = "SparseMqaParams";
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_positive(what, "num_heads", num_heads));
  MLA_RETURN_IF_ERROR(require_positive(what, "topk", topk));
  MLA_RETURN_IF_ERROR(validate_head_layout(what, "q_nope_token_stride", q_nope_token_stride, "q_nope_head_stride",
                                           q_nope_head_stride, num_heads, kDc));
  MLA_RETURN_IF_ERROR(validate_head_layout(what, "q_pe_token_stride", q_pe_token_stride, "q_pe_head_stride",
                                           q_pe_head_stride, num_heads, kDr));
  MLA_RETURN_IF_ERROR(require_stride(what, "indices_row_stride", indices_row_stride, "topk", topk));
  MLA_RETURN_IF_ERROR(cache.validate("SparseMqaParams.cache"));
  MLA_RETURN_IF_ERROR(require_scale(what, scale));

  // The metadata: its counts and arrays. Its values (tokens, column ranges, partial rows,
  // offsets) are device data the kernel trusts.
  const SparseMqaMetadata& md = metadata;
  MLA_RETURN_IF_ERROR(require_non_negative(what, "metadata.num_items", md.num_items));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "metadata.num_tokens_planned", md.num_tokens_planned));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "metadata.num_partials", md.num_partials));
  MLA_RETURN_IF_ERROR(require_pointer(what, "metadata.items", md.items, "metadata.num_items", md.num_items));
  MLA_RETURN_IF_ERROR(require_pointer(what, "metadata.split_offsets", md.split_offsets,
                                      "metadata.num_tokens_planned", md.num_tokens_planned));
  MLA_RETURN_IF_ERROR(require_pointer(what, "partial_out", partial_out, "metadata.num_partials", md.num_partials));
  MLA_RETURN_IF_ERROR(require_pointer(what, "partial_lse", partial_lse, "metadata.num_partials", md.num_partials));
  if (md.num_tokens_planned != num_tokens) {
    // docs/semantics.md §6.4: a plan built for the full batch while q holds the decode rows sends its
    // work items to (num_tokens_planned - num_tokens) token rows past the end of q, indices, out_lat
    // and lse.
    return fail(what, ": metadata.num_tokens_planned is ", md.num_tokens_planned, " but num_tokens is ", num_tokens,
                " (scheduler metadata built for another token count, the out-of-bounds bug of docs/semantics.md"
                " §6.4; the work partition must be planned for exactly the tokens passed)");
  }

  if (num_tokens == 0 && md.num_items > 0) {
    return fail(what, ": metadata.num_items is ", md.num_items,
                " but num_tokens is 0 (work items for tokens that q does not have)");
  }
  // q, indices and the outputs are touched for every token.
  MLA_RETURN_IF_ERROR(require_pointer(what, "q_nope_lat", q_nope_lat, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_pointer(what, "q_pe", q_pe, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_pointer(what, "indices", indices, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_pointer(what, "out_lat", out_lat, "num_tokens", num_tokens));
  return require_pointer(what, "lse", lse, "num_tokens", num_tokens);
}

Status DenseMhaParams::validate() const {
  constexpr const char* what = "DenseMhaParams";
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_reqs", num_reqs));
  MLA_RETURN_IF_ERROR(require_positive(what, "num_heads", num_heads));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "total_q", total_q));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "total_k", total_k));
  const int64_t h = num_heads;
  MLA_RETURN_IF_ERROR(require_stride(what, "q_nope_stride", q_nope_stride, "num_heads x 128", h * kDn));
  MLA_RETURN_IF_ERROR(require_stride(what, "q_pe_stride", q_pe_stride, "num_heads x 64", h * kDr));
  MLA_RETURN_IF_ERROR(require_stride(what, "k_nope_stride", k_nope_stride, "num_heads x 128", h * kDn));
  MLA_RETURN_IF_ERROR(require_stride(what, "k_pe_stride", k_pe_stride, "the k_pe width", kDr));
  MLA_RETURN_IF_ERROR(require_stride(what, "v_stride", v_stride, "num_heads x 128", h * kDv));
  MLA_RETURN_IF_ERROR(require_scale(what, scale));
  MLA_RETURN_IF_ERROR(require_pointer(what, "q_nope", q_nope, "total_q", total_q));
  MLA_RETURN_IF_ERROR(require_pointer(what, "q_pe", q_pe, "total_q", total_q));
  MLA_RETURN_IF_ERROR(require_pointer(what, "out", out, "total_q", total_q));
  MLA_RETURN_IF_ERROR(require_pointer(what, "lse", lse, "total_q", total_q));
  MLA_RETURN_IF_ERROR(require_pointer(what, "k_nope", k_nope, "total_k", total_k));
  MLA_RETURN_IF_ERROR(require_pointer(what, "k_pe", k_pe, "total_k", total_k));
  MLA_RETURN_IF_ERROR(require_pointer(what, "v", v, "total_k", total_k));

  if (num_reqs == 0) {
    if (total_q != 0 || total_k != 0) {
      return fail(what, ": num_reqs is 0 but total_q is ", total_q, " and total_k is ", total_k,
                  " (no request owns them)");
    }
    return Status();
  }
  MLA_RETURN_IF_ERROR(require_pointer(what, "cu_seqlens_q", cu_seqlens_q, "num_reqs", num_reqs));
  MLA_RETURN_IF_ERROR(require_pointer(what, "cu_seqlens_k", cu_seqlens_k, "num_reqs", num_reqs));
  MLA_RETURN_IF_ERROR(require_pointer(what, "cu_seqlens_q_host", cu_seqlens_q_host, "num_reqs", num_reqs));
  MLA_RETURN_IF_ERROR(require_pointer(what, "cu_seqlens_k_host", cu_seqlens_k_host, "num_reqs", num_reqs));
  MLA_RETURN_IF_ERROR(validate_cu_seqlens(what, "cu_seqlens_q_host", cu_seqlens_q_host, num_reqs, "total_q", total_q));
  MLA_RETURN_IF_ERROR(validate_cu_seqlens(what, "cu_seqlens_k_host", cu_seqlens_k_host, num_reqs, "total_k", total_k));
  if (causal) {
    // Bottom-right causality with more queries than keys leaves the first queries without a key;
    // no caller means that, so it is refused.
    for (int32_t r = 0; r < num_reqs; ++r) {
      const int64_t nq = cu_seqlens_q_host[r + 1] - cu_seqlens_q_host[r];
      const int64_t nk = cu_seqlens_k_host[r + 1] - cu_seqlens_k_host[r];
      if (nq > nk) {
        return fail(what, ": causal request ", r, " has ", nq, " queries but only ", nk,
                    " keys (bottom-right causal needs queries <= keys)");
      }
    }
  }
  return Status();
}

Status MergeParams::validate() const {
  constexpr const char* what = "MergeParams";
  MLA_RETURN_IF_ERROR(require_non_negative(what, "rows", rows));
  MLA_RETURN_IF_ERROR(require_positive(what, "width", width));
  if (mul_add(rows, width, 0) < 0) return fail(what, ": rows ", rows, " x width ", width, " overflows int64");
  MLA_RETURN_IF_ERROR(require_pointer(what, "out_a", out_a, "rows", rows));
  MLA_RETURN_IF_ERROR(require_pointer(what, "lse_a", lse_a, "rows", rows));
  MLA_RETURN_IF_ERROR(require_pointer(what, "out_b", out_b, "rows", rows));
  MLA_RETURN_IF_ERROR(require_pointer(what, "lse_b", lse_b, "rows", rows));
  MLA_RETURN_IF_ERROR(require_pointer(what, "out", out, "rows", rows));
  return require_pointer(what, "lse", lse, "rows", rows);
}

}  // namespace mla
