// A scenario materialised into concrete host arrays (no kernels involved): the block table with
// its page order, the slot of every token of every request, the per-token request ids, and the
// resolved gather cases. Pure function of the Scenario (and its seed).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lib/scenario/scenario.h"
#include "reference/cache_reference.h"

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

  ref::CacheGeometry geometry;             // num_blocks, block_size, page stride
  ref::BlockTable block_table;             // [num_reqs, stride]; unused columns -1
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

// The dense-prefill context gathers of one chunk size (SPEC 2, 4.2): chunk i of request r covers
// context positions [i*chunk_rows, min((i+1)*chunk_rows, context_lens[r])), possibly empty.
// Named "NAME[i]"; no chunks when no request has context.
std::vector<ResolvedGather> chunked_context_gathers(const std::string& name,
                                                    const std::vector<int32_t>& context_lens,
                                                    int64_t chunk_rows);

}  // namespace mla
