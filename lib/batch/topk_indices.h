// Top-k index generation: the request-local positions a causal indexer could pick for a token,
// and the adversarial invalid entries written over them (docs/semantics.md §3, 6).
#pragma once

#include <cstdint>

#include "lib/batch/batch.h"
#include "lib/batch/rng.h"
#include "lib/scenario/scenario.h"

namespace mla {

// K distinct positions of [0, pos] in random order (Floyd's sampling), -1 padded when fewer than
// K are visible.
void pick_visible_topk(Rng& rng, int64_t pos, int32_t k, int32_t* row);

// Overwrites entries of a row of request `req` with the invalid mix: -1, INT_MIN, values near
// INT_MAX, positions past the block-table width, positions in a logical block past the request's
// pages (table entry -1 unless a pinned row says otherwise; -1 when the request has no such block,
// or `req` is not a request of the batch).
void apply_invalid_mix(Rng& rng, const InvalidMix& mix, const Batch& b, int32_t req, int32_t* row, int32_t k);

// Pinned rows (docs/scenarios.md) as a [rows, k] matrix, each row -1 padded to k values.
std::vector<int32_t> pinned_rows(const IndexRows& rows, int32_t k);

}  // namespace mla
