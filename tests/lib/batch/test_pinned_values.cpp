// lib/batch with pinned values (docs/scenarios.md "Pinned values"): an explicit block table, a
// decode count, tile scales and attention picks are materialised exactly as written.
#include <gtest/gtest.h>

#include <cfloat>
#include <cstring>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/batch/attention_data.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/batch/topk_indices.h"
#include "tests/common/small_scenario.h"

namespace mla {
namespace {

Scenario pinned_scenario() {
  Scenario s = test::small_scenario("pinned", 5, 2, 4, 8, {20, 8, 9}, {1, 1, 3});
  s.cache.num_blocks = 10;
  s.block_table.extra_columns = 1;
  s.block_table.stride_padding = 2;
  s.block_table.rows = IndexRows{{9, 4, 7}, {0}, {3, 5, -12, 99}};
  s.checks = {CheckKind::kPack};
  return s;
}

TEST(PinnedTable, RowsAreCopiedAsWrittenAndPaddedWithMinusOne) {
  const Scenario s = pinned_scenario();
  ASSERT_FALSE(validate_scenario(s).has_value()) << validate_scenario(s)->to_string();
  const Batch b = materialise(s);
  const PagedLayout& l = b.layout;
  EXPECT_EQ(l.block_table_width, 4 + 1);  // the longest pinned row + extra_columns
  EXPECT_EQ(l.block_table_stride, 5 + 2);
  const std::vector<int32_t> pages = page_order(s.cache.page_order, l.num_blocks, s.seed);
  const int32_t pad = pages[0];
  const std::vector<int32_t> want = {9, 4, 7, -1, -1, pad, pad,  //
                                     0, -1, -1, -1, -1, pad, pad,  //
                                     3, 5, -12, 99, -1, pad, pad};
  EXPECT_EQ(l.block_table, want);
  // Slots follow the pinned pages: request 0's position 17 is page 7, offset 1.
  EXPECT_EQ(b.all_slots[static_cast<size_t>(b.slot_offsets[0] + 17)], 7 * 8 + 1);
  EXPECT_EQ(b.all_slots[static_cast<size_t>(b.slot_offsets[2] + 8)], 5 * 8 + 0);
}

TEST(PinnedDecodes, TheCountIsTheSplit) {
  Scenario s = pinned_scenario();
  s.batch.query_lens = {1, 1, 1};
  EXPECT_EQ(materialise(s).num_decodes, 3);  // the threshold rule
  s.batch.num_decodes = 1;
  const Batch b = materialise(s);
  EXPECT_EQ(b.num_decodes, 1);
  EXPECT_EQ(b.num_decode_tokens, 1);
}

float stored_scale(const CacheData& d, const Batch& b, int32_t r, int32_t p, int32_t tile) {
  const int64_t slot = b.all_slots[static_cast<size_t>(b.slot_offsets[static_cast<size_t>(r)] + p)];
  float scale = 0.0f;
  std::memcpy(&scale, &d.ref_cache[static_cast<size_t>(b.layout.entry_offset(slot) + 512 + 4 * tile)], sizeof scale);
  return scale;
}

TEST(FixedScales, TheReferencePackStoresExactlyThePinnedScale) {
  Scenario s = pinned_scenario();
  const std::vector<FixedScale> pins = {{0, 0, 0, 1.0f / 448.0f}, {0, 19, 3, 1.0f},   {1, 7, 1, FLT_MIN},
                                        {2, 8, 2, 145.714279f},   {2, 0, 0, 2.22857603e-33f}};
  s.cache.fixed_scales = pins;
  ASSERT_FALSE(validate_scenario(s).has_value()) << validate_scenario(s)->to_string();
  const Batch b = materialise(s);
  const CacheData pinned = make_cache_data(s, b, /*large_tiles=*/true);
  Scenario plain_s = s;
  plain_s.cache.fixed_scales.clear();
  const CacheData plain = make_cache_data(plain_s, b, /*large_tiles=*/true);
  for (const FixedScale& f : pins) {
    SCOPED_TRACE(std::to_string(f.request) + "/" + std::to_string(f.position) + "/" + std::to_string(f.tile));
    EXPECT_EQ(stored_scale(pinned, b, f.request, f.position, f.tile), f.scale);
    // The tile's largest magnitude is the amax the scale needs; its other tiles keep their values.
    const int64_t row = b.slot_offsets[static_cast<size_t>(f.request)] + f.position;
    float amax = 0.0f;
    for (int e = 0; e < 128; ++e)
      amax = std::max(amax, std::fabs(bf16_to_f32(pinned.kv_c[static_cast<size_t>(row * 512 + f.tile * 128 + e)])));
    EXPECT_EQ(amax, bf16_to_f32(*tile_amax_for_scale(f.scale)));
    for (int t = 0; t < 4; ++t) {
      if (t == f.tile) continue;
      bool pinned_too = false;
      for (const FixedScale& g : pins) pinned_too |= g.request == f.request && g.position == f.position && g.tile == t;
      if (pinned_too) continue;
      EXPECT_TRUE(std::equal(&pinned.kv_c[static_cast<size_t>(row * 512 + t * 128)],
                             &pinned.kv_c[static_cast<size_t>(row * 512 + t * 128 + 128)],
                             &plain.kv_c[static_cast<size_t>(row * 512 + t * 128)]));
    }
  }
  // Tokens without pins are untouched.
  const int64_t other = b.slot_offsets[0] + 1;
  EXPECT_TRUE(std::equal(&pinned.kv_c[static_cast<size_t>(other * 512)], &pinned.kv_c[static_cast<size_t>(other * 512 + 512)],
                         &plain.kv_c[static_cast<size_t>(other * 512)]));
}

TEST(PinnedPicks, AttentionDataTakesThemMinusOnePadded) {
  Scenario s = pinned_scenario();
  s.attention.topk_positions = IndexRows{{0, 19}, {}, {-123456, 8, 2}, {1}, {INT32_MIN, -1, 0, 3}};
  s.checks = {CheckKind::kForward};
  ASSERT_FALSE(validate_scenario(s).has_value()) << validate_scenario(s)->to_string();
  const Batch b = materialise(s);
  const AttentionData d = make_attention_data(s, b, make_cache_data(s, b, false));
  EXPECT_EQ(d.topk_pos, (std::vector<int32_t>{0, 19, -1, -1, -1, -1, -1, -1, -123456, 8, 2, -1, 1, -1, -1, -1,
                                              INT32_MIN, -1, 0, 3}));
}

TEST(InvalidMix, ARequestOutsideTheBatchDrawsNoBlockOfIt) {
  Scenario s = pinned_scenario();
  s.block_table.rows.reset();
  const Batch b = materialise(s);
  InvalidMix mix;
  mix.negative_block = 1.0;
  for (int32_t req : {-3, 3, 1000}) {
    Rng rng(1);
    std::vector<int32_t> row(4, 5);
    apply_invalid_mix(rng, mix, b, req, row.data(), 4);
    EXPECT_EQ(row, std::vector<int32_t>(4, -1)) << req;
  }
}

}  // namespace
}  // namespace mla
