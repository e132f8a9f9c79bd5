// Index arithmetic shared by the host and CUDA backends (docs/semantics.md §2-§3).
// Every function is total: out-of-range inputs give a defined "invalid" answer, never an
// out-of-bounds address. The reference (reference/) implements the same rules independently.
#pragma once

#include <climits>

#include "kernels/common/hd.h"

namespace mla {

inline constexpr int32_t kInvalidIndex = -1;

// Decode context parallelism: which rank owns a token position, and its rank-local position.
// Owner of pos is (pos / I) % W; local position (pos / (W * I)) * I + pos % I. Requires I >= 1,
// W >= 1 (validated by the params).
MLA_HD bool dcp_owns(int64_t pos, int32_t world, int32_t rank, int32_t interleave) {
  return (pos / interleave) % world == rank;
}
MLA_HD int64_t dcp_local_pos(int64_t pos, int32_t world, int32_t interleave) {
  return (pos / (static_cast<int64_t>(world) * interleave)) * interleave + pos % interleave;
}

// Request-local token position -> global cache slot through the block table row `bt_row`
// (width `bt_width` entries). Invalid (kInvalidIndex) when tok < 0, tok / B >= width, the
// block-table entry is negative, or the slot does not fit int32.
MLA_HD int32_t topk_to_slot(int64_t tok, const int32_t* bt_row, int32_t bt_width, int32_t block_size) {
  if (tok < 0) return kInvalidIndex;
  const int64_t logical = tok / block_size;
  if (logical >= bt_width) return kInvalidIndex;
  const int32_t phys = bt_row[logical];
  if (phys < 0) return kInvalidIndex;
  const int64_t slot = static_cast<int64_t>(phys) * block_size + tok % block_size;
  return slot > INT32_MAX ? kInvalidIndex : static_cast<int32_t>(slot);
}

// Gather: the request owning output row `row`, i.e. the largest r with ws[r] <= row (zero-length
// requests are skipped because a later equal start wins). Returns -1 when row < ws[0].
// ws must be non-decreasing; binary search over [0, num_reqs).
MLA_HD int32_t gather_row_owner(const int32_t* ws, int32_t num_reqs, int64_t row) {
  int32_t lo = 0, hi = num_reqs;  // answer in [lo - 1, hi - 1]
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (ws[mid] <= row) lo = mid + 1; else hi = mid;
  }
  return lo - 1;
}

}  // namespace mla
