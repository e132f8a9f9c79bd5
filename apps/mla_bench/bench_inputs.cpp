#include "apps/mla_bench/bench_inputs.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

namespace mla::bench {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Approximately normal: the sum of four 16-bit uniforms (Irwin-Hall, n = 4) rescaled to unit
// variance, from one 64-bit draw. Bounded to +-3.46 sigma; plenty for bandwidth inputs and
// identical on every machine (integer arithmetic and exactly rounded float operations only).
float fast_normal(Rng& rng, float sigma) {
  const uint64_t u = rng.next_u64();
  const uint32_t sum = static_cast<uint32_t>(u & 0xFFFF) + static_cast<uint32_t>((u >> 16) & 0xFFFF) +
                       static_cast<uint32_t>((u >> 32) & 0xFFFF) + static_cast<uint32_t>(u >> 48);
  // Each uniform in [0, 1) is x / 65536: mean 2, variance 4 / 12 for the sum.
  const float centered = static_cast<float>(sum) * (1.0f / 65536.0f) - 2.0f;
  return centered * 1.7320508f * sigma;
}

}  // namespace

std::vector<int64_t> split_lengths(int64_t total, int64_t parts, Rng& rng) {
  parts = std::max<int64_t>(1, std::min(parts, total));
  std::vector<int64_t> weights(static_cast<size_t>(parts));
  for (auto& w : weights) w = rng.uniform_int(50, 150);
  const int64_t weight_sum = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  std::vector<int64_t> lengths(static_cast<size_t>(parts));
  int64_t prefix = 0, prev_bound = 0;
  for (int64_t i = 0; i < parts; ++i) {
    prefix += weights[static_cast<size_t>(i)];
    const int64_t bound = total * prefix / weight_sum;
    lengths[static_cast<size_t>(i)] = bound - prev_bound;
    prev_bound = bound;
  }
  if (std::any_of(lengths.begin(), lengths.end(), [](int64_t l) { return l <= 0; })) {
    for (int64_t i = 0; i < parts; ++i) {
      lengths[static_cast<size_t>(i)] = total / parts + (i < total % parts ? 1 : 0);
    }
  }
  return lengths;
}

PagedLayout make_layout(const std::vector<int64_t>& seq_lens, int32_t block_size, int64_t spare_blocks,
                        int32_t extra_columns, int32_t stride_padding, Rng& rng) {
  PagedLayout l;
  l.block_size = block_size;
  l.num_reqs = static_cast<int32_t>(seq_lens.size());
  l.seq_lens = seq_lens;
  int64_t pages = 0, widest = 0;
  for (int64_t len : seq_lens) {
    pages += ceil_div(len, block_size);
    widest = std::max(widest, ceil_div(len, block_size));
  }
  l.num_blocks = pages + spare_blocks;
  l.bt_width = static_cast<int32_t>(widest + extra_columns);
  l.bt_stride = l.bt_width + stride_padding;
  l.block_table.assign(static_cast<size_t>(l.num_reqs * l.bt_stride), -1);
  std::vector<int32_t> pool(static_cast<size_t>(l.num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  rng.shuffle(pool);
  size_t next = 0;
  for (int32_t r = 0; r < l.num_reqs; ++r) {
    const int64_t n = ceil_div(seq_lens[static_cast<size_t>(r)], block_size);
    for (int64_t p = 0; p < n; ++p) l.block_table[static_cast<size_t>(r * l.bt_stride + p)] = pool[next++];
  }
  return l;
}

std::vector<bf16_t> make_latent_rows(int64_t rows, Rng& rng) {
  std::vector<bf16_t> v(static_cast<size_t>(rows * kKvCols));
  for (int64_t r = 0; r < rows; ++r) {
    bf16_t* row = &v[static_cast<size_t>(r * kKvCols)];
    for (int c = 0; c < DsMlaEntry::kNopeDims; ++c) row[c] = f32_to_bf16_rne(fast_normal(rng, 0.1f));
    for (int c = DsMlaEntry::kNopeDims; c < kKvCols; ++c) row[c] = f32_to_bf16_rne(fast_normal(rng, 0.5f));
  }
  return v;
}

PackInputs make_pack_inputs(int64_t num_tokens, int32_t block_size, const std::vector<bf16_t>& pool,
                            Rng& rng) {
  PackInputs in;
  in.num_tokens = num_tokens;
  in.kv_rows = num_tokens;
  const int64_t reqs = std::clamp<int64_t>(num_tokens / 1024, 1, 1024);
  const std::vector<int64_t> new_tokens = split_lengths(num_tokens, reqs, rng);
  std::vector<int64_t> context(new_tokens.size()), seq_lens(new_tokens.size());
  for (size_t r = 0; r < new_tokens.size(); ++r) {
    context[r] = rng.uniform_int(0, 4 * static_cast<int64_t>(block_size) - 1);
    seq_lens[r] = context[r] + new_tokens[r];
  }
  in.layout = make_layout(seq_lens, block_size, /*spare_blocks=*/4, /*extra_columns=*/1,
                          /*stride_padding=*/0, rng);
  in.page_stride_bytes = static_cast<int64_t>(block_size) * DsMlaEntry::kBytes;
  in.slot_mapping.reserve(static_cast<size_t>(num_tokens));
  for (size_t r = 0; r < new_tokens.size(); ++r) {
    for (int64_t j = 0; j < new_tokens[r]; ++j) {
      in.slot_mapping.push_back(in.layout.slot(static_cast<int32_t>(r), context[r] + j));
    }
  }
  const int64_t pool_rows = static_cast<int64_t>(pool.size()) / kKvCols;
  in.kv.resize(static_cast<size_t>(num_tokens * kKvCols));
  for (int64_t t = 0; t < num_tokens; ++t) {
    std::copy_n(&pool[static_cast<size_t>((t % pool_rows) * kKvCols)], kKvCols,
                &in.kv[static_cast<size_t>(t * kKvCols)]);
  }
  return in;
}

GatherInputs make_gather_inputs(int64_t num_rows, int32_t block_size, bool with_seq_starts, Rng& rng) {
  GatherInputs in;
  in.num_rows = num_rows;
  const int64_t reqs = std::clamp<int64_t>(num_rows / 2048, 1, 512);
  const std::vector<int64_t> rows = split_lengths(num_rows, reqs, rng);
  std::vector<int64_t> seq_lens(rows.size());
  int64_t start = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    in.workspace_starts.push_back(static_cast<int32_t>(start));
    start += rows[r];
    int64_t s = 0;
    if (with_seq_starts) {
      s = rng.uniform_int(1, 8 * static_cast<int64_t>(block_size) - 1);
      if (block_size > 1 && s % block_size == 0) s += 1;
      in.seq_starts.push_back(static_cast<int32_t>(s));
    }
    seq_lens[r] = s + rows[r];
  }
  in.layout = make_layout(seq_lens, block_size, /*spare_blocks=*/4, /*extra_columns=*/1,
                          /*stride_padding=*/0, rng);
  in.page_stride_bytes = static_cast<int64_t>(block_size) * DsMlaEntry::kBytes;
  return in;
}

ConvertInputs make_convert_inputs(int64_t rows, int32_t topk, int32_t block_size, Rng& rng) {
  ConvertInputs in;
  in.rows = rows;
  in.topk = topk;
  const int64_t reqs = std::clamp<int64_t>(rows, 1, 1024);
  const std::vector<int64_t> rows_per_req = split_lengths(rows, reqs, rng);
  const int64_t min_seq = std::max<int64_t>(topk, 1024);
  std::vector<int64_t> seq_lens(rows_per_req.size());
  for (auto& s : seq_lens) s = rng.uniform_int(min_seq, 8 * min_seq);
  in.layout = make_layout(seq_lens, block_size, /*spare_blocks=*/4, /*extra_columns=*/1,
                          /*stride_padding=*/0, rng);
  in.req_id.reserve(static_cast<size_t>(rows));
  in.indices.resize(static_cast<size_t>(rows * topk));
  // Distinct positions per row: a partial Fisher-Yates shuffle over 0..seq_len-1, undone after
  // each row so the scratch array stays the identity (O(topk) per row).
  std::vector<int32_t> scratch(static_cast<size_t>(*std::max_element(seq_lens.begin(), seq_lens.end())));
  std::iota(scratch.begin(), scratch.end(), 0);
  std::vector<std::pair<int64_t, int64_t>> swaps;
  int64_t row = 0;
  for (size_t r = 0; r < rows_per_req.size(); ++r) {
    const int64_t n = seq_lens[r];
    for (int64_t i = 0; i < rows_per_req[r]; ++i, ++row) {
      in.req_id.push_back(static_cast<int32_t>(r));
      int32_t* out = &in.indices[static_cast<size_t>(row * topk)];
      swaps.clear();
      for (int32_t j = 0; j < topk; ++j) {
        if (j >= n) {
          out[j] = -1;
          continue;
        }
        const int64_t pick = j + static_cast<int64_t>(rng.below(static_cast<uint64_t>(n - j)));
        std::swap(scratch[static_cast<size_t>(j)], scratch[static_cast<size_t>(pick)]);
        swaps.emplace_back(j, pick);
        out[j] = scratch[static_cast<size_t>(j)];
      }
      for (auto it = swaps.rbegin(); it != swaps.rend(); ++it) {
        std::swap(scratch[static_cast<size_t>(it->first)], scratch[static_cast<size_t>(it->second)]);
      }
    }
  }
  return in;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    backend_ = std::exchange(o.backend_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Status DeviceBuffer::allocate(Backend& backend, std::size_t bytes) {
  reset();
  backend_ = &backend;
  bytes_ = bytes;
  // A zero-byte request still gets a valid pointer (kernels may be handed an empty buffer).
  Status st = backend.allocate(std::max<std::size_t>(bytes, 256), &ptr_);
  if (!st.ok()) {
    ptr_ = nullptr;
    bytes_ = 0;
    return Status::error("allocating " + std::to_string(bytes) + " bytes: " + st.message());
  }
  return Status();
}

void DeviceBuffer::reset() {
  if (ptr_ && backend_) backend_->release(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace mla::bench

namespace mla::bench {

Status pack_rows(Backend& backend, const std::vector<bf16_t>& rows, const std::vector<int64_t>& slots,
                 int32_t block_size, int64_t page_stride, std::vector<uint8_t>* cache) {
  DeviceBuffer d_rows, d_slots, d_cache;
  MLA_RETURN_IF_ERROR(d_rows.upload(backend, rows));
  MLA_RETURN_IF_ERROR(d_slots.upload(backend, slots));
  MLA_RETURN_IF_ERROR(d_cache.upload(backend, *cache));
  PackParams p;
  p.kv_c = d_rows.as<bf16_t>();
  p.kv_c_row_stride = kKvCols;
  p.k_pe = d_rows.as<bf16_t>() + DsMlaEntry::kNopeDims;
  p.k_pe_row_stride = kKvCols;
  p.slot_mapping = d_slots.as<int64_t>();
  p.num_tokens = static_cast<int64_t>(slots.size());
  p.cache = {d_cache.as<uint8_t>(), static_cast<int64_t>(cache->size()) / page_stride, block_size, page_stride};
  MLA_RETURN_IF_ERROR(backend.pack(p));
  MLA_RETURN_IF_ERROR(backend.synchronize());
  return d_cache.download(cache);
}

Status pack_entries(Backend& backend, const std::vector<bf16_t>& rows, std::vector<uint8_t>* entries) {
  const int64_t n = static_cast<int64_t>(rows.size()) / kKvCols;
  std::vector<int64_t> slots(static_cast<size_t>(n));
  std::iota(slots.begin(), slots.end(), int64_t{0});
  *entries = std::vector<uint8_t>(static_cast<size_t>(n) * DsMlaEntry::kBytes, kUnusedByte);
  return pack_rows(backend, rows, slots, /*block_size=*/1, DsMlaEntry::kBytes, entries);
}

Status pack_input_entries(Backend& backend, HarnessBackend& harness, const std::vector<bf16_t>& rows,
                          std::vector<uint8_t>* entries) {
  const Status own = pack_entries(backend, rows, entries);
  if (!own.is_unsupported()) return own;
  Backend* base = nullptr;
  if (const Status st = harness.get(&base); !st.ok()) return Status::error(own.message() + "; " + st.message());
  return pack_entries(*base, rows, entries);
}

std::vector<uint8_t> assemble_cache(const PagedLayout& layout, int64_t page_stride_bytes,
                                    const std::vector<uint8_t>& entries) {
  std::vector<uint8_t> cache(static_cast<size_t>(layout.num_blocks * page_stride_bytes), kUnusedByte);
  const size_t num_entries = entries.size() / DsMlaEntry::kBytes;
  size_t next = 0;
  for (int32_t r = 0; r < layout.num_reqs; ++r) {
    for (int64_t pos = 0; pos < layout.seq_lens[static_cast<size_t>(r)]; ++pos) {
      const int64_t slot = layout.slot(r, pos);
      const int64_t offset =
          (slot / layout.block_size) * page_stride_bytes + (slot % layout.block_size) * DsMlaEntry::kBytes;
      std::memcpy(&cache[static_cast<size_t>(offset)], &entries[next * DsMlaEntry::kBytes], DsMlaEntry::kBytes);
      next = (next + 1) % num_entries;
    }
  }
  return cache;
}

}  // namespace mla::bench
