#include "lib/batch/batch_spec.h"

#include <algorithm>

#include "lib/batch/rng.h"

namespace mla {

int64_t blocks_needed(const BatchSpec& b, int32_t block_size) {
  int64_t total = 0;
  for (int32_t len : b.seq_lens) total += (static_cast<int64_t>(len) + block_size - 1) / block_size;
  return total;
}

BatchSpec generate_batch(const BatchGenerator& g, uint64_t seed) {
  // Draw order (part of the format): number of requests, number of decodes, then per request
  // in batch order its seq_len, and for a prefill its query_len.
  Rng rng = Rng(seed).fork(kRngStreamBatchGeneration);
  BatchSpec b;
  b.decode_threshold = g.decode_threshold;
  const int64_t num_requests = rng.uniform_int(g.num_requests_min, g.num_requests_max);
  const int64_t num_decodes = rng.uniform_int(std::min<int64_t>(g.num_decodes_min, num_requests),
                                              std::min<int64_t>(g.num_decodes_max, num_requests));
  for (int64_t r = 0; r < num_requests; ++r) {
    const int64_t seq_len = rng.uniform_int(g.seq_len_min, g.seq_len_max);
    int64_t query_len;
    if (r < num_decodes) {
      query_len = g.decode_query_len;  // seq_len_min >= decode_query_len is a load rule
    } else {
      query_len = rng.uniform_int(std::min<int64_t>(g.prefill_query_len_min, seq_len),
                                  std::min<int64_t>(g.prefill_query_len_max, seq_len));
    }
    b.seq_lens.push_back(static_cast<int32_t>(seq_len));
    b.query_lens.push_back(static_cast<int32_t>(query_len));
  }
  return b;
}

int32_t count_decodes(const std::vector<int32_t>& query_lens, int32_t decode_threshold) {
  if (query_lens.empty()) return 0;
  const int32_t first = query_lens[0];
  if (first < 1 || first > decode_threshold) return 0;
  int32_t n = 0;
  while (n < static_cast<int32_t>(query_lens.size()) && query_lens[n] == first) ++n;
  return n;
}

int32_t decode_requests(const BatchSpec& b) {
  return b.num_decodes ? *b.num_decodes : count_decodes(b.query_lens, b.decode_threshold);
}

}  // namespace mla
