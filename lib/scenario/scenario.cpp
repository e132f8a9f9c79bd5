// Scenario files (docs/scenarios.md): the JSON Schema (scenarios/schema/scenario.schema.json,
// compiled in) states every field's type, range and enumeration, the required and the unknown keys;
// a file is validated against it before any field is read. This file reads what the schema
// accepted and keeps the rules between fields (and the few a schema cannot state: a seed past
// INT64_MAX, integers valijson would wrap). The first problem is reported (unknown keys before
// anything else, so that a typo is named as a typo and not as a missing key), the schema's other
// violations after it.
#include "lib/scenario/scenario.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "lib/batch/batch_spec.h"
#include "lib/batch/rng.h"
#include "lib/scenario/input_file.h"
#include "lib/scenario/enum_names.h"
#include "lib/scenario/json_keys.h"
#include "lib/scenario/json_schema.h"

namespace mla {

using nlohmann::json;

// --- Enumerations -------------------------------------------------------------------------------

constexpr EnumName<PageOrder> kPageOrderNames[] = {
    {PageOrder::kContiguous, "contiguous"}, {PageOrder::kShuffled, "shuffled"}, {PageOrder::kReversed, "reversed"}};

const char* to_string(PageOrder o) { return enum_name(kPageOrderNames, o); }
std::optional<PageOrder> page_order_from_string(const std::string& s) { return enum_from_name(kPageOrderNames, s); }

// In enum order (check_kind_names lists them so).
constexpr EnumName<CheckKind> kCheckKindNames[] = {
    {CheckKind::kPack, "pack"},           {CheckKind::kGather, "gather"},
    {CheckKind::kConvert, "convert"},     {CheckKind::kLayout, "layout"},
    {CheckKind::kSparseMqa, "sparse_mqa"}, {CheckKind::kDenseMha, "dense_mha"},
    {CheckKind::kForward, "forward"},     {CheckKind::kEquivalence, "equivalence"},
    {CheckKind::kDcp, "dcp"},             {CheckKind::kDeterminism, "determinism"},
    {CheckKind::kDrift, "drift"},         {CheckKind::kMerge, "merge"},
};
static_assert(std::size(kCheckKindNames) == static_cast<std::size_t>(kLastCheckKind) + 1, "every check kind named");

const char* to_string(CheckKind k) { return enum_name(kCheckKindNames, k); }
std::optional<CheckKind> check_kind_from_string(const std::string& s) { return enum_from_name(kCheckKindNames, s); }

bool is_attention_check(CheckKind k) {
  return k == CheckKind::kSparseMqa || k == CheckKind::kDenseMha || k == CheckKind::kForward ||
         k == CheckKind::kEquivalence || k == CheckKind::kDcp || k == CheckKind::kDeterminism ||
         k == CheckKind::kDrift || k == CheckKind::kMerge;
}

std::string check_kind_names() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(kLastCheckKind); ++i) {
    if (i > 0) names += ", ";
    names += to_string(static_cast<CheckKind>(i));
  }
  return names;
}

bool Scenario::gpu_only() const { return std::find(tags.begin(), tags.end(), kGpuOnlyTag) != tags.end(); }

std::string ScenarioError::to_string() const {
  std::string text = located_problem(file, json_path, problem);
  for (const auto& [pointer, why] : more) text += "\n" + located_problem(file, pointer, why);
  return text;
}

int64_t block_table_width(const Scenario& s) {
  const int64_t B = s.model.block_size;
  int64_t widest = 0;
  for (size_t r = 0; r < s.batch.seq_lens.size(); ++r) {
    widest = std::max<int64_t>(widest, B > 0 ? (int64_t{s.batch.seq_lens[r]} + B - 1) / B : 0);
    if (s.block_table.rows && r < s.block_table.rows->size())
      widest = std::max<int64_t>(widest, static_cast<int64_t>((*s.block_table.rows)[r].size()));
  }
  return widest + s.block_table.extra_columns;
}

int64_t convert_case_rows(const Scenario& s, const ConvertCase& c) {
  const int32_t decodes = c.rows == ConvertRows::kDecode ? decode_requests(s.batch) : static_cast<int32_t>(s.batch.query_lens.size());
  int64_t rows = 0;
  for (int32_t r = 0; r < decodes && r < static_cast<int32_t>(s.batch.query_lens.size()); ++r) rows += s.batch.query_lens[static_cast<size_t>(r)];
  return rows;
}

std::optional<bf16_t> tile_amax_for_scale(float scale) {
  if (!(scale > 0.0f) || !std::isfinite(scale)) return std::nullopt;
  if (scale == FLT_MIN) return bf16_t{0};  // an all-zero tile (so is any amax below 448 FLT_MIN)
  // Positive bf16 bit patterns are ordered like their values: the answer, if any, is next to the
  // rounding of scale * 448.
  const float wanted = scale * 448.0f;
  const int32_t guess = std::isfinite(wanted) ? f32_to_bf16_rne(wanted) : 0x7F7F;
  for (int32_t bits = guess - 2; bits <= guess + 2; ++bits) {
    if (bits < 0 || bits >= 0x7F80) continue;  // finite, non-negative amax only
    if (std::max(bf16_to_f32(static_cast<bf16_t>(bits)) / 448.0f, FLT_MIN) == scale) return static_cast<bf16_t>(bits);
  }
  return std::nullopt;
}

namespace {

// --- JSON paths and failures ----------------------------------------------------------------------

// A problem found while reading; load_scenario turns it into a ScenarioError naming the file.
struct Failure {
  std::string path;
  std::string problem;
};

[[noreturn]] void fail(const std::string& path, const std::string& problem) { throw Failure{path, problem}; }

std::string at(const std::string& path, const std::string& key) { return path + "/" + json_pointer_token(key); }
std::string at(const std::string& path, size_t index) { return path + "/" + std::to_string(index); }

// A short rendering of a value for messages.
std::string show(const json& j) {
  std::string s = j.dump();
  if (s.size() > 48) s = s.substr(0, 45) + "...";
  return s;
}

// --- The schema -------------------------------------------------------------------------------------

// Generated at configure time from scenarios/schema/scenario.schema.json (lib/CMakeLists.txt): the
// schema as a raw string, so that the binaries need no source tree at run time.
const JsonSchema& scenario_schema() {
  static const JsonSchema schema(
#include "scenario_schema.inc"
      , "scenarios/schema/scenario.schema.json (built in)");
  return schema;
}

// valijson reads every integer as int64: a literal past INT64_MAX (stored unsigned by nlohmann)
// would wrap to a negative value and could pass a bound. Only the seed is unsigned 64-bit.
void reject_wrapping_integers(const json& j, const std::string& path) {
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) && path != "/seed")
    fail(path, show(j) + " is out of range (no field but /seed takes integers past 2^63 - 1)");
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it) reject_wrapping_integers(*it, at(path, it.key()));
  if (j.is_array())
    for (size_t i = 0; i < j.size(); ++i) reject_wrapping_integers(j[i], at(path, i));
}

// Validates `root` against the schema; the first violation (unknown keys first, so that a typo is
// named as a typo and not as the missing key it was meant to be) becomes the Failure, the others
// its `more`.
void validate_against_schema(const json& root, std::vector<std::pair<std::string, std::string>>* more) {
  std::vector<SchemaViolation> v = scenario_schema().validate(root);
  if (v.empty()) return;
  std::stable_partition(v.begin(), v.end(), [](const SchemaViolation& x) { return x.problem.rfind("unknown key", 0) == 0; });
  for (size_t i = 1; i < v.size(); ++i) more->emplace_back(v[i].pointer, v[i].problem);
  fail(v.front().pointer, v.front().problem);
}

// --- Readers of a document the schema has accepted (types and ranges hold) --------------------------

const json* find(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

int32_t int32_or(const json& obj, const char* key, int32_t fallback) {
  const json* v = find(obj, key);
  return v ? v->get<int32_t>() : fallback;
}

std::vector<int32_t> int32_list(const json& j) { return j.get<std::vector<int32_t>>(); }
IndexRows int32_rows(const json& j) { return j.get<IndexRows>(); }

std::pair<int32_t, int32_t> range(const json& j) { return {j[0].get<int32_t>(), j[1].get<int32_t>()}; }

// [min, max] with min <= max (the schema says two values in range; their order is a rule between them).
std::pair<int32_t, int32_t> ordered_range(const json& j, const std::string& path) {
  const auto r = range(j);
  if (r.first > r.second) fail(path, "min " + std::to_string(r.first) + " > max " + std::to_string(r.second));
  return r;
}

// --- Sections -----------------------------------------------------------------------------------

ModelDims read_model(const json& j) {
  ModelDims m;
  m.heads = int32_or(j, "heads", m.heads);
  m.topk = int32_or(j, "topk", m.topk);
  m.block_size = int32_or(j, "block_size", m.block_size);
  if (auto* v = find(j, "scale")) m.scale = v->get<double>();
  return m;
}

CacheConfig read_cache(const json& j) {
  CacheConfig c;
  if (auto* v = find(j, "dtype")) c.dtype = v->get<std::string>();
  c.num_blocks = int32_or(j, "num_blocks", 0);
  c.spare_blocks = int32_or(j, "spare_blocks", static_cast<int32_t>(c.spare_blocks));
  if (auto* v = find(j, "page_order")) c.page_order = *page_order_from_string(v->get<std::string>());
  c.page_padding_bytes = int32_or(j, "page_padding_bytes", 0);
  if (auto* v = find(j, "fixed_scales")) {
    for (const json& f : *v) {
      FixedScale fs;
      fs.request = f.at("request").get<int32_t>();
      fs.position = f.at("position").get<int32_t>();
      fs.tile = f.at("tile").get<int32_t>();
      fs.scale = static_cast<float>(f.at("scale").get<double>());
      c.fixed_scales.push_back(fs);
    }
  }
  return c;
}

BlockTableConfig read_block_table(const json& j) {
  BlockTableConfig b;
  b.extra_columns = int32_or(j, "extra_columns", b.extra_columns);
  b.stride_padding = int32_or(j, "stride_padding", b.stride_padding);
  if (auto* v = find(j, "rows")) b.rows = int32_rows(*v);
  return b;
}

BatchGenerator read_generator(const json& j, const std::string& path) {
  BatchGenerator g;
  std::tie(g.num_requests_min, g.num_requests_max) = ordered_range(j.at("num_requests"), at(path, "num_requests"));
  if (auto* v = find(j, "num_decodes")) std::tie(g.num_decodes_min, g.num_decodes_max) = ordered_range(*v, at(path, "num_decodes"));
  g.decode_query_len = int32_or(j, "decode_query_len", g.decode_query_len);
  std::tie(g.seq_len_min, g.seq_len_max) = ordered_range(j.at("seq_len"), at(path, "seq_len"));
  std::tie(g.prefill_query_len_min, g.prefill_query_len_max) =
      ordered_range(j.at("prefill_query_len"), at(path, "prefill_query_len"));
  g.decode_threshold = int32_or(j, "decode_threshold", g.decode_query_len);
  if (g.decode_threshold < g.decode_query_len)
    fail(at(path, "decode_threshold"), "decode_threshold " + std::to_string(g.decode_threshold) +
                                           " < decode_query_len " + std::to_string(g.decode_query_len) +
                                           ": the generated decodes would not be decodes");
  if (g.num_decodes_max > 0 && g.seq_len_min < g.decode_query_len)
    fail(at(path, "seq_len"), "min seq_len " + std::to_string(g.seq_len_min) + " < decode_query_len " +
                                  std::to_string(g.decode_query_len) + " while decodes can be generated");
  return g;
}

// Reads the batch; a generated batch is resolved with `seed`.
void read_batch(const json& j, const std::string& path, uint64_t seed, Scenario& s) {
  if (const json* gen = find(j, "generate")) {
    for (const char* explicit_key : {"seq_lens", "query_lens", "decode_threshold", "num_decodes"})
      if (find(j, explicit_key))
        fail(at(path, explicit_key), std::string("\"") + explicit_key +
                                         "\" cannot be combined with \"generate\" (a batch is explicit or generated)");
    s.generator = read_generator(*gen, at(path, "generate"));
    s.batch = generate_batch(*s.generator, seed);
    return;
  }
  s.batch.seq_lens = int32_list(j.at("seq_lens"));
  s.batch.query_lens = int32_list(j.at("query_lens"));
  s.batch.decode_threshold = int32_or(j, "decode_threshold", 1);
  if (auto* v = find(j, "num_decodes")) s.batch.num_decodes = v->get<int32_t>();
}

GatherCase read_gather(const json& j, const std::string& path) {
  GatherCase g;
  g.name = j.at("name").get<std::string>();
  if (const json* c = find(j, "chunked_context")) {
    for (const char* key : {"workspace_starts", "seq_starts", "num_rows"})
      if (find(j, key))
        fail(at(path, key), std::string("\"") + key +
                                "\" cannot be combined with \"chunked_context\" (a chunked-context case has only "
                                "\"name\" and \"chunked_context\")");
    g.chunked_context_rows = c->at("chunk_rows").get<int32_t>();
    return g;
  }
  g.workspace_starts = int32_list(j.at("workspace_starts"));
  if (auto* v = find(j, "seq_starts")) g.seq_starts = int32_list(*v);
  g.num_rows = j.at("num_rows").get<int32_t>();
  return g;
}

ConvertCase read_convert(const json& j) {
  ConvertCase c;
  c.name = j.at("name").get<std::string>();
  if (auto* v = find(j, "rows")) c.rows = v->get<std::string>() == "decode" ? ConvertRows::kDecode : ConvertRows::kAll;
  if (auto* v = find(j, "invalid")) {
    const std::pair<const char*, double*> fields[] = {{"minus_one", &c.invalid.minus_one},
                                                      {"int_min", &c.invalid.int_min},
                                                      {"large_positive", &c.invalid.large_positive},
                                                      {"past_table", &c.invalid.past_table},
                                                      {"negative_block", &c.invalid.negative_block}};
    for (const auto& [key, dst] : fields)
      if (const json* f = find(*v, key)) *dst = f->get<double>();
  }
  if (auto* v = find(j, "prefill_workspace")) c.prefill_workspace = v->get<bool>();
  if (auto* v = find(j, "dcp")) {
    c.dcp_world_size = int32_or(*v, "world_size", c.dcp_world_size);
    c.dcp_interleave = int32_or(*v, "interleave", c.dcp_interleave);
  }
  if (auto* v = find(j, "req_id")) c.req_id = int32_list(*v);
  if (auto* v = find(j, "indices")) c.indices = int32_rows(*v);
  return c;
}

Tolerance read_tolerance(const json& j, Tolerance t) {
  if (auto* v = find(j, "abs")) t.abs = v->get<double>();
  if (auto* v = find(j, "rel")) t.rel = v->get<double>();
  if (auto* v = find(j, "cos")) t.cos = v->get<double>();
  return t;
}

AttentionConfig read_attention(const json& j) {
  AttentionConfig a;
  if (auto* v = find(j, "force_sparse")) a.force_sparse = v->get<bool>();
  a.workspace_rows = int32_or(j, "workspace_rows", 0);
  if (auto* v = find(j, "dcp")) {
    a.dcp_world_size = int32_or(*v, "world_size", a.dcp_world_size);
    a.dcp_interleave = int32_or(*v, "interleave", a.dcp_interleave);
  }
  if (auto* v = find(j, "drift")) a.drift_layers = int32_or(*v, "layers", a.drift_layers);
  if (auto* v = find(j, "tolerances")) {
    AttentionTolerances& t = a.tolerances;
    const std::pair<const char*, Tolerance*> fields[] = {
        {"sparse_mqa", &t.sparse_mqa}, {"sparse_lse", &t.sparse_lse}, {"dense_mha", &t.dense_mha},
        {"dense_lse", &t.dense_lse},   {"forward", &t.forward},       {"equivalence_from_cache", &t.equivalence_from_cache},
        {"equivalence_bf16", &t.equivalence_bf16}, {"dcp", &t.dcp}};
    for (const auto& [key, field] : fields)
      if (auto* w = find(*v, key)) *field = read_tolerance(*w, *field);
  }
  if (auto* v = find(j, "topk_positions")) a.topk_positions = int32_rows(*v);
  if (auto* v = find(j, "sparse_mqa_slots")) a.sparse_mqa_slots = int32_rows(*v);
  return a;
}

std::vector<CheckKind> read_checks(const json& j, const std::string& path) {
  std::vector<CheckKind> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const CheckKind k = *check_kind_from_string(j[i].get<std::string>());
    if (std::find(out.begin(), out.end(), k) != out.end()) fail(at(path, i), "\"" + j[i].get<std::string>() + "\" is listed twice");
    out.push_back(k);
  }
  return out;
}

template <typename Case>
void reject_duplicate_names(const std::vector<Case>& cases, const std::string& path) {
  std::set<std::string> seen;
  for (size_t i = 0; i < cases.size(); ++i)
    if (!seen.insert(cases[i].name).second) fail(at(at(path, i), "name"), "\"" + cases[i].name + "\" is used twice");
}

// Reads a document the schema accepted; the rules between fields that concern the file's own
// spelling (combinations of keys, ranges' order, repeated names and checks) fail here.
Scenario read_scenario(const json& root, std::optional<uint64_t> seed_override) {
  Scenario s;
  s.name = root.at("name").get<std::string>();
  if (auto* v = find(root, "description")) s.description = v->get<std::string>();
  if (auto* v = find(root, "tags")) s.tags = v->get<std::vector<std::string>>();
  if (auto* v = find(root, "seed")) {
    if (!v->is_number_unsigned()) fail("/seed", show(*v) + " is out of range: must be >= 0");
    s.seed = v->get<uint64_t>();
  }
  if (seed_override) s.seed = *seed_override;
  if (auto* v = find(root, "model")) s.model = read_model(*v);
  if (auto* v = find(root, "cache")) s.cache = read_cache(*v);
  if (auto* v = find(root, "block_table")) s.block_table = read_block_table(*v);
  read_batch(root.at("batch"), "/batch", s.seed, s);
  if (auto* v = find(root, "gather")) {
    for (size_t i = 0; i < v->size(); ++i) s.gathers.push_back(read_gather((*v)[i], at("/gather", i)));
    reject_duplicate_names(s.gathers, "/gather");
  }
  if (auto* v = find(root, "convert")) {
    for (size_t i = 0; i < v->size(); ++i) s.converts.push_back(read_convert((*v)[i]));
    reject_duplicate_names(s.converts, "/convert");
  }
  if (auto* v = find(root, "attention")) s.attention = read_attention(*v);
  if (auto* v = find(root, "checks")) s.checks = read_checks(*v, "/checks");
  else s.checks = {CheckKind::kPack, CheckKind::kGather, CheckKind::kConvert, CheckKind::kLayout};
  return s;
}

// --- Rules between fields -----------------------------------------------------------------------

void check_batch(const BatchSpec& b, bool generated) {
  // A generated batch satisfies these by construction; if it does not, say where it came from.
  const std::string where = generated ? " (generated by /batch/generate)" : "";
  if (b.seq_lens.empty()) fail("/batch/seq_lens", "the batch needs at least one request" + where);
  if (b.query_lens.size() != b.seq_lens.size())
    fail("/batch/query_lens", "has " + std::to_string(b.query_lens.size()) + " entries but seq_lens has " +
                                  std::to_string(b.seq_lens.size()) + where);
  if (b.decode_threshold < 1) fail("/batch/decode_threshold", "must be >= 1" + where);
  for (size_t r = 0; r < b.seq_lens.size(); ++r) {
    if (b.seq_lens[r] < 0) fail(at("/batch/seq_lens", r), "must be >= 0" + where);
    if (b.query_lens[r] < 0) fail(at("/batch/query_lens", r), "must be >= 0" + where);
    if (b.query_lens[r] > b.seq_lens[r])
      fail(at("/batch/query_lens", r), "query_len " + std::to_string(b.query_lens[r]) + " > seq_len " +
                                           std::to_string(b.seq_lens[r]) + " of request " + std::to_string(r) + where);
  }
}

// Each of a scenario's main buffers (the cache, the block table, a gather's output, the top-k
// indices, the attention queries) is refused past kMaxBufferBytes, before anything is allocated,
// instead of failing (or swapping) on the allocation. Sizes are computed in long double: the
// products of file values can pass int64.
constexpr long double kMaxBufferBytes = static_cast<long double>(int64_t{8} << 30);
// Chunked context: at most this many chunks per case (each is a gather call).
constexpr int64_t kMaxContextChunks = int64_t{1} << 20;

void check_size(const std::string& path, const std::string& what, long double bytes) {
  if (bytes <= kMaxBufferBytes) return;
  std::ostringstream gib;
  gib.precision(3);
  gib << bytes / static_cast<long double>(int64_t{1} << 30);
  fail(path, what + " would take " + gib.str() + " GiB; a scenario's buffers are limited to 8 GiB each");
}

void check_sizes(const Scenario& s, int64_t pool) {
  const int32_t B = s.model.block_size;
  int64_t tokens = 0;
  for (int32_t q : s.batch.query_lens) tokens += q;
  const int64_t width = block_table_width(s);
  // Top-k indices are int32 (docs/semantics.md §3) and address tokens up to the table's width * B, and the
  // past_table invalid values up to 4 blocks beyond it.
  if (static_cast<long double>(width + 4) * B - 1 > INT32_MAX)
    fail("/block_table/extra_columns", "the block table's " + std::to_string(width) + " columns (+ 4) of " +
                                           std::to_string(B) + " tokens reach past INT32_MAX tokens (indices are int32)");
  const long double page_bytes = static_cast<long double>(B) * 656 + s.cache.page_padding_bytes;
  check_size(s.cache.num_blocks > 0 ? "/cache/num_blocks" : "/cache",
             "the cache (" + std::to_string(pool) + " pages of " + std::to_string(static_cast<int64_t>(page_bytes)) +
                 " bytes)",
             pool * page_bytes);
  check_size("/block_table", "the block table (" + std::to_string(s.batch.seq_lens.size()) + " rows of " +
                                 std::to_string(width + s.block_table.stride_padding) + " int32)",
             static_cast<long double>(s.batch.seq_lens.size()) * (width + s.block_table.stride_padding) * 4);
  for (size_t i = 0; i < s.gathers.size(); ++i) {
    const GatherCase& g = s.gathers[i];
    if (g.chunked_context_rows) {
      // One gather call per chunk of the longest context, over every request (lib/batch/batch.h: context_chunks).
      int64_t longest = 0;
      for (size_t r = 0; r < s.batch.seq_lens.size(); ++r)
        longest = std::max<int64_t>(longest, int64_t{s.batch.seq_lens[r]} - s.batch.query_lens[r]);
      const int64_t chunks = (longest + *g.chunked_context_rows - 1) / *g.chunked_context_rows;
      if (chunks > kMaxContextChunks)
        fail(at(at(at("/gather", i), "chunked_context"), "chunk_rows"),
             std::to_string(*g.chunked_context_rows) + " rows per chunk make " + std::to_string(chunks) +
                 " chunks; at most " + std::to_string(kMaxContextChunks));
      continue;
    }
    check_size(at(at("/gather", i), "num_rows"), std::to_string(g.num_rows) + " gathered rows of 576 bf16",
               static_cast<long double>(g.num_rows) * 576 * 2);
  }
  // Top-k indices: the request's, the converted ones and the reference's, per new token.
  check_size("/model/topk", "top-k indices for " + std::to_string(tokens) + " tokens x " + std::to_string(s.model.topk),
             static_cast<long double>(tokens) * s.model.topk * 4 * 3);
  // The attention checks' own large buffers (lib/checks/attention_checks.cpp). The forward check
  // is not estimated here: mla-bench validates its forward batches with it and runs no reference.
  const auto listed = [&](CheckKind k) { return std::find(s.checks.begin(), s.checks.end(), k) != s.checks.end(); };
  const long double H = s.model.heads;
  if (listed(CheckKind::kSparseMqa) || listed(CheckKind::kDcp))  // the latent queries, in double
    check_size("/model/heads", "queries for " + std::to_string(tokens) + " tokens x " + std::to_string(s.model.heads) +
                                   " heads",
               tokens * H * 576 * 8);
  if (listed(CheckKind::kSparseMqa))  // the split run's fp32 partials: one per token, 64-key block and head
    check_size("/model/topk", "sparse_mqa's split partials for " + std::to_string(tokens) + " tokens x " +
                                  std::to_string((s.model.topk + 63) / 64) + " key blocks x " +
                                  std::to_string(s.model.heads) + " heads",
               tokens * static_cast<long double>((s.model.topk + 63) / 64) * H * 512 * 4);
  if (listed(CheckKind::kDenseMha)) {  // the reference's keys and values, in double, for every cached token
    long double keys = 0;
    for (int32_t len : s.batch.seq_lens) keys += len;
    check_size("/model/heads", "dense_mha's keys and values for " + std::to_string(static_cast<int64_t>(keys)) +
                                   " tokens x " + std::to_string(s.model.heads) + " heads",
               keys * H * (192 + 128) * 8);
  }
}

int64_t pages_of(int64_t seq_len, int32_t block_size) { return (seq_len + block_size - 1) / block_size; }

// The decode count pinned by /batch/num_decodes: within the batch, and every decode has a token.
void check_pinned_decodes(const BatchSpec& b) {
  if (!b.num_decodes) return;
  const int32_t n = *b.num_decodes;
  if (n < 0) fail("/batch/num_decodes", "must be >= 0");
  if (n > static_cast<int32_t>(b.seq_lens.size()))
    fail("/batch/num_decodes", std::to_string(n) + " decodes, but the batch has " + std::to_string(b.seq_lens.size()) +
                                   " requests");
  for (int32_t r = 0; r < n; ++r)
    if (b.query_lens[static_cast<size_t>(r)] < 1)
      fail(at("/batch/query_lens", static_cast<size_t>(r)),
           "request " + std::to_string(r) + " is a decode (/batch/num_decodes is " + std::to_string(n) +
               ") but has no new token");
}

// Pinned block-table rows: one per request, covering its pages with distinct pages of the pool.
void check_pinned_table(const Scenario& s, int64_t pool) {
  if (!s.block_table.rows) return;
  const IndexRows& rows = *s.block_table.rows;
  const std::string path = "/block_table/rows";
  const size_t num_reqs = s.batch.seq_lens.size();
  if (rows.size() != num_reqs)
    fail(path, "has " + std::to_string(rows.size()) + " rows; the batch has " + std::to_string(num_reqs) + " requests");
  std::map<int32_t, std::pair<size_t, size_t>> used;  // page -> (request, column)
  for (size_t r = 0; r < num_reqs; ++r) {
    const int64_t pages = pages_of(s.batch.seq_lens[r], s.model.block_size);
    if (static_cast<int64_t>(rows[r].size()) < pages)
      fail(at(path, r), "has " + std::to_string(rows[r].size()) + " entries; request " + std::to_string(r) +
                            " (seq_len " + std::to_string(s.batch.seq_lens[r]) + ") needs " + std::to_string(pages) +
                            " pages of " + std::to_string(s.model.block_size) + " tokens");
    for (size_t c = 0; c < static_cast<size_t>(pages); ++c) {
      const int32_t page = rows[r][c];
      if (page < 0 || page >= pool)
        fail(at(at(path, r), c), "page " + std::to_string(page) + " is not in the pool of " + std::to_string(pool) +
                                     " pages, and request " + std::to_string(r) + " has cached tokens in column " +
                                     std::to_string(c));
      const auto [it, fresh] = used.emplace(page, std::make_pair(r, c));
      if (!fresh)
        fail(at(at(path, r), c), "page " + std::to_string(page) + " is also " +
                                     at(at(path, it->second.first), it->second.second) +
                                     ": every cached position needs a slot of its own");
    }
  }
}

// The table entry of request r's column `column` (< the width), as materialise() lays it out.
int64_t table_entry(const Scenario& s, size_t r, int64_t column) {
  if (s.block_table.rows) {
    const std::vector<int32_t>& row = (*s.block_table.rows)[r];
    return column < static_cast<int64_t>(row.size()) ? row[static_cast<size_t>(column)] : -1;
  }
  return column < pages_of(s.batch.seq_lens[r], s.model.block_size) ? 0 : -1;  // generated: a page, or none
}

void check_fixed_scales(const Scenario& s) {
  std::set<std::tuple<int32_t, int32_t, int32_t>> seen;
  for (size_t i = 0; i < s.cache.fixed_scales.size(); ++i) {
    const FixedScale& f = s.cache.fixed_scales[i];
    const std::string path = at("/cache/fixed_scales", i);
    if (f.request < 0 || f.request >= static_cast<int32_t>(s.batch.seq_lens.size()))
      fail(at(path, "request"), "request " + std::to_string(f.request) + " is not in the batch of " +
                                    std::to_string(s.batch.seq_lens.size()) + " requests");
    const int32_t len = s.batch.seq_lens[static_cast<size_t>(f.request)];
    if (f.position < 0 || f.position >= len)
      fail(at(path, "position"), "position " + std::to_string(f.position) + " is not a cached position of request " +
                                     std::to_string(f.request) + " (seq_len " + std::to_string(len) + ")");
    if (f.tile < 0 || f.tile > 3) fail(at(path, "tile"), "must be in [0, 3]");
    if (!tile_amax_for_scale(f.scale)) {
      std::ostringstream near;
      near.precision(9);
      const int32_t guess = std::isfinite(f.scale * 448.0f) ? f32_to_bf16_rne(f.scale * 448.0f) : 0x7F7F;
      for (int32_t bits : {guess - 1, guess, guess + 1}) {
        if (bits < 0 || bits >= 0x7F80) continue;
        near << (near.tellp() > 0 ? ", " : "") << std::max(bf16_to_f32(static_cast<bf16_t>(bits)) / 448.0f, FLT_MIN);
      }
      std::ostringstream want;
      want.precision(9);
      want << f.scale;
      fail(at(path, "scale"), "no tile gives the fp32 scale " + want.str() +
                                  " (max(amax / 448, FLT_MIN) for a bf16 amax); scales near it that the pack produces: " +
                                  near.str());
    }
    if (!seen.insert({f.request, f.position, f.tile}).second)
      fail(path, "tile " + std::to_string(f.tile) + " of request " + std::to_string(f.request) + " position " +
                     std::to_string(f.position) + " is pinned twice");
  }
}

// Pinned rows of int32: `expected` rows of at most `topk` values each.
void check_pinned_rows(const IndexRows& rows, int64_t expected, int32_t topk, const std::string& path,
                       const std::string& what_rows) {
  if (static_cast<int64_t>(rows.size()) != expected)
    fail(path, "has " + std::to_string(rows.size()) + " rows; " + what_rows + " " + std::to_string(expected));
  for (size_t t = 0; t < rows.size(); ++t)
    if (static_cast<int64_t>(rows[t].size()) > topk)
      fail(at(path, t), "has " + std::to_string(rows[t].size()) + " values; top-k is " + std::to_string(topk));
}

void check_pinned_convert(const Scenario& s, const ConvertCase& c, const std::string& path) {
  const int64_t rows = convert_case_rows(s, c);
  const std::string what = c.rows == ConvertRows::kDecode ? "the case converts the decode tokens' rows:"
                                                          : "the case converts every new token's row:";
  if (c.req_id && static_cast<int64_t>(c.req_id->size()) != rows)
    fail(at(path, "req_id"), "has " + std::to_string(c.req_id->size()) + " entries; " + what + " " + std::to_string(rows));
  if (!c.indices) return;
  check_pinned_rows(*c.indices, rows, s.model.topk, at(path, "indices"), what);
  const InvalidMix& m = c.invalid;
  if (m.minus_one > 0 || m.int_min > 0 || m.large_positive > 0 || m.past_table > 0 || m.negative_block > 0)
    fail(at(path, "indices"), "pinned indices cannot be combined with \"invalid\" (they are used as written)");
}

void check_pinned_attention(const Scenario& s) {
  int64_t tokens = 0;
  std::vector<size_t> req_of_token;
  for (size_t r = 0; r < s.batch.query_lens.size(); ++r)
    for (int32_t i = 0; i < s.batch.query_lens[r]; ++i) req_of_token.push_back(r), ++tokens;
  const std::string what = "the batch has new tokens:";
  if (const auto& slots = s.attention.sparse_mqa_slots)
    check_pinned_rows(*slots, tokens, s.model.topk, "/attention/sparse_mqa_slots", what);
  if (!s.attention.topk_positions) return;
  const IndexRows& rows = *s.attention.topk_positions;
  const std::string path = "/attention/topk_positions";
  check_pinned_rows(rows, tokens, s.model.topk, path, what);
  // A position the request has not written (the rest of its last page, or a pinned table's page
  // in a column past its pages) would read NaN bytes or another request's entry: the DCP ranks'
  // shards hold no such slot, so no check could hold the routes to one answer. With the dcp check,
  // a position past the request's length must be negative: a rank's shard is laid out by the
  // rank's own positions, and a non-negative position past them may land in a page of the shard
  // where the one table has none.
  const int32_t B = s.model.block_size;
  const int64_t width = block_table_width(s);
  const bool dcp = std::find(s.checks.begin(), s.checks.end(), CheckKind::kDcp) != s.checks.end();
  for (size_t t = 0; t < rows.size(); ++t) {
    const size_t r = req_of_token[t];
    const int32_t len = s.batch.seq_lens[r];
    for (size_t j = 0; j < rows[t].size(); ++j) {
      const int64_t p = rows[t][j];
      if (dcp && p >= len)
        fail(at(at(path, t), j), "position " + std::to_string(p) + " of request " + std::to_string(r) + " (seq_len " +
                                     std::to_string(len) +
                                     ") is past the request: with the dcp check, pinned positions are below seq_len or "
                                     "negative");
      if (p < len || p / B >= width || table_entry(s, r, p / B) < 0) continue;
      fail(at(at(path, t), j), "position " + std::to_string(p) + " of request " + std::to_string(r) + " (seq_len " +
                                   std::to_string(len) +
                                   ") converts to a cache slot that holds none of its tokens; a pinned position is "
                                   "one the request has written, or one that converts to no slot");
    }
  }
}

void check_scenario(const Scenario& s) {
  const int32_t B = s.model.block_size;
  if (B < 1) fail("/model/block_size", "must be >= 1");
  if (s.model.topk < 1) fail("/model/topk", "must be >= 1");
  check_batch(s.batch, s.generator.has_value());
  check_pinned_decodes(s.batch);
  const size_t num_reqs = s.batch.seq_lens.size();

  const int64_t needed = blocks_needed(s.batch, B);
  const int64_t pool = s.cache.num_blocks > 0 ? s.cache.num_blocks : needed + s.cache.spare_blocks;
  if (s.cache.num_blocks > 0 && s.cache.num_blocks < needed)
    fail("/cache/num_blocks", std::to_string(s.cache.num_blocks) + " blocks cannot hold the batch: it needs " +
                                  std::to_string(needed) + " blocks of " + std::to_string(B) + " tokens");
  // Converted indices and slot mappings are int32 (docs/semantics.md §3): every slot of the pool must fit.
  if (pool * B > INT32_MAX)
    fail(s.cache.num_blocks > 0 ? "/cache/num_blocks" : "/batch",
         "the pool of " + std::to_string(pool) + " blocks of " + std::to_string(B) +
             " tokens has slots past INT32_MAX (slots are int32)");
  check_pinned_table(s, pool);
  check_fixed_scales(s);

  for (size_t i = 0; i < s.gathers.size(); ++i) {
    const GatherCase& g = s.gathers[i];
    const std::string path = at("/gather", i);
    if (g.chunked_context_rows) {
      if (*g.chunked_context_rows < 1) fail(at(at(path, "chunked_context"), "chunk_rows"), "must be >= 1");
      continue;
    }
    const std::string wpath = at(path, "workspace_starts");
    if (g.workspace_starts.size() != num_reqs)
      fail(wpath, "has " + std::to_string(g.workspace_starts.size()) + " entries; the batch has " +
                      std::to_string(num_reqs) + " requests");
    for (size_t r = 0; r < num_reqs; ++r) {
      if (g.workspace_starts[r] < 0) fail(at(wpath, r), "must be >= 0");
      if (r > 0 && g.workspace_starts[r] < g.workspace_starts[r - 1])
        fail(at(wpath, r), "decreases (" + std::to_string(g.workspace_starts[r]) + " after " +
                               std::to_string(g.workspace_starts[r - 1]) + "): starts must be non-decreasing");
    }
    if (g.num_rows < g.workspace_starts.back())
      fail(at(path, "num_rows"), std::to_string(g.num_rows) + " is less than the last workspace start " +
                                     std::to_string(g.workspace_starts.back()));
    if (g.num_rows > INT32_MAX) fail(at(path, "num_rows"), "must fit int32");
    if (g.seq_starts) {
      const std::string spath = at(path, "seq_starts");
      if (g.seq_starts->size() != num_reqs)
        fail(spath, "has " + std::to_string(g.seq_starts->size()) + " entries; the batch has " +
                        std::to_string(num_reqs) + " requests");
      for (size_t r = 0; r < num_reqs; ++r)
        if ((*g.seq_starts)[r] < 0) fail(at(spath, r), "must be >= 0");
    }
  }

  const int32_t num_decodes = decode_requests(s.batch);
  if (s.attention.workspace_rows > 0) {
    // Every request with context needs at least one row of each chunk.
    int64_t with_context = 0;
    for (size_t r = 0; r < num_reqs; ++r) with_context += s.batch.seq_lens[r] > s.batch.query_lens[r];
    if (s.attention.workspace_rows < with_context)
      fail("/attention/workspace_rows", std::to_string(s.attention.workspace_rows) + " rows cannot hold one row for each of the " +
                                            std::to_string(with_context) + " requests with cached context");
  }
  const bool dcp_check = std::find(s.checks.begin(), s.checks.end(), CheckKind::kDcp) != s.checks.end();
  if (dcp_check && B % s.attention.dcp_interleave != 0)
    fail("/attention/dcp/interleave", "block_size " + std::to_string(B) + " is not a multiple of interleave " +
                                          std::to_string(s.attention.dcp_interleave) + " (required with DCP)");
  for (size_t i = 0; i < s.converts.size(); ++i) {
    const ConvertCase& c = s.converts[i];
    const std::string path = at("/convert", i);
    if (c.rows == ConvertRows::kDecode && num_decodes == 0)
      fail(at(path, "rows"), std::string("\"decode\" rows, but the batch has no decode tokens") +
                                 (s.generator ? " (generated batch: make num_decodes at least [1, ...])" : ""));
    if (c.prefill_workspace && c.rows == ConvertRows::kDecode)
      fail(at(path, "prefill_workspace"), "prefill_workspace needs prefill rows, but rows is \"decode\"");
    const InvalidMix& m = c.invalid;
    for (const auto& [key, f] : {std::pair<const char*, double>{"minus_one", m.minus_one}, {"int_min", m.int_min},
                                 {"large_positive", m.large_positive}, {"past_table", m.past_table},
                                 {"negative_block", m.negative_block}})
      if (!(f >= 0.0 && f <= 1.0)) fail(at(at(path, "invalid"), key), std::to_string(f) + " is not a fraction in [0, 1]");
    const double sum = m.minus_one + m.int_min + m.large_positive + m.past_table + m.negative_block;
    if (sum > 1.0 + 1e-12) fail(at(path, "invalid"), "the fractions sum to " + std::to_string(sum) + ", more than 1");
    check_pinned_convert(s, c, path);
    if (c.dcp_world_size < 1) fail(at(at(path, "dcp"), "world_size"), "must be >= 1");
    if (c.dcp_interleave < 1) fail(at(at(path, "dcp"), "interleave"), "must be >= 1");
    if (c.dcp_world_size > 1 && B % c.dcp_interleave != 0)
      fail(at(at(path, "dcp"), "interleave"), "block_size " + std::to_string(B) + " is not a multiple of interleave " +
                                                  std::to_string(c.dcp_interleave) + " (required with DCP)");
    // negative_block draws a logical block past the request's pages inside the table width: every
    // request must be narrower than the table (else the draw had nothing to pick).
    if (c.invalid.negative_block > 0.0 && s.block_table.extra_columns < 1)
      fail(at(at(path, "invalid"), "negative_block"),
           "needs block-table columns past every request's pages: set /block_table/extra_columns >= 1");
  }
  check_pinned_attention(s);
  check_sizes(s, pool);
}

std::string read_file_or_fail(const std::string& path) {
  std::string text, problem;
  if (read_input_file(path, "scenario file", &text, &problem) != InputFile::kRead) fail("", problem);
  return text;
}

}  // namespace

std::optional<ScenarioError> validate_scenario(const Scenario& s) {
  try {
    check_scenario(s);
  } catch (const Failure& f) {
    return ScenarioError{s.file, f.path, f.problem};
  }
  return std::nullopt;
}

std::variant<Scenario, ScenarioError> load_scenario(const std::string& path, std::optional<uint64_t> seed_override) {
  std::vector<std::pair<std::string, std::string>> more;  // the schema's further violations
  try {
    const std::string text = read_file_or_fail(path);
    JsonKeyAudit duplicates;  // duplicated keys, and nesting past 64 levels (no scenario needs it)
    json root;
    try {
      root = json::parse(text, [&](int depth, json::parse_event_t e, json& parsed) {
        return duplicates.on_event(depth, e, parsed);
      });
    } catch (const JsonTooDeep& e) {
      fail(e.path, "nesting deeper than " + std::to_string(e.max_depth) + " levels (not a scenario)");
    } catch (const json::parse_error& e) {
      // e.what() carries "parse error at line L, column C: ..."; add the byte offset too.
      std::string what = e.what();
      const std::string tag = "] ";
      const size_t cut = what.find(tag);
      if (cut != std::string::npos && what.rfind("[json.exception", 0) == 0) what = what.substr(cut + tag.size());
      fail("", "malformed JSON (byte " + std::to_string(e.byte) + "): " + what);
    } catch (const json::exception& e) {
      // Raised while parsing too, e.g. out_of_range.406 for a number past double's range.
      std::string what = e.what();
      const size_t cut = what.find("] ");
      if (cut != std::string::npos && what.rfind("[json.exception", 0) == 0) what = what.substr(cut + 2);
      fail("", "malformed JSON: " + what);
    }
    if (duplicates.found()) fail(*duplicates.found(), "key given twice in one object");
    reject_wrapping_integers(root, "");
    validate_against_schema(root, &more);
    Scenario s = read_scenario(root, seed_override);
    s.file = path;
    check_scenario(s);
    if (s.cache.num_blocks == 0) s.cache.num_blocks = blocks_needed(s.batch, s.model.block_size) + s.cache.spare_blocks;
    return s;
  } catch (const Failure& f) {
    return ScenarioError{path, f.path, f.problem, more};
  }
}

std::vector<std::string> list_scenario_files(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".json") files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace mla
