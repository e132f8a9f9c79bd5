// One decode-context-parallel rank's share of a batch's cache (docs/semantics.md §3, §5): the
// positions it owns ((pos / I) % W == rank), each stored at its rank-local position
// ((pos / (W I)) I + pos % I) in a pool and block table of the rank's own. The simulated dcp check
// (lib/checks) builds every rank's shard in one process; a rank of a distributed run
// (lib/dcp/dcp_run.h) builds its own alone. Both go through build_dcp_shard, so that the two runs
// attend over the same bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/batch/paged_layout.h"

namespace mla {

struct DcpShard {
  PagedLayout layout;          // this rank's pool and block table; rank-local positions
  std::vector<uint8_t> cache;  // [layout.num_blocks, page_stride] packed entries; unused bytes kUnusedCacheByte
  int64_t owned_positions = 0; // cached positions of the batch this rank holds
};

// The shard of `rank` of `world` ranks with interleave `interleave` (world >= 1, 0 <= rank < world,
// interleave >= 1, b.layout.block_size % interleave == 0). Every request gets block-table columns
// for (seq_len / world + interleave) rank-local positions plus one page, whether it owns positions
// or not, with pages numbered request after request; the entries are packed by the reference
// (bit-exact to the backends' pack, docs/semantics.md §1.1) from cache.kv_c / cache.k_pe.
DcpShard build_dcp_shard(const Batch& b, const CacheData& cache, int32_t world, int32_t rank, int32_t interleave);

// Facts about how a batch's positions fall on the ranks, for the distributed dcp check's metrics.
struct DcpOwnership {
  // (rank, request) pairs where the rank owns no position of a request that has at least one:
  // that rank returns (0, -inf) for the request's tokens.
  int64_t rank_requests_without_positions = 0;
  // Requests whose sequence is shorter than the interleave: every position is on rank 0.
  int64_t requests_shorter_than_interleave = 0;
  std::vector<int64_t> positions_per_rank;  // [world]
};
DcpOwnership dcp_ownership(const std::vector<int32_t>& seq_lens, int32_t world, int32_t interleave);

}  // namespace mla
