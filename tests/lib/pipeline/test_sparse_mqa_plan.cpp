// plan_sparse_mqa (the sparse-MQA work partition) and sparse_plan_target (its device-filling
// target): items cover each token's top-k range exactly once in 64-column blocks, split partials
// are numbered consecutively per token, and the target counts CTAs (items x 64-head groups).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lib/pipeline/sparse_mqa_plan.h"

namespace {

using mla::plan_sparse_mqa;
using mla::sparse_plan_target;
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

TEST(SparseMqaPlanTarget, CountsCtasNotItems) {
  // 132 SMs: two waves are 264 CTAs.
  EXPECT_EQ(sparse_plan_target(132, 128), 132);  // 2 head groups per item
  EXPECT_EQ(sparse_plan_target(132, 64), 264);
  EXPECT_EQ(sparse_plan_target(132, 16), 264);   // one (partly empty) group
  EXPECT_EQ(sparse_plan_target(132, 72), 132);   // 72 heads: 2 groups
  EXPECT_EQ(sparse_plan_target(132, 192), 88);   // 3 groups
  EXPECT_EQ(sparse_plan_target(100, 192), 67);   // ceil(200 / 3)
  // Degenerate inputs still give a usable target.
  EXPECT_EQ(sparse_plan_target(0, 128), 1);
  EXPECT_EQ(sparse_plan_target(132, 0), 264);
}

TEST(SparseMqaPlanTarget, TheMeasuredShapeIsNoLongerSplit) {
  // batch 128 x 2 tokens, 128 heads, K 2048 on an H200 (132 SMs): one item per token.
  const SparseMqaPlan p = plan_sparse_mqa(256, 2048, sparse_plan_target(132, 128));
  EXPECT_EQ(p.items.size(), 256u);
  EXPECT_EQ(p.num_partials, 0);
  // Batch 1 x 2 tokens still fills the device: 66 items per token, capped at 32 blocks.
  const SparseMqaPlan q = plan_sparse_mqa(2, 2048, sparse_plan_target(132, 128));
  EXPECT_EQ(q.items.size(), 64u);
}

}  // namespace
