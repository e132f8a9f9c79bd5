// lib/batch: decode counting, block tables and page orders, slots, chunked-context expansion.
#include "lib/batch/batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>

namespace mla {
namespace {

Scenario make_scenario(std::vector<int32_t> seq_lens, std::vector<int32_t> query_lens, int32_t block_size = 64) {
  Scenario s;
  s.name = "t";
  s.file = "<test>";
  s.model.block_size = block_size;
  s.batch.seq_lens = std::move(seq_lens);
  s.batch.query_lens = std::move(query_lens);
  s.checks = {CheckKind::kPack, CheckKind::kGather, CheckKind::kConvert, CheckKind::kLayout};
  return s;
}

// --- count_decodes ------------------------------------------------------------------------------

TEST(CountDecodes, UniformSingleToken) {
  EXPECT_EQ(count_decodes({1, 1, 5, 5}, 1), 2);           // mixed_small
  EXPECT_EQ(count_decodes({1, 1, 1, 7, 7, 7}, 1), 3);     // mixed_medium
  EXPECT_EQ(count_decodes({1, 1, 1}, 1), 3);              // all decodes
}

TEST(CountDecodes, PrefillOnlyAndEmpty) {
  EXPECT_EQ(count_decodes({8, 8}, 1), 0);
  EXPECT_EQ(count_decodes({256, 256}, 4), 0);
  EXPECT_EQ(count_decodes({}, 1), 0);
}

TEST(CountDecodes, MultiTokenThreshold) {
  EXPECT_EQ(count_decodes({2, 2, 2, 9}, 2), 3);
  EXPECT_EQ(count_decodes({4, 4, 3, 3}, 4), 2);  // uniform: the run ends where the length changes
  EXPECT_EQ(count_decodes({2, 2}, 1), 0);        // above the threshold
  EXPECT_EQ(count_decodes({5, 5}, 4), 0);
}

TEST(CountDecodes, NonUniformLeadingLengths) {
  // Only the leading run of the first request's length counts (docs/semantics.md §4.4, failure mode 7).
  EXPECT_EQ(count_decodes({2, 1, 1}, 2), 1);
  EXPECT_EQ(count_decodes({1, 2, 2}, 2), 1);
  EXPECT_EQ(count_decodes({1, 1, 2, 1}, 2), 2);
}

TEST(CountDecodes, ZeroLengthRequestsAreNotDecodes) {
  EXPECT_EQ(count_decodes({0, 1, 1}, 1), 0);
  EXPECT_EQ(count_decodes({1, 0, 1}, 1), 1);
  EXPECT_EQ(count_decodes({1, 1, 0}, 4), 2);
  EXPECT_EQ(count_decodes({0, 0}, 1), 0);
}

// --- materialise: tokens ------------------------------------------------------------------------

TEST(Materialise, MixedSmallTokens) {
  Batch b = materialise(make_scenario({32, 40, 48, 56}, {1, 1, 5, 5}));
  EXPECT_EQ(b.num_reqs, 4);
  EXPECT_EQ(b.num_decodes, 2);
  EXPECT_EQ(b.num_tokens, 12);
  EXPECT_EQ(b.num_decode_tokens, 2);
  EXPECT_EQ(b.context_lens, (std::vector<int32_t>{31, 39, 43, 51}));
  EXPECT_EQ(b.req_id_per_token, (std::vector<int32_t>{0, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3}));
  EXPECT_EQ(b.token_pos, (std::vector<int32_t>{31, 39, 43, 44, 45, 46, 47, 51, 52, 53, 54, 55}));
}

TEST(Materialise, MultiTokenDecodesCountTheirTokens) {
  Scenario s = make_scenario({100, 90, 80, 70}, {4, 4, 4, 20});
  s.batch.decode_threshold = 4;
  Batch b = materialise(s);
  EXPECT_EQ(b.num_decodes, 3);
  EXPECT_EQ(b.num_decode_tokens, 12);
  EXPECT_EQ(b.num_tokens, 32);
}

TEST(Materialise, ZeroLengthRequestsHaveNoTokens) {
  Batch b = materialise(make_scenario({10, 0, 7, 5}, {1, 0, 0, 5}));
  EXPECT_EQ(b.num_decodes, 1);
  EXPECT_EQ(b.num_tokens, 6);
  EXPECT_EQ(b.req_id_per_token, (std::vector<int32_t>{0, 3, 3, 3, 3, 3}));
  EXPECT_EQ(b.token_pos, (std::vector<int32_t>{9, 0, 1, 2, 3, 4}));
  EXPECT_EQ(b.context_lens, (std::vector<int32_t>{9, 0, 7, 0}));
}

// --- materialise: block table, pages, slots -----------------------------------------------------

TEST(Materialise, BlockTableWidthStrideAndPadding) {
  Scenario s = make_scenario({32, 40, 0, 17}, {1, 1, 0, 17}, /*block_size=*/16);
  s.block_table.extra_columns = 2;
  s.block_table.stride_padding = 3;
  s.cache.page_order = PageOrder::kContiguous;
  Batch b = materialise(s);
  const PagedLayout& l = b.layout;
  EXPECT_EQ(l.num_reqs, 4);
  EXPECT_EQ(l.block_table_width, 3 + 2);   // widest request: ceil(40 / 16) = 3
  EXPECT_EQ(l.block_table_stride, 5 + 3);
  ASSERT_EQ(l.block_table.size(), 4u * 8u);
  const std::vector<int32_t> expected = {
      0, 1, -1, -1, -1, 0, 0, 0,       // 32 tokens: 2 blocks; padding past the width holds a real
      2, 3, 4,  -1, -1, 0, 0, 0,       // 40 tokens: 3 blocks   page (the pool's first), so a
      -1, -1, -1, -1, -1, 0, 0, 0,     // empty request         kernel ignoring the width reads
      5, 6, -1, -1, -1, 0, 0, 0,       // 17 tokens: 2 blocks   wrong data
  };
  EXPECT_EQ(l.block_table, expected);
}

TEST(Materialise, AutomaticAndExplicitPoolSize) {
  Scenario s = make_scenario({128, 65}, {1, 1});
  s.cache.spare_blocks = 3;
  EXPECT_EQ(materialise(s).layout.num_blocks, 2 + 2 + 3);
  s.cache.num_blocks = 10;
  EXPECT_EQ(materialise(s).layout.num_blocks, 10);
}

TEST(Materialise, GeometryPageStride) {
  Scenario s = make_scenario({10}, {1}, /*block_size=*/4);
  s.cache.page_padding_bytes = 32;
  Batch b = materialise(s);
  EXPECT_EQ(b.layout.block_size, 4);
  EXPECT_EQ(b.layout.page_stride_bytes, 4 * 656 + 32);
  EXPECT_EQ(b.layout.num_blocks, 3 + 4);
}

TEST(Materialise, ReversedPagesDescendFromTheTop) {
  Scenario s = make_scenario({64, 128}, {1, 1});
  s.cache.page_order = PageOrder::kReversed;
  s.cache.num_blocks = 8;
  Batch b = materialise(s);
  EXPECT_EQ(b.layout.block(0, 0), 7);
  EXPECT_EQ(b.layout.block(1, 0), 6);
  EXPECT_EQ(b.layout.block(1, 1), 5);
  EXPECT_EQ(b.layout.block(1, 2), -1);
}

TEST(Materialise, ShuffledPagesArePermutationAndNotContiguous) {
  Scenario s = make_scenario({512, 1024, 2048, 512, 1024, 2048}, {1, 1, 1, 7, 7, 7});
  s.seed = 5;
  Batch b = materialise(s);
  const PagedLayout& l = b.layout;
  std::vector<int32_t> used;
  bool some_request_split = false;
  for (int32_t r = 0; r < b.num_reqs; ++r) {
    const int32_t blocks = (b.seq_lens[r] + 63) / 64;
    for (int32_t c = 0; c < blocks; ++c) {
      used.push_back(l.block(r, c));
      if (c > 0 && l.block(r, c) != l.block(r, c - 1) + 1) some_request_split = true;
    }
  }
  std::set<int32_t> distinct(used.begin(), used.end());
  EXPECT_EQ(distinct.size(), used.size());
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LT(*distinct.rbegin(), b.layout.num_blocks);
  EXPECT_TRUE(some_request_split);

  const std::vector<int32_t> order = page_order(PageOrder::kShuffled, 100, 5);
  std::vector<int32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_NE(order, identity);
  EXPECT_EQ(order, page_order(PageOrder::kShuffled, 100, 5));
  EXPECT_NE(order, page_order(PageOrder::kShuffled, 100, 6));
  EXPECT_EQ(page_order(PageOrder::kContiguous, 100, 5), identity);
}

TEST(Materialise, SlotsFollowTheBlockTable) {
  Scenario s = make_scenario({5, 0, 13, 9}, {5, 0, 2, 1}, /*block_size=*/4);
  s.seed = 3;
  Batch b = materialise(s);
  ASSERT_EQ(b.slot_offsets, (std::vector<int64_t>{0, 5, 5, 18, 27}));
  ASSERT_EQ(b.all_slots.size(), 27u);
  std::set<int64_t> distinct;
  for (int32_t r = 0; r < b.num_reqs; ++r) {
    for (int32_t p = 0; p < b.seq_lens[r]; ++p) {
      const int64_t slot = b.all_slots[b.slot_offsets[r] + p];
      EXPECT_EQ(slot, int64_t{b.layout.block(r, p / 4)} * 4 + p % 4);
      distinct.insert(slot);
    }
  }
  EXPECT_EQ(distinct.size(), 27u);
  EXPECT_LT(*distinct.rbegin(), b.layout.num_blocks * 4);
}

TEST(Materialise, IsAPureFunctionOfTheScenario) {
  Scenario s = make_scenario({300, 200, 100}, {1, 50, 100});
  s.gathers.push_back(GatherCase{"ctx", {}, std::nullopt, 0, 64});
  const Batch a = materialise(s), b = materialise(s);
  EXPECT_EQ(a.layout.block_table, b.layout.block_table);
  EXPECT_EQ(a.all_slots, b.all_slots);
  ASSERT_EQ(a.gathers.size(), b.gathers.size());
  s.seed = 2;
  EXPECT_NE(materialise(s).layout.block_table, a.layout.block_table);
}

TEST(Materialise, RefusesAnInvalidScenario) {
  EXPECT_THROW(materialise(make_scenario({4}, {5})), std::invalid_argument);
  Scenario s = make_scenario({128}, {1});
  s.cache.num_blocks = 1;
  EXPECT_THROW(materialise(s), std::invalid_argument);
}

// --- gathers ------------------------------------------------------------------------------------

TEST(ChunkedContext, OneChunkPerChunkSizeOfTheLongestContext) {
  const auto chunks = context_chunks({0, 100, 30, 64}, 32);
  ASSERT_EQ(chunks.size(), 4u);  // ceil(100 / 32)
  const std::vector<std::vector<int32_t>> lens = {{0, 32, 30, 32}, {0, 32, 0, 32}, {0, 32, 0, 0}, {0, 4, 0, 0}};
  const std::vector<int64_t> rows = {94, 64, 32, 4};
  for (size_t i = 0; i < chunks.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(chunks[i].start, static_cast<int64_t>(32 * i));
    EXPECT_EQ(chunks[i].lens, lens[i]);
    EXPECT_EQ(chunks[i].rows, rows[i]);
  }
}

TEST(ChunkedContext, AsAGatherCaseStartsAreThePrefixSumsOfTheLengths) {
  const auto chunks = context_chunks({0, 100, 30, 64}, 32);
  const std::vector<std::vector<int32_t>> ws = {{0, 0, 32, 62}, {0, 0, 32, 32}, {0, 0, 32, 32}, {0, 0, 4, 4}};
  ASSERT_EQ(chunks.size(), ws.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    SCOPED_TRACE(i);
    const ResolvedGather g = chunk_gather("ctx", static_cast<int64_t>(i), chunks[i]);
    EXPECT_EQ(g.name, "ctx[" + std::to_string(i) + "]");
    EXPECT_EQ(g.workspace_starts, ws[i]);
    ASSERT_TRUE(g.seq_starts.has_value());
    EXPECT_EQ(*g.seq_starts, std::vector<int32_t>(4, static_cast<int32_t>(32 * i)));
    EXPECT_EQ(g.num_rows, chunks[i].rows);
  }
}

TEST(ChunkedContext, RowsCoverEveryContextPositionOnce) {
  const std::vector<int32_t> context = {7, 0, 129, 64, 1};
  std::vector<int64_t> covered(context.size(), 0);
  for (const ContextChunk& c : context_chunks(context, 16)) {
    for (size_t r = 0; r < context.size(); ++r) {
      if (c.lens[r] > 0) {
        EXPECT_EQ(c.start, covered[r]);  // continues where the last chunk ended
      }
      covered[r] += c.lens[r];
    }
  }
  for (size_t r = 0; r < context.size(); ++r) EXPECT_EQ(covered[r], context[r]);
}

TEST(ChunkedContext, NoContextNoChunks) {
  EXPECT_TRUE(context_chunks({0, 0}, 16).empty());
  EXPECT_TRUE(context_chunks({}, 16).empty());
}

TEST(Materialise, GathersKeepFileOrderWithChunksInPlace) {
  Scenario s = make_scenario({40, 20}, {8, 20}, /*block_size=*/16);
  s.gathers.push_back(GatherCase{"first", {0, 5}, std::vector<int32_t>{3, 1}, 9, std::nullopt});
  s.gathers.push_back(GatherCase{"ctx", {}, std::nullopt, 0, 16});
  s.gathers.push_back(GatherCase{"last", {0, 0}, std::nullopt, 0, std::nullopt});
  Batch b = materialise(s);
  ASSERT_EQ(b.gathers.size(), 4u);  // context 32: two chunks of 16
  EXPECT_EQ(b.gathers[0].name, "first");
  EXPECT_EQ(b.gathers[0].workspace_starts, (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(*b.gathers[0].seq_starts, (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(b.gathers[0].num_rows, 9);
  EXPECT_EQ(b.gathers[1].name, "ctx[0]");
  EXPECT_EQ(b.gathers[1].num_rows, 16);
  EXPECT_EQ(b.gathers[2].name, "ctx[1]");
  EXPECT_EQ(*b.gathers[2].seq_starts, (std::vector<int32_t>{16, 16}));
  EXPECT_EQ(b.gathers[3].name, "last");
  EXPECT_FALSE(b.gathers[3].seq_starts.has_value());
  EXPECT_EQ(b.gathers[3].num_rows, 0);
}

// --- generated batches --------------------------------------------------------------------------

BatchGenerator mixed_generator() {
  BatchGenerator g;
  g.num_requests_min = 4, g.num_requests_max = 12;
  g.num_decodes_min = 1, g.num_decodes_max = 6;
  g.decode_query_len = 2;
  g.decode_threshold = 2;
  g.seq_len_min = 2, g.seq_len_max = 700;
  g.prefill_query_len_min = 3, g.prefill_query_len_max = 300;
  return g;
}

TEST(GenerateBatch, SameSeedSameBatchOtherSeedOtherBatch) {
  const BatchGenerator g = mixed_generator();
  const BatchSpec a = generate_batch(g, 99), b = generate_batch(g, 99), c = generate_batch(g, 100);
  EXPECT_EQ(a.seq_lens, b.seq_lens);
  EXPECT_EQ(a.query_lens, b.query_lens);
  EXPECT_TRUE(a.seq_lens != c.seq_lens || a.query_lens != c.query_lens);
}

TEST(GenerateBatch, RespectsRangesAndPutsDecodesFirst) {
  const BatchGenerator g = mixed_generator();
  for (uint64_t seed = 0; seed < 200; ++seed) {
    SCOPED_TRACE(seed);
    const BatchSpec b = generate_batch(g, seed);
    ASSERT_EQ(b.seq_lens.size(), b.query_lens.size());
    ASSERT_GE(b.seq_lens.size(), 4u);
    ASSERT_LE(b.seq_lens.size(), 12u);
    EXPECT_EQ(b.decode_threshold, 2);
    EXPECT_EQ(b.query_lens[0], 2);  // num_decodes >= 1
    int32_t decodes = 0;
    while (decodes < static_cast<int32_t>(b.query_lens.size()) && b.query_lens[decodes] == 2) ++decodes;
    EXPECT_GE(count_decodes(b.query_lens, 2), 1);
    for (size_t r = 0; r < b.seq_lens.size(); ++r) {
      EXPECT_GE(b.seq_lens[r], 2);
      EXPECT_LE(b.seq_lens[r], 700);
      EXPECT_LE(b.query_lens[r], b.seq_lens[r]);
      if (static_cast<int32_t>(r) >= decodes) {
        EXPECT_LE(b.query_lens[r], 300);
      }
    }
  }
}

TEST(GenerateBatch, ClampsDecodesToRequestsAndQueryToSeqLen) {
  BatchGenerator g;
  g.num_requests_min = g.num_requests_max = 3;
  g.num_decodes_min = g.num_decodes_max = 10;
  g.seq_len_min = 1, g.seq_len_max = 4;
  g.prefill_query_len_min = 50, g.prefill_query_len_max = 60;
  const BatchSpec all_decodes = generate_batch(g, 1);
  EXPECT_EQ(all_decodes.query_lens, (std::vector<int32_t>{1, 1, 1}));

  g.num_decodes_min = g.num_decodes_max = 0;
  const BatchSpec prefills = generate_batch(g, 1);
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(prefills.query_lens[r], prefills.seq_lens[r]);
}

}  // namespace
}  // namespace mla
