// The paged fp8_ds_mla cache of a batch as lib/ describes it: the page pool's geometry and the
// block table, on the host (docs/semantics.md §0, §1). This is lib/'s one vocabulary for a paged
// layout. The kernels read it through their params view (cache_view, set_block_table), the
// reference through its own types (reference_geometry, reference_block_table); both conversions
// live here and nowhere else.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/cache_params.h"
#include "reference/cache_reference.h"

namespace mla {

struct PagedLayout {
  int64_t num_blocks = 0;         // pages in the pool
  int32_t block_size = 0;         // B >= 1 tokens per page
  int64_t page_stride_bytes = 0;  // >= block_size * 656, a multiple of 16 (padded pages allowed)
  int32_t num_reqs = 0;
  int32_t block_table_width = 0;     // used columns
  int64_t block_table_stride = 0;    // row stride, >= width
  std::vector<int32_t> block_table;  // [num_reqs, block_table_stride]; -1 = no page

  int64_t cache_bytes() const { return num_blocks * page_stride_bytes; }
  int64_t num_slots() const { return num_blocks * block_size; }
  int32_t block(int32_t req, int64_t column) const {
    return block_table[static_cast<size_t>(req * block_table_stride + column)];
  }
  // Slot of position `pos` of request `req` (its page must exist).
  int64_t slot(int32_t req, int64_t pos) const { return int64_t{block(req, pos / block_size)} * block_size + pos % block_size; }
  // Byte offset of a slot's entry in the pool.
  int64_t entry_offset(int64_t slot) const {
    return slot / block_size * page_stride_bytes + slot % block_size * DsMlaEntry::kBytes;
  }
};

// The kernels' view of the pool at `data` (host or device memory of a backend).
PagedCacheView cache_view(const PagedLayout& l, uint8_t* data);

// The block-table fields of a kernel's params (GatherParams, ConvertParams, ...), the table's
// copy at `table` (device memory of a backend).
template <typename Params>
void set_block_table(const PagedLayout& l, const int32_t* table, Params& p) {
  p.block_table = table;
  p.num_reqs = l.num_reqs;
  p.block_table_width = l.block_table_width;
  p.block_table_stride = l.block_table_stride;
}

// The reference's own types for the same layout.
ref::CacheGeometry reference_geometry(const PagedLayout& l);
ref::BlockTable reference_block_table(const PagedLayout& l);

}  // namespace mla
