// The DCP shard builder and the merge order (lib/dcp/shard.h, merge_tree.h): every cached position
// lands on the rank the rule of docs/semantics.md §3 names, at its rank-local position, with the
// same 656 bytes as in the single-rank pool; the ownership figures and the merge tree as worked
// out by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "kernels/common/ds_mla_entry.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/dcp/merge_tree.h"
#include "lib/dcp/shard.h"
#include "tests/common/small_scenario.h"

namespace mla {
namespace {

TEST(DcpShard, EveryPositionOnItsOwnerAtItsLocalPositionWithTheSameBytes) {
  const Scenario s = test::small_scenario("shard", 71, 8, 64, 16, {1, 7, 33, 70}, {1, 1, 1, 1});
  const Batch b = materialise(s);
  const CacheData cache = make_cache_data(s, b, /*large_tiles=*/false);
  for (const auto& [world, interleave] : std::vector<std::pair<int32_t, int32_t>>{{2, 1}, {3, 2}, {4, 16}, {5, 4}}) {
    std::vector<DcpShard> shards;
    int64_t held = 0;
    for (int32_t rank = 0; rank < world; ++rank) {
      shards.push_back(build_dcp_shard(b, cache, world, rank, interleave));
      held += shards.back().owned_positions;
    }
    int64_t positions = 0;
    std::vector<std::vector<bool>> written(static_cast<size_t>(world));
    for (int32_t rank = 0; rank < world; ++rank)
      written[static_cast<size_t>(rank)].assign(shards[static_cast<size_t>(rank)].cache.size(), false);
    for (int32_t r = 0; r < b.num_reqs; ++r)
      for (int64_t p = 0; p < b.seq_lens[static_cast<size_t>(r)]; ++p, ++positions) {
        // The rule, written out here: owner (p / I) % W, local (p / (W I)) I + p % I.
        const int32_t owner = static_cast<int32_t>((p / interleave) % world);
        const int64_t local = (p / (int64_t{world} * interleave)) * interleave + p % interleave;
        const DcpShard& sh = shards[static_cast<size_t>(owner)];
        const int64_t got = sh.layout.entry_offset(sh.layout.slot(r, local));
        const int64_t want = b.layout.entry_offset(b.layout.slot(r, p));
        ASSERT_EQ(0, std::memcmp(&sh.cache[static_cast<size_t>(got)], &cache.ref_cache[static_cast<size_t>(want)],
                                 DsMlaEntry::kBytes))
            << "W " << world << " I " << interleave << " request " << r << " position " << p;
        for (int64_t i = 0; i < DsMlaEntry::kBytes; ++i) written[static_cast<size_t>(owner)][static_cast<size_t>(got + i)] = true;
      }
    EXPECT_EQ(held, positions) << "W " << world;
    // Nothing else was written: every other byte of every pool is still the unused byte.
    for (int32_t rank = 0; rank < world; ++rank) {
      const DcpShard& sh = shards[static_cast<size_t>(rank)];
      for (size_t i = 0; i < sh.cache.size(); ++i)
        if (!written[static_cast<size_t>(rank)][i]) {
          ASSERT_EQ(sh.cache[i], kUnusedCacheByte) << "rank " << rank << " byte " << i;
        }
    }
  }
}

TEST(DcpShard, RefusesAnInterleaveThatDoesNotDivideTheBlockAndARankOutsideTheWorld) {
  const Scenario s = test::small_scenario("shard", 72, 8, 64, 16, {20}, {1});
  const Batch b = materialise(s);
  const CacheData cache = make_cache_data(s, b, false);
  EXPECT_THROW(build_dcp_shard(b, cache, 2, 0, 3), std::invalid_argument);
  EXPECT_THROW(build_dcp_shard(b, cache, 2, 2, 1), std::invalid_argument);
  EXPECT_THROW(build_dcp_shard(b, cache, 0, 0, 1), std::invalid_argument);
}

TEST(DcpOwnership, CountsByHand) {
  // Interleave 16, 4 ranks. 1, 5 and 15 tokens: shorter than the interleave, all on rank 0 (3
  // ranks without a position each); 16 tokens: all on rank 0 (3); 40 tokens: ranks 0, 1, 2 (rank 3
  // has none); 300 tokens: every rank. 3 + 3 + 3 + 3 + 1 = 13 pairs; 3 short requests.
  const DcpOwnership o = dcp_ownership({1, 5, 15, 16, 40, 300}, 4, 16);
  EXPECT_EQ(o.rank_requests_without_positions, 13);
  EXPECT_EQ(o.requests_shorter_than_interleave, 3);
  // Rank 0: all of the first four, positions 0-15 of the 40 (16-31 are rank 1's, 32-39 rank 2's),
  // and the 300's positions with (p / 16) % 4 == 0.
  int64_t r0_300 = 0;
  for (int p = 0; p < 300; ++p) r0_300 += (p / 16) % 4 == 0;
  EXPECT_EQ(o.positions_per_rank[0], 1 + 5 + 15 + 16 + 16 + r0_300);
  EXPECT_EQ(o.positions_per_rank[0] + o.positions_per_rank[1] + o.positions_per_rank[2] + o.positions_per_rank[3],
            1 + 5 + 15 + 16 + 40 + 300);
}

TEST(DcpMergeSteps, ABalancedTree) {
  const auto steps = [](int32_t w) {
    std::vector<std::pair<int32_t, int32_t>> v;
    for (const DcpMergeStep& s : dcp_merge_steps(w)) v.emplace_back(s.into, s.from);
    return v;
  };
  using V = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(steps(1), V{});
  EXPECT_EQ(steps(2), (V{{0, 1}}));
  EXPECT_EQ(steps(4), (V{{0, 1}, {2, 3}, {0, 2}}));
  EXPECT_EQ(steps(5), (V{{0, 1}, {2, 3}, {0, 2}, {0, 4}}));
  EXPECT_EQ(steps(8), (V{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 2}, {4, 6}, {0, 4}}));
  // Every rank is absorbed exactly once, and rank 0 ends with all of them.
  for (int32_t w = 1; w <= 33; ++w) {
    std::vector<int> absorbed(static_cast<size_t>(w), 0);
    for (const DcpMergeStep& s : dcp_merge_steps(w)) {
      ASSERT_EQ(absorbed[static_cast<size_t>(s.into)], 0) << "W " << w << ": rank " << s.into << " merges after it was absorbed";
      ++absorbed[static_cast<size_t>(s.from)];
    }
    for (int32_t r = 1; r < w; ++r) EXPECT_EQ(absorbed[static_cast<size_t>(r)], 1) << "W " << w << " rank " << r;
    EXPECT_EQ(absorbed[0], 0);
  }
}

}  // namespace
}  // namespace mla
