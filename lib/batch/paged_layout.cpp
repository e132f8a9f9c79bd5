#include "lib/batch/paged_layout.h"

namespace mla {

PagedCacheView cache_view(const PagedLayout& l, uint8_t* data) {
  return PagedCacheView{data, l.num_blocks, l.block_size, l.page_stride_bytes};
}

ref::CacheGeometry reference_geometry(const PagedLayout& l) {
  return ref::CacheGeometry{l.num_blocks, l.block_size, l.page_stride_bytes};
}

ref::BlockTable reference_block_table(const PagedLayout& l) {
  ref::BlockTable bt;
  bt.data = l.block_table;
  bt.num_reqs = l.num_reqs;
  bt.width = l.block_table_width;
  bt.stride = l.block_table_stride;
  return bt;
}

}  // namespace mla
