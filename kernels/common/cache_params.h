// Params structs of the cache-path kernels (pack, gather + upconvert, flat-FP8 gather, top-k
// index conversion). One struct per kernel, plain data, every pointer with its shape; strides in
// elements unless the name says bytes. validate() checks every contract that can be checked on
// the host without reading device memory; the kernels stay safe (no out-of-bounds access) for
// every value in device memory that validate() cannot see.
#pragma once

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/status.h"

namespace mla {

// The paged fp8_ds_mla cache: [num_blocks, page_stride_bytes] bytes; entry (block, offset) starts
// at block * page_stride_bytes + offset * 656. page_stride_bytes >= block_size * 656 and a
// multiple of 16 (padded pages allowed).
struct PagedCacheView {
  uint8_t* data = nullptr;       // [num_blocks, page_stride_bytes]
  int64_t num_blocks = 0;
  int32_t block_size = 0;        // B >= 1 tokens per page
  int64_t page_stride_bytes = 0;

  int64_t num_slots() const { return num_blocks * block_size; }
  Status validate(const char* what) const;
};

// docs/semantics.md §1.1. Writes entry slot_mapping[i] from kv_c[i] and k_pe[i]; slot < 0 skips the token; a
// slot >= num_blocks * block_size is also skipped (never written out of bounds).
struct PackParams {
  const bf16_t* kv_c = nullptr;     // [num_tokens, kv_c_row_stride], first 512 used
  int64_t kv_c_row_stride = DsMlaEntry::kNopeDims;
  const bf16_t* k_pe = nullptr;     // [num_tokens, k_pe_row_stride], first 64 used
  int64_t k_pe_row_stride = DsMlaEntry::kRopeDims;
  const int64_t* slot_mapping = nullptr;  // [num_tokens], < 0 = skip
  int64_t num_tokens = 0;           // the length of slot_mapping (inputs may be longer)
  PagedCacheView cache;             // written

  Status validate() const;
};

// docs/semantics.md §2. dst[o] = dequant(entry at position p of request r), r = largest request with
// workspace_starts[r] <= o, p = o - workspace_starts[r] + (seq_starts ? seq_starts[r] : 0).
// Rows whose source is invalid (o < workspace_starts[0], p < 0, p / B >= block_table_width, a
// negative or >= num_blocks physical block) are written as bf16 quiet NaN (0x7FC0), never read
// out of bounds. num_rows == 0 launches nothing.
struct GatherParams {
  PagedCacheView cache;                  // read only (data is not written)
  const int32_t* block_table = nullptr;  // [num_reqs, block_table_stride], first block_table_width used
  int32_t num_reqs = 0;
  int32_t block_table_width = 0;
  int64_t block_table_stride = 0;
  const int32_t* workspace_starts = nullptr;  // [num_reqs], ws[0] == 0, non-decreasing
  const int32_t* seq_starts = nullptr;        // [num_reqs] or nullptr (all 0)
  bf16_t* dst = nullptr;                      // [num_rows, dst_row_stride], first 576 written
  int64_t dst_row_stride = DsMlaEntry::kLatentDims;
  int64_t num_rows = 0;

  Status validate() const;
};

// The gather of the plain "fp8" cache dtype: each token is entry_stride_bytes wide and its first
// 576 bytes are FP8 E4M3 scaled by one global scale. Reading a fp8_ds_mla cache through it
// (entry_stride_bytes = 656) is failure mode 2 of docs/semantics.md §6; the harness uses it only for
// --inject flat-fp8-gather. Same row mapping and invalid-row rule as GatherParams.
struct FlatFp8GatherParams {
  GatherParams base;                 // cache.page_stride_bytes, block table, starts, dst
  int32_t entry_stride_bytes = kFlatFp8CacheBytesPerToken;
  float global_scale = 1.0f;

  Status validate() const;
};

// docs/semantics.md §3. out[t][j] = block_table[req_id[t]][tok / B] * B + tok % B for tok = indices[t][j], or -1
// when invalid. Row count is indices_rows; the launch covers num_tokens rows of req_id, and
// validate() refuses num_tokens != indices_rows (failure mode 1). A req_id outside [0, num_reqs)
// makes its whole row invalid.
struct ConvertParams {
  const int32_t* req_id = nullptr;   // [num_tokens]
  int64_t num_tokens = 0;            // rows of req_id passed (must equal indices_rows)
  const int32_t* indices = nullptr;  // [indices_rows, indices_row_stride], first topk used, -1 padded
  int64_t indices_rows = 0;
  int32_t topk = 0;
  int64_t indices_row_stride = 0;
  const int32_t* block_table = nullptr;  // [num_reqs, block_table_stride], first block_table_width used
  int32_t num_reqs = 0;
  int32_t block_table_width = 0;
  int64_t block_table_stride = 0;
  int32_t block_size = 0;
  int32_t* out = nullptr;            // [indices_rows, out_row_stride], first topk written
  int64_t out_row_stride = 0;
  int32_t* valid_count = nullptr;    // [indices_rows] or nullptr

  // Prefill-workspace mode (optional): for token t with p = prefill_req[t] >= 0,
  // out = prefill_workspace_starts[p] + tok (tok >= 0; not bounded by the block table).
  // p >= num_prefills makes the row invalid.
  const int32_t* prefill_req = nullptr;               // [num_tokens] or nullptr
  const int32_t* prefill_workspace_starts = nullptr;  // [num_prefills]
  int32_t num_prefills = 0;

  // Decode context parallel: this rank keeps only positions it owns and converts their local
  // positions (requires block_size % dcp_interleave == 0). world 1 = off. Does not apply to
  // prefill-workspace rows: the workspace holds the whole gathered sequence.
  int32_t dcp_world_size = 1;
  int32_t dcp_rank = 0;
  int32_t dcp_interleave = 1;

  Status validate() const;
};

}  // namespace mla
