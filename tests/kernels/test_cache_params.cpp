// validate() of every cache-path params struct: the valid baseline passes, and each contract
// violation is refused with a message naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/cache_params.h"

namespace {

using mla::DsMlaEntry;
using mla::Status;

// Checks that the status failed and its message contains every fragment.
::testing::AssertionResult FailsWith(const Status& s, std::initializer_list<const char*> fragments) {
  if (s.ok()) return ::testing::AssertionFailure() << "validate() accepted invalid params";
  for (const char* f : fragments) {
    if (s.message().find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "message \"" << s.message() << "\" lacks \"" << f << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// Backing storage for the pointers; validate() never reads it.
struct Storage {
  std::vector<uint8_t> cache = std::vector<uint8_t>(4 * 2 * 656);
  std::vector<mla::bf16_t> kv_c = std::vector<mla::bf16_t>(3 * 512), k_pe = std::vector<mla::bf16_t>(3 * 64),
                           dst = std::vector<mla::bf16_t>(5 * 576);
  std::vector<int64_t> slots = std::vector<int64_t>(3);
  std::vector<int32_t> ints = std::vector<int32_t>(64);
};

mla::PagedCacheView valid_cache(Storage& s) {
  mla::PagedCacheView c;
  c.data = s.cache.data();
  c.num_blocks = 4;
  c.block_size = 2;
  c.page_stride_bytes = 2 * 656;
  return c;
}

mla::PackParams valid_pack(Storage& s) {
  mla::PackParams p;
  p.kv_c = s.kv_c.data();
  p.k_pe = s.k_pe.data();
  p.slot_mapping = s.slots.data();
  p.num_tokens = 3;
  p.cache = valid_cache(s);
  return p;
}

mla::GatherParams valid_gather(Storage& s) {
  mla::GatherParams g;
  g.cache = valid_cache(s);
  g.block_table = s.ints.data();
  g.num_reqs = 2;
  g.block_table_width = 3;
  g.block_table_stride = 4;
  g.workspace_starts = s.ints.data() + 8;
  g.dst = s.dst.data();
  g.num_rows = 5;
  return g;
}

mla::ConvertParams valid_convert(Storage& s) {
  mla::ConvertParams c;
  c.req_id = s.ints.data();
  c.num_tokens = 2;
  c.indices = s.ints.data() + 4;
  c.indices_rows = 2;
  c.topk = 4;
  c.indices_row_stride = 4;
  c.block_table = s.ints.data() + 16;
  c.num_reqs = 2;
  c.block_table_width = 3;
  c.block_table_stride = 3;
  c.block_size = 4;
  c.out = s.ints.data() + 32;
  c.out_row_stride = 4;
  return c;
}

TEST(CacheParams, ValidBaselinesPass) {
  Storage s;
  EXPECT_TRUE(valid_cache(s).validate("cache").ok());
  EXPECT_TRUE(valid_pack(s).validate().ok()) << valid_pack(s).validate().message();
  EXPECT_TRUE(valid_gather(s).validate().ok()) << valid_gather(s).validate().message();
  mla::FlatFp8GatherParams f;
  f.base = valid_gather(s);
  EXPECT_TRUE(f.validate().ok()) << f.validate().message();
  EXPECT_TRUE(valid_convert(s).validate().ok()) << valid_convert(s).validate().message();
}

TEST(CacheParams, PagedCacheView) {
  Storage s;
  auto c = valid_cache(s);
  c.num_blocks = -1;
  EXPECT_TRUE(FailsWith(c.validate("X.cache"), {"X.cache", "num_blocks", "-1"}));
  c = valid_cache(s);
  c.block_size = 0;
  EXPECT_TRUE(FailsWith(c.validate("X.cache"), {"block_size", ">= 1"}));
  c = valid_cache(s);
  c.page_stride_bytes = 2 * 576;  // sized by the head size (docs/semantics.md §6.5)
  EXPECT_TRUE(FailsWith(c.validate("X.cache"), {"page_stride_bytes", "1152", "1312"}));
  c = valid_cache(s);
  c.page_stride_bytes = 2 * 656 + 8;
  EXPECT_TRUE(FailsWith(c.validate("X.cache"), {"page_stride_bytes", "multiple of 16"}));
  c = valid_cache(s);
  c.page_stride_bytes = 2 * 656 + 16;  // padded pages are fine
  EXPECT_TRUE(c.validate("X.cache").ok());
  c.num_blocks = INT64_MAX / 1000;
  EXPECT_TRUE(FailsWith(c.validate("X.cache"), {"overflows"}));
  c = valid_cache(s);
  c.data = nullptr;
  EXPECT_TRUE(FailsWith(c.validate("X.cache"), {"data", "null"}));
  c.num_blocks = 0;  // an empty pool needs no memory
  EXPECT_TRUE(c.validate("X.cache").ok());
}

TEST(CacheParams, Pack) {
  Storage s;
  auto p = valid_pack(s);
  p.num_tokens = -2;
  EXPECT_TRUE(FailsWith(p.validate(), {"PackParams", "num_tokens", "-2"}));
  p = valid_pack(s);
  p.kv_c_row_stride = 511;
  EXPECT_TRUE(FailsWith(p.validate(), {"kv_c_row_stride", "511", "512"}));
  p = valid_pack(s);
  p.k_pe_row_stride = 32;
  EXPECT_TRUE(FailsWith(p.validate(), {"k_pe_row_stride", "32", "64"}));
  p = valid_pack(s);
  p.kv_c = nullptr;
  EXPECT_TRUE(FailsWith(p.validate(), {"kv_c is null"}));
  p = valid_pack(s);
  p.k_pe = nullptr;
  EXPECT_TRUE(FailsWith(p.validate(), {"k_pe is null"}));
  p = valid_pack(s);
  p.slot_mapping = nullptr;
  EXPECT_TRUE(FailsWith(p.validate(), {"slot_mapping is null"}));
  p.kv_c = nullptr;
  p.k_pe = nullptr;
  p.num_tokens = 0;  // nothing to read
  EXPECT_TRUE(p.validate().ok());
  p = valid_pack(s);
  p.cache.block_size = 0;
  EXPECT_TRUE(FailsWith(p.validate(), {"PackParams.cache", "block_size"}));
}

TEST(CacheParams, Gather) {
  Storage s;
  auto g = valid_gather(s);
  g.cache.page_stride_bytes = 100;
  EXPECT_TRUE(FailsWith(g.validate(), {"GatherParams.cache", "page_stride_bytes"}));
  g = valid_gather(s);
  g.num_rows = -1;
  EXPECT_TRUE(FailsWith(g.validate(), {"GatherParams", "num_rows", "-1"}));
  g = valid_gather(s);
  g.num_reqs = -1;
  EXPECT_TRUE(FailsWith(g.validate(), {"num_reqs", "-1"}));
  g = valid_gather(s);
  g.block_table_width = -3;
  EXPECT_TRUE(FailsWith(g.validate(), {"block_table_width", "-3"}));
  g = valid_gather(s);
  g.num_reqs = 0;
  EXPECT_TRUE(FailsWith(g.validate(), {"num_rows is 5", "num_reqs is 0"}));
  g = valid_gather(s);
  g.block_table_stride = 2;
  EXPECT_TRUE(FailsWith(g.validate(), {"block_table_stride", "block_table_width"}));
  g = valid_gather(s);
  g.dst_row_stride = 512;
  EXPECT_TRUE(FailsWith(g.validate(), {"dst_row_stride", "576"}));
  g = valid_gather(s);
  g.block_table = nullptr;
  EXPECT_TRUE(FailsWith(g.validate(), {"block_table is null"}));
  g.block_table_width = 0;  // an empty table is never read (every row invalid)
  EXPECT_TRUE(g.validate().ok());
  g = valid_gather(s);
  g.workspace_starts = nullptr;
  EXPECT_TRUE(FailsWith(g.validate(), {"workspace_starts is null"}));
  g = valid_gather(s);
  g.dst = nullptr;
  EXPECT_TRUE(FailsWith(g.validate(), {"dst is null"}));
  g.num_rows = 0;  // zero rows: nothing is written
  EXPECT_TRUE(g.validate().ok());
  g = valid_gather(s);
  g.seq_starts = nullptr;  // optional
  EXPECT_TRUE(g.validate().ok());
}

TEST(CacheParams, FlatFp8Gather) {
  Storage s;
  mla::FlatFp8GatherParams f;
  f.base = valid_gather(s);
  f.entry_stride_bytes = 512;
  EXPECT_TRUE(FailsWith(f.validate(), {"FlatFp8GatherParams", "entry_stride_bytes", "512", "576"}));
  f.entry_stride_bytes = 656;  // reading the fp8_ds_mla cache flat (the injected bug)
  EXPECT_TRUE(f.validate().ok());
  f.base.cache.page_stride_bytes = 2 * 576;  // a genuine flat cache of 576-byte entries
  f.entry_stride_bytes = 576;
  EXPECT_TRUE(f.validate().ok()) << f.validate().message();
  f.entry_stride_bytes = 656;  // pages too small for that entry stride
  EXPECT_TRUE(FailsWith(f.validate(), {"FlatFp8GatherParams.base.cache", "page_stride_bytes"}));
  f.base = valid_gather(s);
  f.global_scale = NAN;
  EXPECT_TRUE(FailsWith(f.validate(), {"global_scale", "finite"}));
  f.global_scale = 1.0f;
  f.base.dst = nullptr;
  EXPECT_TRUE(FailsWith(f.validate(), {"FlatFp8GatherParams.base", "dst is null"}));
}

TEST(CacheParams, ConvertRefusesReqIdLongerThanIndices) {
  Storage s;
  auto c = valid_convert(s);
  c.num_tokens = 12;
  c.indices_rows = 4;
  const Status st = c.validate();
  EXPECT_TRUE(FailsWith(st, {"ConvertParams", "req_id has 12 rows", "indices has 4 rows",
                             "req_id length vs indices rows", "out-of-bounds",
                             "req_id must be sliced to the rows of indices"}));
}

TEST(CacheParams, Convert) {
  Storage s;
  auto c = valid_convert(s);
  c.num_tokens = -1;
  EXPECT_TRUE(FailsWith(c.validate(), {"num_tokens", "-1"}));
  c = valid_convert(s);
  c.indices_rows = -1;
  c.num_tokens = -1;
  EXPECT_TRUE(FailsWith(c.validate(), {"num_tokens", "-1"}));
  c = valid_convert(s);
  c.topk = 0;
  EXPECT_TRUE(FailsWith(c.validate(), {"topk is 0"}));
  c = valid_convert(s);
  c.indices_row_stride = 3;
  EXPECT_TRUE(FailsWith(c.validate(), {"indices_row_stride", "topk"}));
  c = valid_convert(s);
  c.out_row_stride = 3;
  EXPECT_TRUE(FailsWith(c.validate(), {"out_row_stride", "topk"}));
  c = valid_convert(s);
  c.num_reqs = -1;
  EXPECT_TRUE(FailsWith(c.validate(), {"num_reqs", "-1"}));
  c = valid_convert(s);
  c.block_table_width = -1;
  EXPECT_TRUE(FailsWith(c.validate(), {"block_table_width", "-1"}));
  c = valid_convert(s);
  c.block_table_stride = 2;
  EXPECT_TRUE(FailsWith(c.validate(), {"block_table_stride"}));
  c = valid_convert(s);
  c.block_size = 0;
  EXPECT_TRUE(FailsWith(c.validate(), {"block_size is 0"}));
  c = valid_convert(s);
  c.req_id = nullptr;
  EXPECT_TRUE(FailsWith(c.validate(), {"req_id is null"}));
  c = valid_convert(s);
  c.indices = nullptr;
  EXPECT_TRUE(FailsWith(c.validate(), {"indices is null"}));
  c = valid_convert(s);
  c.out = nullptr;
  EXPECT_TRUE(FailsWith(c.validate(), {"out is null"}));
  c = valid_convert(s);
  c.block_table = nullptr;
  EXPECT_TRUE(FailsWith(c.validate(), {"block_table is null"}));
  c = valid_convert(s);
  c.req_id = c.indices = nullptr;
  c.out = nullptr;
  c.num_tokens = c.indices_rows = 0;  // no rows: nothing read or written
  EXPECT_TRUE(c.validate().ok());
}

TEST(CacheParams, ConvertPrefillWorkspacePointers) {
  Storage s;
  auto c = valid_convert(s);
  c.prefill_workspace_starts = s.ints.data() + 48;
  c.num_prefills = 1;
  EXPECT_TRUE(FailsWith(c.validate(), {"prefill_workspace_starts is set but prefill_req is null"}));
  c = valid_convert(s);
  c.num_prefills = 2;
  EXPECT_TRUE(FailsWith(c.validate(), {"num_prefills is 2", "prefill_req is null"}));
  c = valid_convert(s);
  c.prefill_req = s.ints.data() + 40;
  c.num_prefills = 1;
  EXPECT_TRUE(FailsWith(c.validate(), {"prefill_req is set", "prefill_workspace_starts is null"}));
  c.num_prefills = -1;
  EXPECT_TRUE(FailsWith(c.validate(), {"num_prefills", "-1"}));
  c.num_prefills = 0;  // no prefills to look up: the starts may be absent
  EXPECT_TRUE(c.validate().ok());
  c.prefill_workspace_starts = s.ints.data() + 48;
  c.num_prefills = 1;
  EXPECT_TRUE(c.validate().ok());
}

TEST(CacheParams, ConvertDcp) {
  Storage s;
  auto c = valid_convert(s);
  c.dcp_world_size = 0;
  EXPECT_TRUE(FailsWith(c.validate(), {"dcp_world_size is 0"}));
  c = valid_convert(s);
  c.dcp_world_size = 2;
  c.dcp_rank = 2;
  EXPECT_TRUE(FailsWith(c.validate(), {"dcp_rank is 2"}));
  c.dcp_rank = -1;
  EXPECT_TRUE(FailsWith(c.validate(), {"dcp_rank is -1"}));
  c.dcp_rank = 1;
  c.dcp_interleave = 0;
  EXPECT_TRUE(FailsWith(c.validate(), {"dcp_interleave is 0"}));
  c.dcp_interleave = 3;  // block_size 4
  EXPECT_TRUE(FailsWith(c.validate(), {"block_size 4", "dcp_interleave 3"}));
  c.dcp_interleave = 2;
  EXPECT_TRUE(c.validate().ok());
  c.dcp_world_size = 1;  // off: the interleave does not have to divide the block
  c.dcp_rank = 0;
  c.dcp_interleave = 3;
  EXPECT_TRUE(c.validate().ok());
}

}  // namespace
