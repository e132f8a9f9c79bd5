// Host gathers (docs/semantics.md §2): output row -> request -> position -> block table -> cache entry, then
// either the fp8_ds_mla dequantization or the flat-FP8 misreading (failure mode 2, on purpose).
// Rows with an invalid source are written as bf16 quiet NaN; no byte outside the cache, the
// block table or the starts is read for any values they hold.
#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/fp8_e4m3.h"
#include "kernels/common/index_math.h"
#include "kernels/host/host_kernels.h"

namespace mla::host {
namespace {

float load_f32_le(const uint8_t* src) {
  uint32_t u = 0;
  for (int i = 0; i < 4; ++i) u |= static_cast<uint32_t>(src[i]) << (8 * i);
  return f32_from_bits(u);
}

void fill_invalid_row(bf16_t* row) {
  for (int e = 0; e < DsMlaEntry::kLatentDims; ++e) row[e] = kBf16QuietNaN;
}

// The pre-fix reader: all 576 bytes taken as E4M3 with one global scale.
void flat_fp8_entry(const uint8_t* entry, float global_scale, bf16_t* row) {
  for (int e = 0; e < DsMlaEntry::kLatentDims; ++e) {
    row[e] = f32_to_bf16_rne(e4m3_to_f32(entry[e]) * global_scale);
  }
}

}  // namespace

// docs/semantics.md §1.2: element e < 512 is bf16_rne(f32(e4m3) * scale[e / 128]), one fp32 multiply; the
// RoPE elements are the stored bf16 bits.
void dequant_entry(const uint8_t* entry, bf16_t* row) {
  for (int t = 0; t < DsMlaEntry::kNumTiles; ++t) {
    const float scale = load_f32_le(entry + DsMlaEntry::kScaleOffset + 4 * t);
    for (int i = 0; i < DsMlaEntry::kTileDims; ++i) {
      const int e = t * DsMlaEntry::kTileDims + i;
      row[e] = f32_to_bf16_rne(e4m3_to_f32(entry[DsMlaEntry::kNopeOffset + e]) * scale);
    }
  }
  const uint8_t* rope = entry + DsMlaEntry::kRopeOffset;
  for (int i = 0; i < DsMlaEntry::kRopeDims; ++i) {
    row[DsMlaEntry::kNopeDims + i] = static_cast<bf16_t>(rope[2 * i] | (rope[2 * i + 1] << 8));
  }
}

int64_t gather_source_offset(const GatherParams& p, int64_t row, int64_t entry_stride_bytes) {
  const int32_t r = gather_row_owner(p.workspace_starts, p.num_reqs, row);
  if (r < 0) return -1;  // row < workspace_starts[0]
  const int64_t pos = row - p.workspace_starts[r] + (p.seq_starts ? p.seq_starts[r] : 0);
  if (pos < 0) return -1;
  const int32_t block_size = p.cache.block_size;
  const int64_t logical = pos / block_size;
  if (logical >= p.block_table_width) return -1;
  const int32_t phys = p.block_table[r * p.block_table_stride + logical];
  if (phys < 0 || phys >= p.cache.num_blocks) return -1;
  return phys * p.cache.page_stride_bytes + (pos % block_size) * entry_stride_bytes;
}

void gather(const GatherParams& p) {
  for (int64_t o = 0; o < p.num_rows; ++o) {
    bf16_t* row = p.dst + o * p.dst_row_stride;
    const int64_t src = gather_source_offset(p, o, DsMlaEntry::kBytes);
    if (src < 0) {
      fill_invalid_row(row);
    } else {
      dequant_entry(p.cache.data + src, row);
    }
  }
}

void gather_flat_fp8(const FlatFp8GatherParams& p) {
  const GatherParams& g = p.base;
  for (int64_t o = 0; o < g.num_rows; ++o) {
    bf16_t* row = g.dst + o * g.dst_row_stride;
    const int64_t src = gather_source_offset(g, o, p.entry_stride_bytes);
    if (src < 0) {
      fill_invalid_row(row);
    } else {
      flat_fp8_entry(g.cache.data + src, p.global_scale, row);
    }
  }
}

}  // namespace mla::host
