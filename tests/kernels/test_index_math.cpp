// Index arithmetic shared by the backends (kernels/common/index_math.h): DCP ownership and local
// positions, top-k -> slot, and the owner of a gather row.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/common/index_math.h"

namespace {

using mla::kInvalidIndex;

TEST(IndexMath, DcpOwnershipFollowsInterleavedRoundRobin) {
  // W = 2, I = 2: positions 0,1 -> rank 0; 2,3 -> rank 1; 4,5 -> rank 0; ...
  const bool rank0[] = {true, true, false, false, true, true, false, false};
  for (int64_t pos = 0; pos < 8; ++pos) {
    EXPECT_EQ(mla::dcp_owns(pos, 2, 0, 2), rank0[pos]) << pos;
    EXPECT_EQ(mla::dcp_owns(pos, 2, 1, 2), !rank0[pos]) << pos;
  }
  // Local positions of rank 0's tokens 0,1,4,5,8 -> 0,1,2,3,4; rank 1's 2,3,6 -> 0,1,2.
  EXPECT_EQ(mla::dcp_local_pos(0, 2, 2), 0);
  EXPECT_EQ(mla::dcp_local_pos(1, 2, 2), 1);
  EXPECT_EQ(mla::dcp_local_pos(4, 2, 2), 2);
  EXPECT_EQ(mla::dcp_local_pos(5, 2, 2), 3);
  EXPECT_EQ(mla::dcp_local_pos(8, 2, 2), 4);
  EXPECT_EQ(mla::dcp_local_pos(2, 2, 2), 0);
  EXPECT_EQ(mla::dcp_local_pos(3, 2, 2), 1);
  EXPECT_EQ(mla::dcp_local_pos(6, 2, 2), 2);
}

TEST(IndexMath, DcpLocalPositionsOfEachRankAreDenseAndInOrder) {
  for (int32_t world : {1, 2, 3, 4, 8}) {
    for (int32_t interleave : {1, 2, 4, 64}) {
      std::vector<int64_t> next_local(world, 0);
      int owners_seen = 0;
      for (int64_t pos = 0; pos < 3 * world * interleave + 5; ++pos) {
        int owners = 0;
        for (int32_t rank = 0; rank < world; ++rank) {
          if (!mla::dcp_owns(pos, world, rank, interleave)) continue;
          ++owners;
          EXPECT_EQ(mla::dcp_local_pos(pos, world, interleave), next_local[rank]++)
              << "W " << world << " I " << interleave << " pos " << pos;
        }
        EXPECT_EQ(owners, 1) << "exactly one owner, pos " << pos;
        owners_seen += owners;
      }
      EXPECT_GT(owners_seen, 0);
    }
  }
}

TEST(IndexMath, TopkToSlot) {
  const int32_t row[] = {7, -1, 2};  // logical block -> physical block, B = 4
  EXPECT_EQ(mla::topk_to_slot(0, row, 3, 4), 28);
  EXPECT_EQ(mla::topk_to_slot(3, row, 3, 4), 31);
  EXPECT_EQ(mla::topk_to_slot(9, row, 3, 4), 9);      // block 2 -> phys 2, offset 1
  EXPECT_EQ(mla::topk_to_slot(4, row, 3, 4), kInvalidIndex);   // negative table entry
  EXPECT_EQ(mla::topk_to_slot(12, row, 3, 4), kInvalidIndex);  // logical block 3 >= width 3
  EXPECT_EQ(mla::topk_to_slot(9, row, 2, 4), kInvalidIndex);   // width limits, not the array
  EXPECT_EQ(mla::topk_to_slot(-1, row, 3, 4), kInvalidIndex);
  EXPECT_EQ(mla::topk_to_slot(-5, row, 3, 4), kInvalidIndex);
  EXPECT_EQ(mla::topk_to_slot(int64_t{1} << 40, row, 3, 4), kInvalidIndex);
  EXPECT_EQ(mla::topk_to_slot(0, nullptr, 0, 4), kInvalidIndex);  // width 0 never reads the row
  EXPECT_EQ(mla::topk_to_slot(2, row, 3, 1), 2);    // B = 1: logical 2 -> phys 2
}

TEST(IndexMath, GatherRowOwner) {
  const int32_t ws[] = {0, 3, 3, 5};  // request 1 has zero rows
  const int32_t expected[] = {0, 0, 0, 2, 2, 3, 3, 3};
  for (int64_t row = 0; row < 8; ++row) EXPECT_EQ(mla::gather_row_owner(ws, 4, row), expected[row]) << row;

  const int32_t late[] = {2, 4};  // ws[0] > 0: rows before it have no owner
  EXPECT_EQ(mla::gather_row_owner(late, 2, 0), -1);
  EXPECT_EQ(mla::gather_row_owner(late, 2, 1), -1);
  EXPECT_EQ(mla::gather_row_owner(late, 2, 2), 0);
  EXPECT_EQ(mla::gather_row_owner(late, 2, 4), 1);
  EXPECT_EQ(mla::gather_row_owner(ws, 0, 0), -1);  // no requests
  EXPECT_EQ(mla::gather_row_owner(ws, 4, -1), -1);

  const int32_t all_empty[] = {0, 0, 0};  // every row belongs to the last request
  EXPECT_EQ(mla::gather_row_owner(all_empty, 3, 0), 2);
  EXPECT_EQ(mla::gather_row_owner(all_empty, 3, 100), 2);
}

}  // namespace
