// The dense wgmma kernel's item order (kernels/cuda/dense_mha/dense_item_order.h): the item -> (slot, head)
// map is a bijection for every tail, no tail (0) is head-major, the tail runs tile by tile, and the
// host's choice of the tail on the attention sweep's shapes and on edge cases, worked out by hand
// from the rule in the header.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "kernels/cuda/dense_mha/dense_item_order.h"

namespace {

constexpr int kRows = 128, kKeys = 128;
constexpr int64_t kCtas = 132;             // H100 / H200 SMs
constexpr int64_t kL2 = 60LL * 1024 * 1024;  // H200's 60 MiB

TEST(DenseItemOrder, EveryTailVisitsEveryItemOnce) {
  for (int32_t heads : {1, 3, 8, 16, 20, 128}) {
    for (const auto& [tiles, reqs] : {std::pair<int32_t, int32_t>{1, 1}, {5, 1}, {1, 5}, {8, 8}, {3, 5}}) {
      const int64_t per_head = static_cast<int64_t>(tiles) * reqs;
      for (int32_t tail = 0; tail <= heads; ++tail) {
        std::set<std::pair<int64_t, int32_t>> seen;
        for (int64_t w = 0; w < per_head * heads; ++w) {
          const mla::DenseItemCoords c = mla::dense_item_coords(w, tiles, reqs, heads, tail);
          ASSERT_GE(c.slot, 0);
          ASSERT_LT(c.slot, per_head);
          ASSERT_GE(c.head, 0);
          ASSERT_LT(c.head, heads);
          seen.insert({c.slot, c.head});
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), per_head * heads) << heads << " " << per_head << " " << tail;
      }
    }
  }
}

TEST(DenseItemOrder, HeadMajorThenTheTailTileByTile) {
  // 3 requests of 2 query tiles (slot = request * 2 + j, j 0 the request's last tile), 7 heads.
  // Head-major before the tail: every item without a tail.
  for (int32_t tail : {0, 1, 3}) {
    for (int64_t w = 0; w < 6 * (7 - tail); ++w) {
      const mla::DenseItemCoords c = mla::dense_item_coords(w, 2, 3, 7, tail);
      EXPECT_EQ(c.head, w / 6) << w;
      EXPECT_EQ(c.slot, w % 6) << w;
    }
  }
  // Tail of 3 heads (4, 5, 6) from item 24: every request's last tile (j 0: slots 0, 2, 4), each
  // for heads 4, 5, 6, then every request's first tile (j 1: slots 1, 3, 5).
  const int64_t slots[] = {0, 0, 0, 2, 2, 2, 4, 4, 4, 1, 1, 1, 3, 3, 3, 5, 5, 5};
  for (int64_t y = 0; y < 18; ++y) {
    const mla::DenseItemCoords c = mla::dense_item_coords(24 + y, 2, 3, 7, 3);
    EXPECT_EQ(c.head, 4 + y % 3) << y;
    EXPECT_EQ(c.slot, slots[y]) << y;
  }
  // A tail of one head runs tile-major across its requests: slots 0, 2, 4, 1, 3, 5.
  const int64_t last_head[] = {0, 2, 4, 1, 3, 5};
  for (int64_t y = 0; y < 6; ++y) {
    EXPECT_EQ(mla::dense_item_coords(36 + y, 2, 3, 7, 1).head, 6);
    EXPECT_EQ(mla::dense_item_coords(36 + y, 2, 3, 7, 1).slot, last_head[y]) << y;
  }
  // The whole problem as the tail: tile-major from the first item.
  EXPECT_EQ(mla::dense_item_coords(1, 2, 3, 7, 7).head, 1);
  EXPECT_EQ(mla::dense_item_coords(7, 2, 3, 7, 7).slot, 2);
}

// cu_seqlens of `reqs` requests of n tokens each.
std::vector<int32_t> cumulative(int32_t reqs, int32_t n) {
  std::vector<int32_t> cu(reqs + 1);
  for (int32_t r = 0; r <= reqs; ++r) cu[r] = r * n;
  return cu;
}

int32_t tail_for(int32_t reqs, int32_t nq, int32_t nk, bool causal, int32_t heads) {
  const std::vector<int32_t> cu_q = cumulative(reqs, nq), cu_k = cumulative(reqs, nk);
  return mla::dense_tail_heads(cu_q.data(), cu_k.data(), reqs, causal, heads, kRows, kKeys, kCtas, kL2);
}

TEST(DenseItemOrder, TailOfTheSweepShapes) {
  // Causal 4k: 1 + ... + 32 = 528 key tiles per head, longest 32: ceil(132 * 32 / 528) = 8; the L2
  // cap, 30 MiB / (4096 keys * 512 B) = 15, does not bind.
  EXPECT_EQ(tail_for(1, 4096, 4096, true, 128), 8);
  EXPECT_EQ(tail_for(1, 4096, 4096, true, 16), 8);
  EXPECT_EQ(tail_for(1, 4096, 4096, true, 4), 4);  // at most the heads there are
  // Causal 8k: 2080 tiles, longest 64: ceil(8448 / 2080) = 5; cap 30 MiB / 4 MiB = 7.
  EXPECT_EQ(tail_for(1, 8192, 8192, true, 128), 5);
  // Causal 1k: 36 tiles, longest 8: ceil(1056 / 36) = 30; cap 60.
  EXPECT_EQ(tail_for(1, 1024, 1024, true, 128), 30);
  // Several requests: 8 of 512 (80 tiles per head, longest 4): ceil(528 / 80) = 7; 4 of 1024
  // (144, longest 8): ceil(1056 / 144) = 8; 8 of 1024 (288): ceil(1056 / 288) = 4, cap 30 MiB /
  // (8192 keys * 512 B) = 7; 4 of 2048 (544, longest 16): ceil(2112 / 544) = 4.
  EXPECT_EQ(tail_for(8, 512, 512, true, 128), 7);
  EXPECT_EQ(tail_for(4, 1024, 1024, true, 128), 8);
  EXPECT_EQ(tail_for(8, 1024, 1024, true, 128), 4);
  EXPECT_EQ(tail_for(4, 2048, 2048, true, 128), 4);
  // Causal 32k: 256 * 257 / 2 = 32896 tiles < 132 * 256, so 2 by balance, but one head's K / V
  // (16 MiB) is all that fits in half of L2: 1. The same for 4 requests of 8k (8320 < 8448: 2 by
  // balance), whose K / V together are 16 MiB per head: the cap counts every request's keys.
  EXPECT_EQ(tail_for(1, 32768, 32768, true, 128), 1);
  EXPECT_EQ(tail_for(4, 8192, 8192, true, 128), 1);
  // Unmasked: every item of a request has the same length; order does not balance anything.
  EXPECT_EQ(tail_for(4, 1024, 1024, false, 128), 0);
  EXPECT_EQ(tail_for(4, 1024, 4096, false, 128), 0);
  // The prefix-cache hit (1024 queries over 8192 keys): items of 57..64 key tiles, nearly equal.
  EXPECT_EQ(tail_for(1, 1024, 8192, true, 128), 0);
  // One head, or enough work per head (16 requests of 8k: 16 * 2080 >= 132 * 64).
  EXPECT_EQ(tail_for(1, 4096, 4096, true, 1), 0);
  EXPECT_EQ(tail_for(16, 8192, 8192, true, 128), 0);
}

TEST(DenseItemOrder, TailAtTheRulesEdges) {
  // Lengths exactly 2x apart vary enough: 256 causal queries, items of 1 and 2 key tiles, 3 per
  // head: ceil(132 * 2 / 3) = 88 heads; cap 30 MiB / (256 keys * 512 B) = 240.
  EXPECT_EQ(tail_for(1, 256, 256, true, 128), 88);
  // An item's length is its last row's: 1024 queries over 1088 keys (bottom-right, 64 keys
  // ahead), item i sees 128 i + 192 keys: i + 2 tiles (2..9; the last 1088 keys, 9 tiles), 44
  // per head: ceil(132 * 9 / 44) = 27; cap 30 MiB / (1088 * 512 B) = 56.
  EXPECT_EQ(tail_for(1, 1024, 1088, true, 128), 27);
  // 256 causal queries (items of 1 and 2 key tiles) beside 128 queries over 65536 keys (one item
  // of 512): 515 tiles per head, so 132 heads by balance, but one head's K / V (65792 keys * 512 B,
  // 32.1 MiB) does not fit in half of L2: no tail.
  const std::vector<int32_t> cu_q = {0, 256, 384}, cu_k = {0, 256, 65792};
  EXPECT_EQ(mla::dense_tail_heads(cu_q.data(), cu_k.data(), 2, true, 128, kRows, kKeys, kCtas, kL2), 0);
}

TEST(DenseItemOrder, TailSkipsEmptyItemsAndRequests) {
  // A request without keys (its items have no key tiles) and one without queries change nothing:
  // the 4k request alone decides (8, as above).
  const std::vector<int32_t> cu_q = {0, 4096, 4096, 4196};
  const std::vector<int32_t> cu_k = {0, 4096, 4196, 4196};
  EXPECT_EQ(mla::dense_tail_heads(cu_q.data(), cu_k.data(), 3, true, 128, kRows, kKeys, kCtas, kL2), 8);
  // A request without keys (items of no key tiles) beside the prefix-cache hit's nearly equal
  // items (57..64 tiles): the empty items do not count as the shortest, so no tail.
  const std::vector<int32_t> hit_q = {0, 1024, 1124}, hit_k = {0, 8192, 8192};
  EXPECT_EQ(mla::dense_tail_heads(hit_q.data(), hit_k.data(), 2, true, 128, kRows, kKeys, kCtas, kL2), 0);
  // Nothing to do at all.
  const std::vector<int32_t> none = {0, 0};
  EXPECT_EQ(mla::dense_tail_heads(none.data(), none.data(), 1, true, 128, kRows, kKeys, kCtas, kL2), 0);
}

}  // namespace
