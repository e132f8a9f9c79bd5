// The grammar, in the order of its draws (that order is what a fuzz seed means):
//   1. the scenario's own data seed;
//   2. the family: cache path only, attention only, or both; then the checks of the family;
//   3. the model: block size, top-k, preferred heads, scale;
//   4. the batch: decode threshold, requests, decodes and their length, each later request's kind
//      (a decode-like request of another length, a zero-token padding request, a prefill below,
//      at or above top-k with or without cached context), trailing padding; or (cache path only)
//      a generated batch;
//   5. heads and requests cut down until the attention work fits kFuzzAttentionWorkCap;
//   6. the cache (dtype, spare pages, explicit pool, page order, page padding) and the block table;
//   7. gather cases, convert cases, attention options.
#include "lib/fuzz/scenario_grammar.h"

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <stdexcept>

#include "lib/batch/batch_spec.h"
#include "lib/batch/rng.h"

namespace mla {

namespace {

// Index of an alternative drawn with the given integer weights.
size_t pick(Rng& r, std::initializer_list<int> weights) {
  const int total = std::accumulate(weights.begin(), weights.end(), 0);
  int64_t x = r.uniform_int(0, total - 1);
  size_t i = 0;
  for (int w : weights) {
    if (x < w) return i;
    x -= w;
    ++i;
  }
  return weights.size() - 1;
}

bool chance(Rng& r, int percent) { return static_cast<int>(r.below(100)) < percent; }

int32_t uniform(Rng& r, int64_t lo, int64_t hi) { return static_cast<int32_t>(r.uniform_int(lo, hi)); }

template <typename T>
T one_of(Rng& r, std::initializer_list<T> values) {
  return *(values.begin() + r.below(values.size()));
}

bool listed(const Scenario& s, CheckKind k) { return std::find(s.checks.begin(), s.checks.end(), k) != s.checks.end(); }

int32_t draw_block_size(Rng& r) {
  switch (pick(r, {25, 12, 8, 20, 12, 10, 13})) {
    case 0: return 64;
    case 1: return 16;
    case 2: return 1;
    case 3: return 2 * uniform(r, 1, 63) + 1;  // odd, 3 .. 127
    case 4: return one_of<int32_t>(r, {2, 4, 8, 32});
    case 5: return 128;
    default: return uniform(r, 1, 128);
  }
}

// A divisor of b (the DCP interleave must divide the block size): 1 half of the time.
int32_t draw_divisor(Rng& r, int32_t b) {
  if (chance(r, 50)) return 1;
  std::vector<int32_t> divisors;
  for (int32_t d = 1; d <= b; ++d)
    if (b % d == 0) divisors.push_back(d);
  return divisors[r.below(divisors.size())];
}

void push(BatchSpec& b, int64_t seq_len, int64_t query_len) {
  b.seq_lens.push_back(static_cast<int32_t>(seq_len));
  b.query_lens.push_back(static_cast<int32_t>(query_len));
}

BatchSpec draw_explicit_batch(Rng& r, int32_t topk, bool attention) {
  BatchSpec b;
  b.decode_threshold = chance(r, 55) ? 1 : uniform(r, 2, 4);
  const int32_t threshold = b.decode_threshold;
  // With multi-token decodes, often a decode-like request of another length right after the
  // decodes (below): then there are decodes and room for it.
  const bool nonuniform = threshold >= 2 && chance(r, 40);
  const int32_t n = uniform(r, nonuniform ? 2 : 1, attention ? 6 : 8);
  const int32_t num_decodes = nonuniform ? uniform(r, 1, n - 1) : chance(r, 30) ? 0 : uniform(r, 1, n);
  const int32_t decode_len = chance(r, 60) ? threshold : uniform(r, 1, threshold);
  const int32_t max_context = attention ? 2 * topk : 600;
  const auto context = [&]() -> int32_t {
    switch (pick(r, {15, 45, 40})) {
      case 0: return 0;
      case 1: return uniform(r, 1, std::min(64, max_context));
      default: return uniform(r, 1, max_context);
    }
  };
  for (int32_t i = 0; i < num_decodes; ++i) push(b, context() + decode_len, decode_len);
  const int32_t room = n - num_decodes - (nonuniform ? 1 : 0);  // requests left for padding
  const int32_t tail_padding = room >= 1 && chance(r, 25) ? uniform(r, 1, std::min(2, room)) : 0;
  for (int32_t i = num_decodes; i < n - tail_padding; ++i) {
    if (i == num_decodes && nonuniform) {
      // A decode-like request of another length right after the decodes: not a decode by the
      // uniform rule (docs/semantics.md §4.4), a decode by the non-uniform one (§6.7). Its
      // sequence fits top-k, so that the prefills can take the dense route and the two rules
      // send it different ways.
      int32_t q = uniform(r, 1, threshold - 1);
      if (q >= decode_len) ++q;
      push(b, uniform(r, 0, std::max(0, topk - q)) + q, q);
      continue;
    }
    if (chance(r, 10)) {  // a zero-token padding request, with or without cached tokens
      push(b, chance(r, 50) ? 0 : context(), 0);
      continue;
    }
    // A prefill whose sequence is below, at, or above top-k (which decides its route).
    int64_t seq = 0;
    switch (pick(r, {55, 15, 30})) {
      case 0: seq = uniform(r, 1, std::max(1, topk - 1)); break;
      case 1: seq = topk; break;
      default: seq = int64_t{topk} + uniform(r, 1, attention ? std::min(topk, 96) : 200); break;
    }
    const int64_t q = chance(r, 50) ? seq : r.uniform_int(1, seq);  // q < seq: a prefix-cache hit
    push(b, seq, q);
  }
  for (int32_t i = 0; i < tail_padding; ++i) push(b, chance(r, 70) ? 0 : uniform(r, 1, 64), 0);
  return b;
}

// A generated batch ("batch": {"generate": ...}), cache path only: its sizes are bounded by the
// ranges, not by the attention work.
BatchGenerator draw_generator(Rng& r) {
  BatchGenerator g;
  g.num_requests_min = uniform(r, 1, 4);
  g.num_requests_max = uniform(r, g.num_requests_min, 8);
  g.num_decodes_min = uniform(r, 0, 2);
  g.num_decodes_max = uniform(r, g.num_decodes_min, 4);
  g.decode_query_len = uniform(r, 1, 3);
  g.decode_threshold = uniform(r, g.decode_query_len, 4);
  g.seq_len_min = uniform(r, g.decode_query_len, 100);
  g.seq_len_max = uniform(r, g.seq_len_min, 500);
  g.prefill_query_len_min = uniform(r, 0, 20);
  g.prefill_query_len_max = uniform(r, g.prefill_query_len_min, 300);
  return g;
}

int32_t context_len(const BatchSpec& b, size_t r) { return b.seq_lens[r] - b.query_lens[r]; }

GatherCase draw_explicit_gather(Rng& r, const Scenario& s, int32_t table_width, size_t index) {
  const BatchSpec& b = s.batch;
  const int32_t B = s.model.block_size;
  const int32_t n = static_cast<int32_t>(b.seq_lens.size());
  GatherCase g;
  g.name = "explicit_" + std::to_string(index);
  const int32_t lead = chance(r, 10) ? uniform(r, 1, 8) : 0;  // rows before the first request (§6.6)
  const bool with_seq_starts = chance(r, 75);
  const int32_t zero_tail = chance(r, 20) ? uniform(r, 1, std::min(2, n)) : 0;  // zero-length requests at the end
  int64_t rows = lead;
  std::vector<int32_t> starts;
  for (int32_t i = 0; i < n; ++i) {
    g.workspace_starts.push_back(static_cast<int32_t>(rows));
    const int32_t seq = b.seq_lens[static_cast<size_t>(i)];
    const bool empty = i >= n - zero_tail || chance(r, 15);
    rows += empty ? 0 : uniform(r, 1, std::min(300, seq + B));
    switch (pick(r, {30, 35, 10, 10, 15})) {
      case 0: starts.push_back(0); break;
      case 1: starts.push_back(uniform(r, 0, seq)); break;
      case 2: starts.push_back(seq); break;                                        // at the request's end
      case 3: starts.push_back(table_width * B + uniform(r, 0, 2 * B)); break;     // past the table
      default: starts.push_back(uniform(r, 0, int64_t{4} * table_width * B)); break;
    }
  }
  if (with_seq_starts) g.seq_starts = starts;
  g.num_rows = rows;
  return g;
}

GatherCase draw_chunked_gather(Rng& r, int32_t block_size, int32_t max_context, size_t index) {
  GatherCase g;
  g.name = "chunked_" + std::to_string(index);
  // At most 64 chunks; sometimes a multiple of the block size, mostly not.
  const int32_t least = std::max(1, (max_context + 63) / 64);
  int32_t rows = uniform(r, least, std::max(least, max_context));
  if (chance(r, 30)) rows = std::max(least, block_size * uniform(r, 1, std::max(1, max_context / block_size)));
  g.chunked_context_rows = rows;
  return g;
}

ConvertCase draw_convert(Rng& r, const Scenario& s, bool has_decodes, size_t index) {
  ConvertCase c;
  c.name = "convert_" + std::to_string(index);
  c.rows = has_decodes && chance(r, 40) ? ConvertRows::kDecode : ConvertRows::kAll;
  if (chance(r, 50)) {
    // Fractions in hundredths (exact decimals in the file), at most 0.15 each.
    const auto fraction = [&](bool allowed) { return allowed && chance(r, 50) ? uniform(r, 1, 15) / 100.0 : 0.0; };
    c.invalid.minus_one = fraction(true);
    c.invalid.int_min = fraction(true);
    c.invalid.large_positive = fraction(true);
    c.invalid.past_table = fraction(true);
    c.invalid.negative_block = fraction(s.block_table.extra_columns >= 1);
  }
  c.prefill_workspace = c.rows == ConvertRows::kAll && chance(r, 25);
  if (chance(r, 30)) {
    c.dcp_world_size = one_of<int32_t>(r, {2, 3, 4, 8});
    c.dcp_interleave = draw_divisor(r, s.model.block_size);
  }
  return c;
}

int attention_passes(const Scenario& s) {
  int passes = 0;
  for (CheckKind k : s.checks) {
    switch (k) {
      case CheckKind::kSparseMqa: passes += 3; break;  // split, unsplit, reference
      case CheckKind::kEquivalence: passes += 4; break;  // two comparisons of two routes
      case CheckKind::kDenseMha:
      case CheckKind::kForward:
      case CheckKind::kDcp:
      case CheckKind::kDeterminism: passes += 2; break;
      default: break;
    }
  }
  return passes;
}

// Cuts the batch until the attention work fits: heads first (not below 16), then requests from the
// end, then the single request's length.
void fit_attention_work(Scenario& s) {
  BatchSpec& b = s.batch;
  while (attention_work(s) > kFuzzAttentionWorkCap) {
    if (s.model.heads > 16) {
      s.model.heads /= 2;
    } else if (b.seq_lens.size() > 1) {
      b.seq_lens.pop_back();
      b.query_lens.pop_back();
    } else {
      b.seq_lens[0] = (b.seq_lens[0] + 1) / 2;
      b.query_lens[0] = std::min(b.query_lens[0], b.seq_lens[0]);
      if (b.seq_lens[0] <= 1) break;
    }
  }
}

}  // namespace

std::string fuzz_case_name(uint64_t fuzz_seed, uint64_t index) {
  return "fuzz_s" + std::to_string(fuzz_seed) + "_c" + std::to_string(index);
}

int64_t attention_work(const Scenario& s) {
  const int passes = attention_passes(s);
  if (passes == 0) return 0;
  const int64_t K = s.model.topk;
  int64_t per_head = 0;
  for (size_t r = 0; r < s.batch.seq_lens.size(); ++r) {
    const int64_t context = context_len(s.batch, r), q = s.batch.query_lens[r];
    for (int64_t i = 0; i < q; ++i) per_head += std::min(K, context + i + 1);  // sparse keys
    per_head += q * (context + (q + 1) / 2);                                   // dense pairs
  }
  return per_head * s.model.heads * passes;
}

Scenario generate_fuzz_scenario(uint64_t fuzz_seed, uint64_t index, const GrammarOptions& options) {
  Rng r = Rng(fuzz_seed).fork(index);
  Scenario s;
  s.name = fuzz_case_name(fuzz_seed, index);
  s.file = "fuzz:" + std::to_string(fuzz_seed) + ":" + std::to_string(index);
  s.description = "mla-check --fuzz, seed " + std::to_string(fuzz_seed) + ", case " + std::to_string(index);
  s.tags = {"fuzz"};
  s.seed = r.next_u64();

  // 2. Family and checks.
  const auto allowed = [&](CheckKind k) {
    return options.checks.empty() || std::find(options.checks.begin(), options.checks.end(), k) != options.checks.end();
  };
  std::vector<CheckKind> cache_checks, attention_checks;
  for (int i = 0; i <= static_cast<int>(kLastCheckKind); ++i) {
    const auto k = static_cast<CheckKind>(i);
    if (allowed(k)) (is_attention_check(k) ? attention_checks : cache_checks).push_back(k);
  }
  if (cache_checks.empty() && attention_checks.empty())
    throw std::logic_error("fuzz grammar: no check is allowed");
  size_t family = pick(r, {45, 40, 15});  // cache path, attention, both
  if (cache_checks.empty()) family = 1;
  if (attention_checks.empty()) family = 0;
  const bool cache_family = family != 1, attention = family != 0;
  const auto draw_checks = [&](const std::vector<CheckKind>& from, int percent) {
    std::vector<CheckKind> chosen;
    for (CheckKind k : from)
      if (chance(r, percent)) chosen.push_back(k);
    if (chosen.empty()) chosen.push_back(from[r.below(from.size())]);
    return chosen;
  };
  if (cache_family)
    for (CheckKind k : draw_checks(cache_checks, 60)) s.checks.push_back(k);
  if (attention)
    for (CheckKind k : draw_checks(attention_checks, 50)) s.checks.push_back(k);

  // 3. Model.
  s.model.block_size = draw_block_size(r);
  const bool odd_topk = !attention && chance(r, 30);
  s.model.topk = odd_topk ? uniform(r, 1, 300) : 64 * static_cast<int32_t>(1 + pick(r, {35, 25, 13, 12, 4, 4, 4, 3}));
  s.model.heads = one_of<int32_t>(r, {16, 16, 16, 32, 32, 64, 64, 128});
  if (chance(r, 15)) s.model.scale = uniform(r, 20, 300) / 1000.0;

  // 4. Batch.
  if (!attention && chance(r, 15)) {
    s.generator = draw_generator(r);
    s.batch = generate_batch(*s.generator, s.seed);
  } else {
    s.batch = draw_explicit_batch(r, s.model.topk, attention);
  }
  // 5. Attention work.
  if (attention) fit_attention_work(s);
  const BatchSpec& b = s.batch;
  const size_t n = b.seq_lens.size();
  const int32_t B = s.model.block_size;
  const int32_t num_decodes = count_decodes(b.query_lens, b.decode_threshold);

  // 6. Cache and block table.
  if (!attention && listed(s, CheckKind::kLayout) && chance(r, 15))  // the attention checks need fp8_ds_mla
    s.cache.dtype = one_of<const char*>(r, {"auto", "bf16", "fp8", "fp8_e4m3"});
  s.cache.spare_blocks = chance(r, 25) ? 0 : uniform(r, 1, 8);
  const int64_t needed = blocks_needed(b, B);
  s.cache.num_blocks = chance(r, 15) ? needed + uniform(r, 0, 6) : 0;
  s.cache.page_order = one_of<PageOrder>(r, {PageOrder::kContiguous, PageOrder::kShuffled, PageOrder::kReversed});
  s.cache.page_padding_bytes = chance(r, 30) ? 16 * uniform(r, 1, 8) : 0;
  switch (pick(r, {20, 50, 30})) {
    case 0: s.block_table.extra_columns = 0; break;
    case 1: s.block_table.extra_columns = 1; break;
    default: s.block_table.extra_columns = uniform(r, 2, 4); break;
  }
  s.block_table.stride_padding = chance(r, 35) ? uniform(r, 1, 6) : 0;
  int32_t widest = 0, max_context = 0;
  for (size_t i = 0; i < n; ++i) {
    widest = std::max(widest, (b.seq_lens[i] + B - 1) / B);
    max_context = std::max(max_context, context_len(b, i));
  }
  const int32_t table_width = widest + s.block_table.extra_columns;

  // 7. Cases and options.
  if (listed(s, CheckKind::kGather)) {
    const int32_t count = uniform(r, 1, 3);
    for (int32_t i = 0; i < count; ++i) {
      const bool chunked = max_context > 0 && chance(r, 40);
      s.gathers.push_back(chunked ? draw_chunked_gather(r, B, max_context, s.gathers.size())
                                  : draw_explicit_gather(r, s, table_width, s.gathers.size()));
    }
  }
  if (listed(s, CheckKind::kConvert)) {
    const int32_t count = uniform(r, 1, 3);
    for (int32_t i = 0; i < count; ++i) s.converts.push_back(draw_convert(r, s, num_decodes > 0, s.converts.size()));
  }
  if (attention) {
    s.attention.force_sparse = chance(r, 15);
    int64_t with_context = 0, total_context = 0;
    for (size_t i = 0; i < n; ++i) {
      with_context += context_len(b, i) > 0;
      total_context += context_len(b, i);
    }
    if (!chance(r, 40)) {
      // Small workspaces force several chunks per request.
      s.attention.workspace_rows =
          with_context == 0 ? uniform(r, 1, 256)
                            : r.uniform_int(with_context, std::max(with_context, std::min<int64_t>(
                                                                                  total_context, 4 * int64_t{B} * with_context)));
    }
    if (listed(s, CheckKind::kDcp)) {
      s.attention.dcp_world_size = one_of<int32_t>(r, {1, 2, 2, 3, 4, 4, 8, 16});
      s.attention.dcp_interleave = draw_divisor(r, B);
    }
  }

  if (s.cache.num_blocks == 0) s.cache.num_blocks = needed + s.cache.spare_blocks;
  if (auto err = validate_scenario(s))
    throw std::logic_error("fuzz grammar produced an invalid scenario (" + s.name + "): " + err->to_string());
  return s;
}

}  // namespace mla
