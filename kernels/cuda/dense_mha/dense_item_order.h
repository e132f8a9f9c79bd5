// The order in which the dense `wgmma` kernel takes its work items (dense_mha_wgmma.cu's
// work_item), and the host's choice of that order for a problem. An item is (request, 128-query
// tile, head); the persistent grid's CTAs claim items in index order, each the next unclaimed one.
//
// Order: head-major for every head but the last `tail_heads`: all items of head 0, then of head 1,
// ...; within a head, request by request, each request's later (under a causal mask, longer) query
// tiles first. The last `tail_heads` heads come last, tile-major: the last tile of every request
// for each of those heads, then the tile before it, ..., so that at the end of the schedule the
// longest items are claimed first and the shortest last (longest-processing-time-first, exact
// when the requests are of one length).
//
// Why only a tail: head-major keeps each head's K / V hot in L2 while its query tiles run, but
// under a causal mask the last head's longest items would be claimed when the other CTAs are
// about to run out of work: with few heads or long rows that tail is most of the difference to a
// balanced schedule (16 heads at causal 4k: 13 % of the time, docs/performance.md). Tile-major
// order everywhere would keep many heads' K / V in L2 at once and costs up to 2 % where the items
// are of one length; the tail keeps only its `tail_heads` heads' K / V (of every request) in L2 at
// once. The order changes which CTA runs an item, never the item's bits.
#pragma once

#include <cstdint>

#include "kernels/common/hd.h"

namespace mla {

struct DenseItemCoords {
  int64_t slot;  // request * q_tiles + j: the request's query tile q_tiles - 1 - j
  int32_t head;
};

// Item w (0 <= w < q_tiles * num_reqs * num_heads) -> its slot and head; tail_heads in
// [0, num_heads]. A bijection for each such tail_heads; 0 is head-major throughout.
MLA_HD DenseItemCoords dense_item_coords(int64_t w, int32_t q_tiles, int32_t num_reqs, int32_t num_heads,
                                         int32_t tail_heads) {
  const int64_t per_head = static_cast<int64_t>(q_tiles) * num_reqs;
  const int64_t tail_begin = static_cast<int64_t>(num_heads - tail_heads) * per_head;
  if (w < tail_begin) return DenseItemCoords{w % per_head, static_cast<int32_t>(w / per_head)};
  const int64_t y = w - tail_begin;
  const int64_t k = y / tail_heads;  // the (j, request) position, j-major
  return DenseItemCoords{(k % num_reqs) * q_tiles + k / num_reqs,
                         static_cast<int32_t>(num_heads - tail_heads + y % tail_heads)};
}

// The tail's heads for a problem (host; cu_q / cu_k are the host copies of cu_seqlens, num_reqs + 1
// entries). 0 (no tail) unless the items' lengths vary (the shortest non-empty item needs at most
// half the longest one's key tiles: a causal mask) and one head's items are too little work to
// outlast the longest item on every CTA (key tiles of all its items < ctas * longest): then as
// many heads as make it so, at most num_heads and at most as many as keep their K and V (512 bytes
// per key and head, every request's) within half of the L2 (0 where one head's do not fit).
inline int32_t dense_tail_heads(const int32_t* cu_q, const int32_t* cu_k, int32_t num_reqs, bool causal,
                                int32_t num_heads, int rows_per_item, int keys_per_tile, int64_t ctas,
                                int64_t l2_bytes) {
  if (!causal || num_heads <= 1 || ctas <= 1 || num_reqs <= 0) return 0;
  int64_t work = 0, longest = 0, shortest = INT64_MAX, all_keys = 0;
  for (int32_t r = 0; r < num_reqs; ++r) {
    const int64_t nq = cu_q[r + 1] - cu_q[r] > 0 ? cu_q[r + 1] - cu_q[r] : 0;
    const int64_t nk = cu_k[r + 1] - cu_k[r] > 0 ? cu_k[r + 1] - cu_k[r] : 0;
    all_keys += nk;
    for (int64_t i0 = 0; i0 < nq; i0 += rows_per_item) {
      const int64_t last = (i0 + rows_per_item < nq ? i0 + rows_per_item : nq) - 1;
      int64_t visible = last + nk - nq + 1;  // bottom-right causal: keys of the item's last row
      visible = visible < 0 ? 0 : (visible > nk ? nk : visible);
      const int64_t tiles = (visible + keys_per_tile - 1) / keys_per_tile;
      if (tiles == 0) continue;
      work += tiles;
      if (tiles > longest) longest = tiles;
      if (tiles < shortest) shortest = tiles;
    }
  }
  if (longest == 0 || 2 * shortest > longest || work >= ctas * longest) return 0;
  int64_t heads = (ctas * longest + work - 1) / work;
  const int64_t l2_cap = l2_bytes / 2 / (all_keys * 512);  // all_keys > 0: an item has key tiles
  if (heads > l2_cap) heads = l2_cap;
  if (heads > num_heads) heads = num_heads;
  return static_cast<int32_t>(heads);
}

}  // namespace mla
