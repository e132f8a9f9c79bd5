// plan_sparse_mqa (the sparse-MQA work partition) and sparse_plan_splits (its cost model of the
// split count): items cover each token's top-k range exactly once in 64-column blocks, split partials
// are numbered consecutively per token, and the model picks the fastest measured split counts.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lib/pipeline/sparse_mqa_plan.h"

namespace {

using mla::plan_sparse_mqa;
using mla::plan_sparse_mqa_on_device;
using mla::sparse_plan_splits;
using mla::SparseMqaPlan;

// Every token's items are contiguous, in column order, cover [0, topk) without gaps or overlap,
// start on 64-column boundaries, and are numbered as partials exactly when there is more than one.
void expect_well_formed(const SparseMqaPlan& p, int32_t tokens, int32_t topk) {
  ASSERT_EQ(p.num_tokens, tokens);
  ASSERT_EQ(p.split_offsets.size(), static_cast<size_t>(tokens) + 1);
  size_t i = 0;
  int32_t next_partial = 0;
  for (int32_t t = 0; t < tokens; ++t) {
    EXPECT_EQ(p.split_offsets[static_cast<size_t>(t)], next_partial) << "token " << t;
    const size_t first = i;
    int32_t col = 0;
    while (i < p.items.size() && p.items[i].token == t) {
      EXPECT_EQ(p.items[i].k_begin, col) << "token " << t;
      EXPECT_EQ(p.items[i].k_begin % 64, 0);
      EXPECT_GT(p.items[i].k_end, p.items[i].k_begin);
      col = p.items[i].k_end;
      ++i;
    }
    EXPECT_EQ(col, topk) << "token " << t << " is not covered up to top-k";
    const size_t n = i - first;
    for (size_t k = first; k < i; ++k) {
      EXPECT_EQ(p.items[k].partial, n > 1 ? next_partial + static_cast<int32_t>(k - first) : -1);
    }
    if (n > 1) next_partial += static_cast<int32_t>(n);
  }
  EXPECT_EQ(i, p.items.size()) << "items of unknown tokens";
  EXPECT_EQ(p.split_offsets.back(), next_partial);
  EXPECT_EQ(p.num_partials, next_partial);
}

TEST(SparseMqaPlan, ManyTokensAreNotSplit) {
  const SparseMqaPlan p = plan_sparse_mqa(256, 2048, 132);
  expect_well_formed(p, 256, 2048);
  EXPECT_EQ(p.items.size(), 256u);
  EXPECT_EQ(p.num_partials, 0);
}

TEST(SparseMqaPlan, FewTokensAreSplitUpToTheTarget) {
  // 2 tokens, target 64: 32 splits each, one 64-column block per item.
  const SparseMqaPlan p = plan_sparse_mqa(2, 2048, 64);
  expect_well_formed(p, 2, 2048);
  EXPECT_EQ(p.items.size(), 64u);
  EXPECT_EQ(p.num_partials, 64);
  // More splits than column blocks: one block each, no more.
  const SparseMqaPlan q = plan_sparse_mqa(1, 256, 1000);
  expect_well_formed(q, 1, 256);
  EXPECT_EQ(q.items.size(), 4u);
}

TEST(SparseMqaPlan, PartialLastBlockAndOddSplits) {
  // top-k 200 = 4 blocks (the last one 8 columns); 3 tokens, target 7 -> 3 splits of 2 blocks -> 2 items.
  const SparseMqaPlan p = plan_sparse_mqa(3, 200, 7);
  expect_well_formed(p, 3, 200);
  ASSERT_EQ(p.items.size(), 6u);
  EXPECT_EQ(p.items[1].k_begin, 128);
  EXPECT_EQ(p.items[1].k_end, 200);
}

TEST(SparseMqaPlan, EmptyInputs) {
  EXPECT_TRUE(plan_sparse_mqa(0, 2048, 264).items.empty());
  const SparseMqaPlan p = plan_sparse_mqa(4, 0, 264);
  EXPECT_TRUE(p.items.empty());
  EXPECT_EQ(p.split_offsets, std::vector<int32_t>(5, 0));
}

// The fastest measured split count of each shape of the split_k sweep on an H100 (132 SMs,
// scripts/fit_split_plan.py over mla-bench --sweep split_k; the times are medians in us of 1, 2, 4,
// 8, ... forced splits per token, e.g. batch 1 x 2 tokens, H 128, K 2048: 157.9, 87.2, 55.9, 40.3,
// 37.8 (16), 44.3 (32)). The model must pick it on every shape.
TEST(SparseMqaPlanSplits, PicksTheFastestMeasuredSplitsOfTheH100Sweep) {
  struct Measured {
    int64_t tokens;
    int32_t heads, topk, fastest;
  };
  const Measured sweep[] = {
      {2, 128, 2048, 16}, {8, 128, 2048, 8},  {32, 128, 2048, 2}, {128, 128, 2048, 1},
      {2, 128, 512, 8},   {32, 128, 512, 2},  {2, 128, 8192, 32}, {32, 128, 8192, 2},
      {2, 16, 2048, 16},  {2, 64, 2048, 16},  {32, 16, 2048, 4},  {32, 64, 2048, 4},
  };
  for (const Measured& m : sweep)
    EXPECT_EQ(sparse_plan_splits(m.tokens, m.heads, m.topk, 132), m.fastest)
        << m.tokens << " tokens, " << m.heads << " heads, K " << m.topk;
}

TEST(SparseMqaPlanSplits, TheDecodeShapeIsNotSplit) {
  // batch 128 x 2 tokens, 128 heads, K 2048 (FlashMLA's decode shape): splitting in two added fp32
  // partials and the combine for no occupancy gain (H200: 853 -> 755 us without the split).
  EXPECT_EQ(sparse_plan_splits(256, 128, 2048, 132), 1);
  const SparseMqaPlan p = plan_sparse_mqa_on_device(256, 128, 2048, 132);
  EXPECT_EQ(p.items.size(), 256u);
  EXPECT_EQ(p.num_partials, 0);
}

TEST(SparseMqaPlanSplits, StaysWithinTheColumnBlocksAndHandlesDegenerateInputs) {
  EXPECT_EQ(sparse_plan_splits(1, 128, 64, 132), 1);  // one block: nothing to split
  // 1000 SMs would take far more splits than K 192's 3 column blocks: capped at 3.
  EXPECT_EQ(sparse_plan_splits(1, 16, 192, 1000), 3);
  EXPECT_EQ(sparse_plan_splits(0, 128, 2048, 132), 1);
  EXPECT_EQ(sparse_plan_splits(2, 128, 0, 132), 1);
  EXPECT_EQ(sparse_plan_splits(2, 128, 2048, 0), 1);
  // The plan on the device gives every token the chosen split count.
  const SparseMqaPlan q = plan_sparse_mqa_on_device(2, 128, 2048, 132);
  EXPECT_EQ(q.items.size(), 32u);
  EXPECT_EQ(q.num_partials, 32);
}

}  // namespace
