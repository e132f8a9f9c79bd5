#include "lib/fuzz/shrink.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <utility>

#include "lib/batch/batch_spec.h"
#include "lib/scenario/scenario_writer.h"

namespace mla {

std::string FailureSignature::to_string() const {
  if (!check.empty()) return check + " " + mla::to_string(verdict);
  return std::string("scenario ") + mla::to_string(verdict) + (timeout ? " (timeout)" : " (crash or error)");
}

namespace {

bool is_timeout(const std::string& error) { return error.rfind("timed out", 0) == 0; }

}  // namespace

std::optional<FailureSignature> first_failure(const ScenarioResult& r) {
  for (const CheckResult& c : r.checks)
    if (is_failure(c.verdict)) return FailureSignature{c.check, c.verdict, false};
  if (!r.error.empty()) return FailureSignature{"", Verdict::kError, is_timeout(r.error)};
  return std::nullopt;
}

bool shows_failure(const ScenarioResult& r, const FailureSignature& f) {
  if (f.check.empty()) return !r.error.empty() && is_timeout(r.error) == f.timeout;
  return std::any_of(r.checks.begin(), r.checks.end(),
                     [&](const CheckResult& c) { return c.check == f.check && c.verdict == f.verdict; });
}

std::string ScenarioSize::to_string() const {
  std::ostringstream o;
  o << requests << (requests == 1 ? " request" : " requests") << " (max " << max_seq_len << " tokens, "
    << total_seq_len << " in all), H " << heads << ", K " << topk << ", " << gather_cases << " gather / "
    << convert_cases << " convert cases, " << pages << " pages, " << checks << (checks == 1 ? " check" : " checks");
  return o.str();
}

ScenarioSize scenario_size(const Scenario& s) {
  ScenarioSize z;
  z.requests = static_cast<int64_t>(s.batch.seq_lens.size());
  for (int32_t len : s.batch.seq_lens) {
    z.max_seq_len = std::max<int64_t>(z.max_seq_len, len);
    z.total_seq_len += len;
  }
  z.heads = s.model.heads;
  z.topk = s.model.topk;
  z.gather_cases = static_cast<int64_t>(s.gathers.size());
  z.convert_cases = static_cast<int64_t>(s.converts.size());
  z.pages = s.cache.num_blocks > 0 ? s.cache.num_blocks
                                   : blocks_needed(s.batch, s.model.block_size) + s.cache.spare_blocks;
  z.checks = static_cast<int64_t>(s.checks.size());
  return z;
}

namespace {

// Values below v from lo up: lo, then halfway, three quarters, ... up to v - 1 (the first that
// still fails is kept, so big steps come first).
std::vector<int64_t> ladder(int64_t lo, int64_t v) {
  std::vector<int64_t> out;
  if (v <= lo) return out;
  out.push_back(lo);
  for (int64_t d = (v - lo) / 2; d >= 1; d /= 2)
    if (v - d > out.back()) out.push_back(v - d);
  if (out.back() != v - 1) out.push_back(v - 1);
  return out;
}

bool automatic_pool(const Scenario& s) {
  return s.cache.num_blocks == 0 ||
         s.cache.num_blocks == blocks_needed(s.batch, s.model.block_size) + s.cache.spare_blocks;
}

// Each explicit gather case's rows per request (the starts imply the lengths).
std::vector<int64_t> gather_lengths(const GatherCase& g) {
  std::vector<int64_t> lens;
  for (size_t r = 0; r < g.workspace_starts.size(); ++r) {
    const int64_t end = r + 1 < g.workspace_starts.size() ? g.workspace_starts[r + 1] : g.num_rows;
    lens.push_back(end - g.workspace_starts[r]);
  }
  return lens;
}

void set_gather_lengths(GatherCase& g, int64_t lead, const std::vector<int64_t>& lens) {
  g.workspace_starts.clear();
  int64_t rows = lead;
  for (int64_t len : lens) {
    g.workspace_starts.push_back(static_cast<int32_t>(rows));
    rows += len;
  }
  g.num_rows = rows;
}

void erase_requests(Scenario& c, size_t lo, size_t hi) {
  BatchSpec& b = c.batch;
  b.seq_lens.erase(b.seq_lens.begin() + static_cast<ptrdiff_t>(lo), b.seq_lens.begin() + static_cast<ptrdiff_t>(hi));
  b.query_lens.erase(b.query_lens.begin() + static_cast<ptrdiff_t>(lo),
                     b.query_lens.begin() + static_cast<ptrdiff_t>(hi));
  for (GatherCase& g : c.gathers) {
    if (g.chunked_context_rows) continue;
    std::vector<int64_t> lens = gather_lengths(g);
    const int64_t lead = g.workspace_starts.empty() ? 0 : g.workspace_starts[0];
    lens.erase(lens.begin() + static_cast<ptrdiff_t>(lo), lens.begin() + static_cast<ptrdiff_t>(hi));
    if (g.seq_starts)
      g.seq_starts->erase(g.seq_starts->begin() + static_cast<ptrdiff_t>(lo),
                          g.seq_starts->begin() + static_cast<ptrdiff_t>(hi));
    set_gather_lengths(g, lead, lens);
  }
}

// Collects candidates: each is made consistent (pool, workspace, generator, decode rows), kept
// when valid, new, and different from the scenario being shrunk.
class Candidates {
 public:
  explicit Candidates(const Scenario& s) : base_(s), auto_pool_(automatic_pool(s)), base_text_(scenario_to_text(s)) {}

  // Adds the candidate that `edit` makes from a copy of the base.
  template <typename Edit>
  void add(Edit edit) {
    Scenario c = base_;
    edit(c);
    finish(c);
    if (validate_scenario(c)) return;
    std::string text = scenario_to_text(c);
    if (text == base_text_ || !seen_.insert(std::move(text)).second) return;
    out_.push_back(std::move(c));
  }

  std::vector<Scenario> take() { return std::move(out_); }

 private:
  void finish(Scenario& c) const {
    const BatchSpec& b = c.batch;
    if (c.generator) {
      const BatchSpec g = generate_batch(*c.generator, c.seed);
      if (g.seq_lens != b.seq_lens || g.query_lens != b.query_lens || g.decode_threshold != b.decode_threshold)
        c.generator.reset();
    }
    const int64_t needed = blocks_needed(b, c.model.block_size);
    if (auto_pool_ || c.cache.num_blocks < needed) c.cache.num_blocks = needed + c.cache.spare_blocks;
    int64_t with_context = 0;
    for (size_t r = 0; r < b.seq_lens.size(); ++r) with_context += b.seq_lens[r] > b.query_lens[r];
    if (c.attention.workspace_rows > 0 && c.attention.workspace_rows < with_context)
      c.attention.workspace_rows = with_context;
    if (count_decodes(b.query_lens, b.decode_threshold) == 0)
      for (ConvertCase& cv : c.converts) cv.rows = ConvertRows::kAll;
  }

  const Scenario& base_;
  bool auto_pool_;
  std::string base_text_;
  std::set<std::string> seen_;
  std::vector<Scenario> out_;
};

}  // namespace

std::vector<Scenario> shrink_candidates(const Scenario& s, const FailureSignature& target) {
  Candidates cs(s);
  const size_t n = s.batch.seq_lens.size();

  // Checks: only the failing one.
  const auto target_kind = check_kind_from_string(target.check);
  if (target_kind && s.checks.size() > 1) cs.add([&](Scenario& c) { c.checks = {*target_kind}; });
  for (size_t i = 0; !target_kind && s.checks.size() > 1 && i < s.checks.size(); ++i)
    cs.add([&](Scenario& c) { c.checks = {s.checks[i]}; });
  // Cases: those of other checks all at once, then one at a time.
  if (target.check != "gather" && !s.gathers.empty()) cs.add([](Scenario& c) { c.gathers.clear(); });
  if (target.check != "convert" && !s.converts.empty()) cs.add([](Scenario& c) { c.converts.clear(); });
  for (size_t i = 0; s.gathers.size() > 1 && i < s.gathers.size(); ++i)
    cs.add([&](Scenario& c) { c.gathers.erase(c.gathers.begin() + static_cast<ptrdiff_t>(i)); });
  for (size_t i = 0; s.converts.size() > 1 && i < s.converts.size(); ++i)
    cs.add([&](Scenario& c) { c.converts.erase(c.converts.begin() + static_cast<ptrdiff_t>(i)); });

  // Requests: halves, quarters, ... single requests.
  for (size_t size = n / 2; size >= 1; size /= 2)
    for (size_t lo = 0; lo < n; lo += size) {
      const size_t hi = std::min(n, lo + size);
      if (hi - lo < n) cs.add([&](Scenario& c) { erase_requests(c, lo, hi); });
    }

  // Heads (the grammar's 16, 32, 64) and top-k (multiples of 64 stay multiples of 64).
  for (int32_t h : {16, 32, 64})
    if (h < s.model.heads) cs.add([&](Scenario& c) { c.model.heads = h; });
  if (s.model.topk % 64 == 0) {
    for (int64_t m : ladder(1, s.model.topk / 64)) cs.add([&](Scenario& c) { c.model.topk = static_cast<int32_t>(64 * m); });
  } else {
    for (int64_t k : ladder(1, s.model.topk)) cs.add([&](Scenario& c) { c.model.topk = static_cast<int32_t>(k); });
  }

  // Sequences: each request's cached context, then its new tokens.
  for (size_t r = 0; r < n; ++r) {
    const int32_t q = s.batch.query_lens[r], context = s.batch.seq_lens[r] - q;
    for (int64_t v : ladder(0, context)) cs.add([&](Scenario& c) { c.batch.seq_lens[r] = static_cast<int32_t>(q + v); });
    for (int64_t v : ladder(0, q))
      cs.add([&](Scenario& c) {
        c.batch.query_lens[r] = static_cast<int32_t>(v);
        c.batch.seq_lens[r] = static_cast<int32_t>(context + v);
      });
  }

  // Gather cases: fewer chunks, fewer rows, no lead rows, starts at 0.
  for (size_t i = 0; i < s.gathers.size(); ++i) {
    const GatherCase& g = s.gathers[i];
    if (g.chunked_context_rows) {
      int32_t longest = 0;
      for (size_t r = 0; r < n; ++r) longest = std::max(longest, s.batch.seq_lens[r] - s.batch.query_lens[r]);
      if (longest > *g.chunked_context_rows) {
        cs.add([&](Scenario& c) { c.gathers[i].chunked_context_rows = longest; });
        cs.add([&](Scenario& c) { c.gathers[i].chunked_context_rows = std::min<int64_t>(longest, 2 * *g.chunked_context_rows); });
      }
      continue;
    }
    const std::vector<int64_t> lens = gather_lengths(g);
    const int64_t lead = g.workspace_starts.empty() ? 0 : g.workspace_starts[0];
    if (lead > 0) cs.add([&](Scenario& c) { set_gather_lengths(c.gathers[i], 0, lens); });
    if (g.seq_starts) cs.add([&](Scenario& c) { c.gathers[i].seq_starts.reset(); });
    for (size_t r = 0; r < lens.size(); ++r)
      for (int64_t v : ladder(0, lens[r]))
        cs.add([&](Scenario& c) {
          std::vector<int64_t> shorter = lens;
          shorter[r] = v;
          set_gather_lengths(c.gathers[i], lead, shorter);
        });
    for (size_t r = 0; g.seq_starts && r < g.seq_starts->size(); ++r)
      for (int64_t v : ladder(0, (*g.seq_starts)[r]))
        cs.add([&](Scenario& c) { (*c.gathers[i].seq_starts)[r] = static_cast<int32_t>(v); });
  }

  // Convert cases: no invalid entries (all, then one kind at a time), no workspace mode, one rank.
  for (size_t i = 0; i < s.converts.size(); ++i) {
    const ConvertCase& cv = s.converts[i];
    double InvalidMix::*const kinds[] = {&InvalidMix::minus_one, &InvalidMix::int_min, &InvalidMix::large_positive,
                                         &InvalidMix::past_table, &InvalidMix::negative_block};
    const int nonzero = static_cast<int>(std::count_if(std::begin(kinds), std::end(kinds),
                                                       [&](auto k) { return cv.invalid.*k != 0.0; }));
    if (nonzero > 1) cs.add([&](Scenario& c) { c.converts[i].invalid = InvalidMix{}; });
    for (auto k : kinds)
      if (cv.invalid.*k != 0.0) cs.add([&](Scenario& c) { c.converts[i].invalid.*k = 0.0; });
    if (cv.prefill_workspace) cs.add([&](Scenario& c) { c.converts[i].prefill_workspace = false; });
    if (cv.dcp_world_size > 1) {
      cs.add([&](Scenario& c) { c.converts[i].dcp_world_size = 1; c.converts[i].dcp_interleave = 1; });
      for (int64_t w : ladder(2, cv.dcp_world_size)) cs.add([&](Scenario& c) { c.converts[i].dcp_world_size = static_cast<int32_t>(w); });
    }
    if (cv.dcp_interleave > 1) cs.add([&](Scenario& c) { c.converts[i].dcp_interleave = 1; });
  }

  // Attention options.
  if (s.attention.force_sparse) cs.add([](Scenario& c) { c.attention.force_sparse = false; });
  if (s.attention.workspace_rows > 0) cs.add([](Scenario& c) { c.attention.workspace_rows = 0; });
  const bool dcp = std::find(s.checks.begin(), s.checks.end(), CheckKind::kDcp) != s.checks.end();
  for (int64_t w : dcp ? ladder(1, s.attention.dcp_world_size) : std::vector<int64_t>{})
    cs.add([&](Scenario& c) { c.attention.dcp_world_size = static_cast<int32_t>(w); });
  if (dcp && s.attention.dcp_interleave > 1) cs.add([](Scenario& c) { c.attention.dcp_interleave = 1; });
  if (!dcp && (s.attention.dcp_world_size != AttentionConfig{}.dcp_world_size ||
               s.attention.dcp_interleave != AttentionConfig{}.dcp_interleave))
    cs.add([](Scenario& c) {  // the dcp check is gone: its settings back to the defaults
      c.attention.dcp_world_size = AttentionConfig{}.dcp_world_size;
      c.attention.dcp_interleave = AttentionConfig{}.dcp_interleave;
    });

  // Pages, the table, and the remaining options.
  if (!automatic_pool(s)) cs.add([](Scenario& c) { c.cache.num_blocks = 0; });
  for (int64_t v : ladder(0, s.cache.spare_blocks)) cs.add([&](Scenario& c) { c.cache.spare_blocks = v; });
  if (s.cache.page_order != PageOrder::kContiguous) cs.add([](Scenario& c) { c.cache.page_order = PageOrder::kContiguous; });
  if (s.cache.page_padding_bytes != 0) cs.add([](Scenario& c) { c.cache.page_padding_bytes = 0; });
  for (int64_t v : ladder(0, s.block_table.extra_columns))
    cs.add([&](Scenario& c) { c.block_table.extra_columns = static_cast<int32_t>(v); });
  if (s.block_table.stride_padding != 0) cs.add([](Scenario& c) { c.block_table.stride_padding = 0; });
  if (s.cache.dtype != CacheConfig{}.dtype) cs.add([](Scenario& c) { c.cache.dtype = CacheConfig{}.dtype; });
  if (s.model.block_size != ModelDims{}.block_size) cs.add([](Scenario& c) { c.model.block_size = ModelDims{}.block_size; });
  for (int64_t v : ladder(1, s.batch.decode_threshold))
    cs.add([&](Scenario& c) { c.batch.decode_threshold = static_cast<int32_t>(v); });
  if (s.model.scale != ModelDims{}.scale) cs.add([](Scenario& c) { c.model.scale = ModelDims{}.scale; });
  return cs.take();
}

ShrinkOutcome shrink_scenario(const Scenario& failing, const ScenarioResult& failing_result,
                              const FailureSignature& target, const ShrinkEvaluate& evaluate,
                              const ShrinkOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  const size_t batch = std::max<size_t>(1, options.batch);
  ShrinkOutcome out;
  out.scenario = failing;
  out.result = failing_result;
  std::set<std::string> tried;  // candidates already run (a rejected one is not run again)
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<Scenario> pending;
    for (Scenario& c : shrink_candidates(out.scenario, target))
      if (tried.insert(scenario_to_text(c)).second) pending.push_back(std::move(c));
    for (size_t at = 0; at < pending.size() && !progress; at += batch) {
      if (elapsed() >= options.budget_s) {
        out.budget_spent = true;
        out.duration_s = elapsed();
        return out;
      }
      const size_t end = std::min(pending.size(), at + batch);
      const std::vector<Scenario> group(pending.begin() + static_cast<ptrdiff_t>(at),
                                        pending.begin() + static_cast<ptrdiff_t>(end));
      const std::vector<ScenarioResult> results = evaluate(group);
      out.candidates_run += static_cast<int64_t>(group.size());
      for (size_t i = 0; i < group.size() && i < results.size(); ++i) {
        if (!shows_failure(results[i], target)) continue;
        out.scenario = group[i];
        out.result = results[i];
        ++out.steps;
        progress = true;
        break;
      }
    }
  }
  out.duration_s = elapsed();
  return out;
}

}  // namespace mla
