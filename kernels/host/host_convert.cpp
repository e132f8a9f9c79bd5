// Host top-k index conversion (docs/semantics.md §3): request-local token positions -> global cache slots (or
// prefill-workspace rows), -1 for anything invalid, columns in place, optional valid counts.
// One work item per (row, column) element as on the GPU; no memory is read through a value that
// was not bounds-checked first (req_id, the block-table column, prefill_req).
#include <limits>

#include "kernels/common/index_math.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {
namespace {

int32_t convert_element(const ConvertParams& p, int64_t t, int32_t j) {
  const int32_t req = p.req_id[t];
  if (req < 0 || req >= p.num_reqs) return kInvalidIndex;  // whole row invalid
  int64_t tok = p.indices[t * p.indices_row_stride + j];
  if (tok < 0) return kInvalidIndex;
  const int32_t prefill = p.prefill_req ? p.prefill_req[t] : -1;
  if (prefill >= 0) {
    // The prefill workspace holds the request's whole gathered sequence (all ranks' tokens), so
    // positions index it directly: DCP ownership does not apply here.
    if (prefill >= p.num_prefills) return kInvalidIndex;
    const int64_t row = static_cast<int64_t>(p.prefill_workspace_starts[prefill]) + tok;
    // A workspace row that does not fit the int32 output (or a negative start) is invalid.
    if (row < 0 || row > std::numeric_limits<int32_t>::max()) return kInvalidIndex;
    return static_cast<int32_t>(row);
  }
  if (p.dcp_world_size > 1) {
    // This rank's cache holds only the positions it owns, at local positions.
    if (!dcp_owns(tok, p.dcp_world_size, p.dcp_rank, p.dcp_interleave)) return kInvalidIndex;
    tok = dcp_local_pos(tok, p.dcp_world_size, p.dcp_interleave);
  }
  return topk_to_slot(tok, p.block_table + req * p.block_table_stride, p.block_table_width, p.block_size);
}

}  // namespace

void convert(const ConvertParams& p) {
  for (int64_t t = 0; t < p.indices_rows; ++t) {
    int32_t* out_row = p.out + t * p.out_row_stride;
    int32_t valid = 0;
    for (int32_t j = 0; j < p.topk; ++j) {
      out_row[j] = convert_element(p, t, j);
      valid += out_row[j] != kInvalidIndex ? 1 : 0;
    }
    if (p.valid_count) p.valid_count[t] = valid;
  }
}

}  // namespace mla::host
