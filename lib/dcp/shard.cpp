#include "lib/dcp/shard.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/mla_dims.h"
#include "lib/batch/attention_data.h"
#include "reference/attention_reference.h"
#include "reference/cache_reference.h"

namespace mla {

DcpShard build_dcp_shard(const Batch& b, const CacheData& cache, int32_t world, int32_t rank, int32_t interleave) {
  if (world < 1 || rank < 0 || rank >= world || interleave < 1 || b.layout.block_size % interleave != 0)
    throw std::invalid_argument("build_dcp_shard: rank " + std::to_string(rank) + " of " + std::to_string(world) +
                                " with interleave " + std::to_string(interleave) + " and block size " +
                                std::to_string(b.layout.block_size));
  const int32_t W = world, I = interleave, B = b.layout.block_size;
  DcpShard shard;
  PagedLayout& l = shard.layout;
  l.num_reqs = b.num_reqs;
  int32_t width = 1;
  for (int32_t len : b.seq_lens) width = std::max<int32_t>(width, static_cast<int32_t>((len / W + I + B - 1) / B + 1));
  l.block_table_width = width;
  l.block_table_stride = width;
  l.block_table.assign(static_cast<size_t>(l.num_reqs) * width, -1);
  int32_t next = 0;
  for (int32_t r = 0; r < b.num_reqs; ++r)
    for (int32_t c = 0; c < width; ++c) l.block_table[static_cast<size_t>(r) * width + c] = next++;
  l.num_blocks = next;
  l.block_size = B;
  l.page_stride_bytes = int64_t{B} * DsMlaEntry::kBytes;
  std::vector<uint16_t> kv, pe;
  std::vector<int64_t> slots;
  for (int32_t r = 0; r < b.num_reqs; ++r)
    for (int64_t p = 0; p < b.seq_lens[static_cast<size_t>(r)]; ++p) {
      if (ref::dcp_owner(p, W, I) != rank) continue;
      const int64_t row = cached_row(b, r, p);
      kv.insert(kv.end(), &cache.kv_c[row * kDc], &cache.kv_c[(row + 1) * kDc]);
      pe.insert(pe.end(), &cache.k_pe[row * kDr], &cache.k_pe[(row + 1) * kDr]);
      slots.push_back(l.slot(r, ref::dcp_local_position(p, W, I)));
    }
  shard.owned_positions = static_cast<int64_t>(slots.size());
  shard.cache.assign(static_cast<size_t>(l.cache_bytes()), kUnusedCacheByte);
  ref::pack(kv, pe, slots, reference_geometry(l), shard.cache);
  return shard;
}

DcpOwnership dcp_ownership(const std::vector<int32_t>& seq_lens, int32_t world, int32_t interleave) {
  DcpOwnership o;
  o.positions_per_rank.assign(static_cast<size_t>(std::max(world, 1)), 0);
  for (int32_t len : seq_lens) {
    if (len <= 0) continue;
    if (len < interleave) ++o.requests_shorter_than_interleave;
    std::vector<int64_t> mine(o.positions_per_rank.size(), 0);
    for (int64_t p = 0; p < len; ++p) ++mine[static_cast<size_t>(ref::dcp_owner(p, world, interleave))];
    for (size_t r = 0; r < mine.size(); ++r) {
      o.positions_per_rank[r] += mine[r];
      if (mine[r] == 0) ++o.rank_requests_without_positions;
    }
  }
  return o;
}

}  // namespace mla
