// Scenario -> concrete host arrays (lib/batch/batch.h). No randomness other than the scenario's seed
// through named Rng streams, so the same Scenario always gives the same Batch.
#include "lib/batch/batch.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "lib/batch/rng.h"

namespace mla {

std::vector<int32_t> page_order(PageOrder order, int64_t num_blocks, uint64_t seed) {
  std::vector<int32_t> pages(static_cast<size_t>(num_blocks));
  std::iota(pages.begin(), pages.end(), 0);
  switch (order) {
    case PageOrder::kContiguous: break;
    case PageOrder::kReversed: std::reverse(pages.begin(), pages.end()); break;
    case PageOrder::kShuffled: {
      Rng rng = Rng(seed).fork(kRngStreamPageOrder);
      rng.shuffle(pages);
      break;
    }
  }
  return pages;
}

std::vector<ContextChunk> context_chunks(const std::vector<int32_t>& context_lens, int64_t chunk_rows) {
  std::vector<ContextChunk> out;
  const int64_t max_context = context_lens.empty() ? 0 : *std::max_element(context_lens.begin(), context_lens.end());
  const int64_t num_chunks = max_context <= 0 ? 0 : (max_context + chunk_rows - 1) / chunk_rows;
  for (int64_t i = 0; i < num_chunks; ++i) {
    ContextChunk c;
    c.start = i * chunk_rows;
    for (int32_t context : context_lens) {
      const int64_t end = std::min<int64_t>(c.start + chunk_rows, context);
      c.lens.push_back(static_cast<int32_t>(std::max<int64_t>(0, end - c.start)));
      c.rows += c.lens.back();
    }
    out.push_back(std::move(c));
  }
  return out;
}

ResolvedGather chunk_gather(const std::string& name, int64_t index, const ContextChunk& chunk) {
  ResolvedGather g;
  g.name = name + "[" + std::to_string(index) + "]";
  int64_t rows = 0;
  for (int32_t len : chunk.lens) {
    g.workspace_starts.push_back(static_cast<int32_t>(rows));
    rows += len;
  }
  g.seq_starts = std::vector<int32_t>(chunk.lens.size(), static_cast<int32_t>(chunk.start));
  g.num_rows = chunk.rows;
  return g;
}

Batch materialise(const Scenario& s) {
  if (auto err = validate_scenario(s)) throw std::invalid_argument("materialise: " + err->to_string());

  Batch b;
  const int32_t B = s.model.block_size;
  b.num_reqs = static_cast<int32_t>(s.batch.seq_lens.size());
  b.seq_lens = s.batch.seq_lens;
  b.query_lens = s.batch.query_lens;
  b.num_decodes = decode_requests(s.batch);

  // New tokens, request order.
  for (int32_t r = 0; r < b.num_reqs; ++r) {
    const int32_t context = b.seq_lens[r] - b.query_lens[r];
    b.context_lens.push_back(context);
    for (int32_t i = 0; i < b.query_lens[r]; ++i) {
      b.req_id_per_token.push_back(r);
      b.token_pos.push_back(context + i);
    }
    if (r < b.num_decodes) b.num_decode_tokens += b.query_lens[r];
  }
  b.num_tokens = static_cast<int64_t>(b.req_id_per_token.size());

  // Pool and geometry.
  const int64_t needed = blocks_needed(s.batch, B);
  PagedLayout& l = b.layout;
  l.num_blocks = s.cache.num_blocks > 0 ? s.cache.num_blocks : needed + s.cache.spare_blocks;
  l.block_size = B;
  l.page_stride_bytes = static_cast<int64_t>(B) * DsMlaEntry::kBytes + s.cache.page_padding_bytes;

  // Block table: width = widest request (or pinned row) + extra columns; entries inside the width
  // that hold no page are -1. The stride padding past the width holds a real page (the first of
  // the pool in page order), so a kernel that ignores the width reads wrong data instead of a
  // harmless -1.
  l.num_reqs = b.num_reqs;
  l.block_table_width = static_cast<int32_t>(block_table_width(s));
  l.block_table_stride = int64_t{l.block_table_width} + s.block_table.stride_padding;
  l.block_table.assign(static_cast<size_t>(l.num_reqs * l.block_table_stride), -1);
  // Pages are handed out request-major, logical block order, from the pool in page order; the
  // pages left over are the spares (never referenced, NaN-filled by whoever builds the cache).
  // Pinned rows are copied as written instead.
  const std::vector<int32_t> pages = page_order(s.cache.page_order, l.num_blocks, s.seed);
  size_t next_page = 0;
  for (int32_t r = 0; r < b.num_reqs; ++r) {
    const int64_t blocks = (int64_t{b.seq_lens[r]} + B - 1) / B;
    int32_t* row = &l.block_table[static_cast<size_t>(r * l.block_table_stride)];
    if (s.block_table.rows) {
      const std::vector<int32_t>& pinned = (*s.block_table.rows)[static_cast<size_t>(r)];
      std::copy(pinned.begin(), pinned.end(), row);
    } else {
      for (int64_t c = 0; c < blocks; ++c) row[c] = pages[next_page++];
    }
    // A pool of no page (no cached token, no spare) leaves the padding at -1: there is no page.
    for (int64_t c = l.block_table_width; !pages.empty() && c < l.block_table_stride; ++c) row[c] = pages[0];
  }

  // Slot of every cached position.
  b.slot_offsets.push_back(0);
  for (int32_t r = 0; r < b.num_reqs; ++r) {
    for (int32_t p = 0; p < b.seq_lens[r]; ++p) b.all_slots.push_back(l.slot(r, p));
    b.slot_offsets.push_back(static_cast<int64_t>(b.all_slots.size()));
  }

  // Gather cases, file order; a chunked case expands in place.
  for (const GatherCase& g : s.gathers) {
    if (g.chunked_context_rows) {
      const std::vector<ContextChunk> chunks = context_chunks(b.context_lens, *g.chunked_context_rows);
      for (size_t i = 0; i < chunks.size(); ++i) b.gathers.push_back(chunk_gather(g.name, static_cast<int64_t>(i), chunks[i]));
    } else {
      b.gathers.push_back(ResolvedGather{g.name, g.workspace_starts, g.seq_starts, g.num_rows});
    }
  }
  return b;
}

}  // namespace mla
