// validate() of the cache-path params structs (cache_params.h). Each check is a contract the
// host can see without reading the pointed-to memory: pointer presence, counts, geometry,
// strides, and consistency between lengths. Values that live in (device) memory, such as block
// table entries, starts and indices, cannot be checked here; the kernels bound them instead.
// Every message names the struct and the field and says what was wrong.
#include "kernels/common/cache_params.h"

#include "kernels/common/validate_helpers.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace mla {
namespace {

using namespace validation;

// Page geometry shared by the fp8_ds_mla cache (entry_bytes 656) and the flat FP8 reader
// (entry_bytes = its entry stride): every entry of a page lies inside the page, pages start on
// 16-byte boundaries relative to the base, and the whole pool is addressable in int64.
Status validate_pages(const PagedCacheView& c, const char* what, int64_t entry_bytes,
                      const char* entry_name) {
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_blocks", c.num_blocks));
  if (c.block_size < 1) return fail(what, ": block_size is ", c.block_size, " (must be >= 1)");
  const int64_t min_stride = static_cast<int64_t>(c.block_size) * entry_bytes;
  if (c.page_stride_bytes < min_stride) {
    return fail(what, ": page_stride_bytes is ", c.page_stride_bytes, " but block_size ", c.block_size,
                " x ", entry_name, " ", entry_bytes, " needs >= ", min_stride);
  }
  if (c.page_stride_bytes % DsMlaEntry::kAlignment != 0) {
    return fail(what, ": page_stride_bytes is ", c.page_stride_bytes, " (must be a multiple of ",
                DsMlaEntry::kAlignment, ")");
  }
  if (c.num_blocks > std::numeric_limits<int64_t>::max() / c.page_stride_bytes) {
    return fail(what, ": num_blocks ", c.num_blocks, " x page_stride_bytes ", c.page_stride_bytes,
                " overflows int64");
  }
  return require_pointer(what, "data", c.data, "num_blocks", c.num_blocks);
}

// Everything of GatherParams except the cache geometry, which the flat reader checks with its
// own entry stride.
Status validate_gather_rows(const GatherParams& g, const char* what) {
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_rows", g.num_rows));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_reqs", g.num_reqs));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "block_table_width", g.block_table_width));
  if (g.num_rows > 0 && g.num_reqs == 0) {
    return fail(what, ": num_rows is ", g.num_rows, " but num_reqs is 0 (no request owns the rows)");
  }
  MLA_RETURN_IF_ERROR(require_stride(what, "block_table_stride", g.block_table_stride,
                                     "block_table_width", g.block_table_width));
  MLA_RETURN_IF_ERROR(require_stride(what, "dst_row_stride", g.dst_row_stride, "the row width",
                                     DsMlaEntry::kLatentDims));
  if (g.num_reqs > 0) {
    MLA_RETURN_IF_ERROR(require_pointer(what, "block_table", g.block_table, "block_table_width",
                                        g.block_table_width));
  }
  MLA_RETURN_IF_ERROR(require_pointer(what, "workspace_starts", g.workspace_starts, "num_reqs", g.num_reqs));
  return require_pointer(what, "dst", g.dst, "num_rows", g.num_rows);
}

}  // namespace

Status PagedCacheView::validate(const char* what) const {
  return validate_pages(*this, what ? what : "PagedCacheView", DsMlaEntry::kBytes, "entry bytes");
}

Status PackParams::validate() const {
  constexpr const char* what = "PackParams";
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_stride(what, "kv_c_row_stride", kv_c_row_stride, "the kv_c width",
                                     DsMlaEntry::kNopeDims));
  MLA_RETURN_IF_ERROR(require_stride(what, "k_pe_row_stride", k_pe_row_stride, "the k_pe width",
                                     DsMlaEntry::kRopeDims));
  MLA_RETURN_IF_ERROR(require_pointer(what, "kv_c", kv_c, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_pointer(what, "k_pe", k_pe, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_pointer(what, "slot_mapping", slot_mapping, "num_tokens", num_tokens));
  return cache.validate("PackParams.cache");
}

Status GatherParams::validate() const {
  MLA_RETURN_IF_ERROR(cache.validate("GatherParams.cache"));
  return validate_gather_rows(*this, "GatherParams");
}

Status FlatFp8GatherParams::validate() const {
  constexpr const char* what = "FlatFp8GatherParams";
  if (entry_stride_bytes < DsMlaEntry::kLatentDims) {
    return fail(what, ": entry_stride_bytes is ", entry_stride_bytes, " (must be >= ",
                DsMlaEntry::kLatentDims, ", the bytes read per token)");
  }
  if (!std::isfinite(global_scale)) {
    return fail(what, ": global_scale is ", global_scale, " (must be finite)");
  }
  MLA_RETURN_IF_ERROR(validate_pages(base.cache, "FlatFp8GatherParams.base.cache", entry_stride_bytes,
                                     "entry_stride_bytes"));
  return validate_gather_rows(base, "FlatFp8GatherParams.base");
}

Status ConvertParams::validate() const {
  constexpr const char* what = "ConvertParams";
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "indices_rows", indices_rows));
  if (num_tokens != indices_rows) {
    // docs/semantics.md §6.1: a launch sized by the full-batch req_id over a decode-sized output writes
    // (num_tokens - indices_rows) * topk int32 past the end of `out`.
    return fail(what, ": req_id has ", num_tokens, " rows but indices has ", indices_rows,
                " rows (req_id length vs indices rows mismatch, the out-of-bounds bug of docs/semantics.md §6.1;"
                " req_id must be sliced to the rows of indices)");
  }
  if (topk < 1) return fail(what, ": topk is ", topk, " (must be >= 1)");
  MLA_RETURN_IF_ERROR(require_stride(what, "indices_row_stride", indices_row_stride, "topk", topk));
  MLA_RETURN_IF_ERROR(require_stride(what, "out_row_stride", out_row_stride, "topk", topk));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_reqs", num_reqs));
  MLA_RETURN_IF_ERROR(require_non_negative(what, "block_table_width", block_table_width));
  MLA_RETURN_IF_ERROR(require_stride(what, "block_table_stride", block_table_stride,
                                     "block_table_width", block_table_width));
  if (block_size < 1) return fail(what, ": block_size is ", block_size, " (must be >= 1)");
  MLA_RETURN_IF_ERROR(require_pointer(what, "req_id", req_id, "num_tokens", num_tokens));
  MLA_RETURN_IF_ERROR(require_pointer(what, "indices", indices, "indices_rows", indices_rows));
  MLA_RETURN_IF_ERROR(require_pointer(what, "out", out, "indices_rows", indices_rows));
  if (num_reqs > 0) {
    MLA_RETURN_IF_ERROR(require_pointer(what, "block_table", block_table, "block_table_width",
                                        block_table_width));
  }

  // Prefill-workspace mode: the map and the starts come together (the starts may be null only
  // when there are no prefills to look up).
  MLA_RETURN_IF_ERROR(require_non_negative(what, "num_prefills", num_prefills));
  if (prefill_req == nullptr && prefill_workspace_starts != nullptr) {
    return fail(what, ": prefill_workspace_starts is set but prefill_req is null (set both or neither)");
  }
  if (prefill_req == nullptr && num_prefills != 0) {
    return fail(what, ": num_prefills is ", num_prefills, " but prefill_req is null (set both or neither)");
  }
  if (prefill_req != nullptr && prefill_workspace_starts == nullptr && num_prefills > 0) {
    return fail(what, ": prefill_req is set but prefill_workspace_starts is null with num_prefills ",
                num_prefills, " (set both or neither)");
  }

  if (dcp_world_size < 1) return fail(what, ": dcp_world_size is ", dcp_world_size, " (must be >= 1)");
  if (dcp_rank < 0 || dcp_rank >= dcp_world_size) {
    return fail(what, ": dcp_rank is ", dcp_rank, " (must be in [0, dcp_world_size = ", dcp_world_size, "))");
  }
  if (dcp_interleave < 1) return fail(what, ": dcp_interleave is ", dcp_interleave, " (must be >= 1)");
  if (dcp_world_size > 1 && block_size % dcp_interleave != 0) {
    return fail(what, ": block_size ", block_size, " is not a multiple of dcp_interleave ", dcp_interleave,
                " (required when dcp_world_size > 1)");
  }
  return Status();
}

}  // namespace mla
