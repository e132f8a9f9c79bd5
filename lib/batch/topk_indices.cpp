#include "lib/batch/topk_indices.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <unordered_set>
#include <vector>

namespace mla {

void pick_visible_topk(Rng& rng, int64_t pos, int32_t k, int32_t* row) {
  const int64_t visible = pos + 1;
  if (visible <= k) {
    std::vector<int32_t> all(static_cast<size_t>(visible));
    for (int64_t i = 0; i < visible; ++i) all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    rng.shuffle(all);
    for (int32_t j = 0; j < k; ++j) row[j] = j < visible ? all[static_cast<size_t>(j)] : -1;
    return;
  }
  std::unordered_set<int64_t> chosen;
  int32_t j = 0;
  for (int64_t i = visible - k; i < visible; ++i) {
    const int64_t t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    const int64_t pick = chosen.count(t) ? i : t;
    chosen.insert(pick);
    row[j++] = static_cast<int32_t>(pick);
  }
}

void apply_invalid_mix(Rng& rng, const InvalidMix& mix, const Batch& b, int32_t req, int32_t* row, int32_t k) {
  const int32_t B = b.layout.block_size;
  const int32_t width = b.layout.block_table_width;
  const bool in_batch = req >= 0 && req < b.num_reqs;
  const int32_t needed = in_batch ? static_cast<int32_t>((b.seq_lens[static_cast<size_t>(req)] + B - 1) / B) : width;
  for (int32_t j = 0; j < k; ++j) {
    double u = rng.uniform01();
    if ((u -= mix.minus_one) < 0) {
      row[j] = -1;
    } else if ((u -= mix.int_min) < 0) {
      row[j] = INT_MIN;
    } else if ((u -= mix.large_positive) < 0) {
      row[j] = INT_MAX - static_cast<int32_t>(rng.below(1000));
    } else if ((u -= mix.past_table) < 0) {
      row[j] = static_cast<int32_t>(static_cast<int64_t>(width) * B + static_cast<int64_t>(rng.below(4u * B)));
    } else if ((u -= mix.negative_block) < 0) {
      // A logical block inside the table width whose entry is -1 (columns past the request's pages).
      row[j] = needed < width ? static_cast<int32_t>((needed + static_cast<int32_t>(rng.below(width - needed))) * B +
                                                     static_cast<int32_t>(rng.below(B)))
                              : -1;
    }
  }
}

std::vector<int32_t> pinned_rows(const IndexRows& rows, int32_t k) {
  std::vector<int32_t> out(rows.size() * static_cast<size_t>(k), -1);
  for (size_t t = 0; t < rows.size(); ++t) std::copy(rows[t].begin(), rows[t].end(), out.begin() + static_cast<std::ptrdiff_t>(t * k));
  return out;
}

}  // namespace mla
