// A scenario materialised into concrete host arrays (no kernels involved): the block table with
// its page order, the slot of every token of every request, the per-token request ids, and the
// resolved gather cases. Pure function of the Scenario (and its seed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/batch/paged_layout.h"
#include "lib/scenario/scenario.h"

namespace mla {

struct ResolvedGather {
  std::string name;
  std::vector<int32_t> workspace_starts;
  std::optional<std::vector<int32_t>> seq_starts;
  int64_t num_rows = 0;
};

struct Batch {
  int32_t num_reqs = 0;
  int32_t num_decodes = 0;                 // leading requests with uniform query_len <= decode threshold
  std::vector<int32_t> seq_lens, query_lens, context_lens;
  int64_t num_tokens = 0;                  // sum of query_lens (new tokens this step)
  int64_t num_decode_tokens = 0;           // tokens of the decode requests
  std::vector<int32_t> req_id_per_token;   // [num_tokens]
  std::vector<int32_t> token_pos;          // [num_tokens] position of each new token in its request

  PagedLayout layout;                      // the pool and the block table; unused columns -1
  // Slot of every cached token of every request (context and new), request-major:
  // request r's token p is all_slots[slot_offsets[r] + p]. Tokens in the cache = sum seq_lens.
  std::vector<int64_t> all_slots;
  std::vector<int64_t> slot_offsets;       // [num_reqs + 1]

  std::vector<ResolvedGather> gathers;     // explicit and chunked-context cases, in order
};

// Contract: s passes validate_scenario() (every loaded scenario does); otherwise throws
// std::invalid_argument with the validation message. num_blocks == 0 means automatic
// (blocks_needed + spare_blocks), as in the file format.
Batch materialise(const Scenario& s);

// The physical page order of a pool of num_blocks pages: the k-th page handed out is order[k].
// Shuffled uses Rng(seed).fork(kRngStreamPageOrder).
std::vector<int32_t> page_order(PageOrder order, int64_t num_blocks, uint64_t seed);

// One chunk of the dense-prefill context gather (docs/semantics.md §2, §4.2): request r's context
// positions [start, start + lens[r]), possibly empty, in workspace rows laid out request after request.
struct ContextChunk {
  int64_t start = 0;          // the seq_starts of every request
  std::vector<int32_t> lens;  // [num_reqs] rows of each request in this chunk
  int64_t rows = 0;           // sum of lens
};

// The chunks of one chunk size: chunk i covers positions [i*chunk_rows, min((i+1)*chunk_rows,
// context_lens[r])) of request r. No chunks when no request has context.
std::vector<ContextChunk> context_chunks(const std::vector<int32_t>& context_lens, int64_t chunk_rows);

// A chunk as a gather case named "NAME[i]": workspace_starts are the exclusive prefix sums of lens.
ResolvedGather chunk_gather(const std::string& name, int64_t index, const ContextChunk& chunk);

}  // namespace mla
