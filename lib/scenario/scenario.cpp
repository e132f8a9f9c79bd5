// Scenario files (docs/scenarios.md): parsing, per-field rules, generated batches, and the rules
// between fields. Parsing reports the first problem found, in document order within an object
// (unknown keys before anything else, so that a typo is named as a typo and not as a missing key).
#include "lib/scenario/scenario.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "lib/batch/batch_spec.h"
#include "lib/batch/rng.h"
#include "lib/scenario/input_file.h"
#include "lib/scenario/json_keys.h"
#include "lib/scenario/json_schema.h"

namespace mla {

using nlohmann::json;

// --- Enumerations -------------------------------------------------------------------------------

const char* to_string(PageOrder o) {
  switch (o) {
    case PageOrder::kContiguous: return "contiguous";
    case PageOrder::kShuffled: return "shuffled";
    case PageOrder::kReversed: return "reversed";
  }
  return "?";
}

std::optional<PageOrder> page_order_from_string(const std::string& s) {
  if (s == "contiguous") return PageOrder::kContiguous;
  if (s == "shuffled") return PageOrder::kShuffled;
  if (s == "reversed") return PageOrder::kReversed;
  return std::nullopt;
}

const char* to_string(CheckKind k) {
  switch (k) {
    case CheckKind::kPack: return "pack";
    case CheckKind::kGather: return "gather";
    case CheckKind::kConvert: return "convert";
    case CheckKind::kLayout: return "layout";
    case CheckKind::kSparseMqa: return "sparse_mqa";
    case CheckKind::kDenseMha: return "dense_mha";
    case CheckKind::kForward: return "forward";
    case CheckKind::kEquivalence: return "equivalence";
    case CheckKind::kDcp: return "dcp";
    case CheckKind::kDeterminism: return "determinism";
    case CheckKind::kDrift: return "drift";
  }
  return "?";
}

std::optional<CheckKind> check_kind_from_string(const std::string& s) {
  if (s == "pack") return CheckKind::kPack;
  if (s == "gather") return CheckKind::kGather;
  if (s == "convert") return CheckKind::kConvert;
  if (s == "layout") return CheckKind::kLayout;
  if (s == "sparse_mqa") return CheckKind::kSparseMqa;
  if (s == "dense_mha") return CheckKind::kDenseMha;
  if (s == "forward") return CheckKind::kForward;
  if (s == "equivalence") return CheckKind::kEquivalence;
  if (s == "dcp") return CheckKind::kDcp;
  if (s == "determinism") return CheckKind::kDeterminism;
  if (s == "drift") return CheckKind::kDrift;
  return std::nullopt;
}

bool is_attention_check(CheckKind k) {
  return k == CheckKind::kSparseMqa || k == CheckKind::kDenseMha || k == CheckKind::kForward ||
         k == CheckKind::kEquivalence || k == CheckKind::kDcp || k == CheckKind::kDeterminism ||
         k == CheckKind::kDrift;
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
  if (json_path.empty()) return file + ": " + problem;
  return file + ": at " + json_path + ": " + problem;
}

namespace {

// --- JSON paths and parse failures ----------------------------------------------------------------

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

std::string describe_type(const json& j) { return describe_json_value(j); }

// --- Typed readers: each fails with the value's path when the type or range is wrong ---------------

void expect_object(const json& j, const std::string& path) {
  if (!j.is_object()) fail(path, "expected an object, got " + describe_type(j));
}

// Every key of `obj` must be one of `allowed` (typos must not pass silently).
void reject_unknown_keys(const json& obj, const std::string& path, std::initializer_list<const char*> allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    bool known = false;
    std::string list;
    for (const char* a : allowed) {
      if (key == a) known = true;
      list += list.empty() ? "" : ", ";
      list += a;
    }
    if (known) continue;
    const std::string closest = closest_spelling(key, std::vector<std::string>(allowed.begin(), allowed.end()));
    std::string problem = "unknown key \"" + key + "\"";
    if (!closest.empty()) problem += " (did you mean \"" + closest + "\"?)";
    problem += "; allowed here: " + list;
    fail(at(path, key), problem);
  }
}

const json* find(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& require(const json& obj, const std::string& path, const char* key) {
  const json* v = find(obj, key);
  if (!v) fail(at(path, key), std::string("missing required key \"") + key + "\"");
  return *v;
}

int64_t read_int(const json& j, const std::string& path, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) fail(path, "expected an integer, got " + describe_type(j));
  // Non-negative literals are stored unsigned and may exceed INT64_MAX.
  const bool too_big = j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t v = too_big ? INT64_MAX : j.get<int64_t>();
  if (too_big || v < lo || v > hi) {
    std::string range;
    if (hi == INT32_MAX || hi == INT64_MAX) range = "must be >= " + std::to_string(lo);
    else range = "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    fail(path, show(j) + " is out of range: " + range);
  }
  return v;
}

int32_t read_int32(const json& j, const std::string& path, int64_t lo, int64_t hi = INT32_MAX) {
  return static_cast<int32_t>(read_int(j, path, lo, hi));
}

uint64_t read_uint64(const json& j, const std::string& path) {
  if (!j.is_number_integer()) fail(path, "expected a non-negative integer, got " + describe_type(j));
  if (!j.is_number_unsigned()) fail(path, show(j) + " is out of range: must be >= 0");
  return j.get<uint64_t>();
}

double read_number(const json& j, const std::string& path) {
  if (!j.is_number()) fail(path, "expected a number, got " + describe_type(j));
  return j.get<double>();
}

std::string read_string(const json& j, const std::string& path) {
  if (!j.is_string()) fail(path, "expected a string, got " + describe_type(j));
  return j.get<std::string>();
}

bool read_bool(const json& j, const std::string& path) {
  if (!j.is_boolean()) fail(path, "expected true or false, got " + describe_type(j));
  return j.get<bool>();
}

const json& expect_array(const json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "expected an array, got " + describe_type(j));
  return j;
}

std::vector<int32_t> read_int32_list(const json& j, const std::string& path, int64_t lo) {
  expect_array(j, path);
  std::vector<int32_t> out;
  for (size_t i = 0; i < j.size(); ++i) out.push_back(read_int32(j[i], at(path, i), lo));
  return out;
}

// [min, max], both in [lo, hi], min <= max.
std::pair<int32_t, int32_t> read_range(const json& j, const std::string& path, int64_t lo, int64_t hi = INT32_MAX) {
  if (!j.is_array() || j.size() != 2) fail(path, "expected [min, max], got " + show(j));
  const int32_t mn = read_int32(j[0], at(path, 0), lo, hi);
  const int32_t mx = read_int32(j[1], at(path, 1), lo, hi);
  if (mn > mx) fail(path, "min " + std::to_string(mn) + " > max " + std::to_string(mx));
  return {mn, mx};
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  });
}

std::string read_name(const json& obj, const std::string& path) {
  const std::string p = at(path, "name");
  const std::string name = read_string(require(obj, path, "name"), p);
  if (!valid_name(name)) fail(p, "\"" + name + "\" is not a valid name: use letters, digits, '_', '.', '-'");
  return name;
}

// --- Sections -----------------------------------------------------------------------------------

ModelDims read_model(const json& j, const std::string& path) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"heads", "topk", "block_size", "scale"});
  ModelDims m;
  if (auto* v = find(j, "heads")) m.heads = read_int32(*v, at(path, "heads"), 1, 1024);
  if (auto* v = find(j, "topk")) m.topk = read_int32(*v, at(path, "topk"), 1);
  if (auto* v = find(j, "block_size")) m.block_size = read_int32(*v, at(path, "block_size"), 1);
  if (auto* v = find(j, "scale")) {
    m.scale = read_number(*v, at(path, "scale"));
    if (!(m.scale > 0.0) || !std::isfinite(m.scale)) fail(at(path, "scale"), show(*v) + " must be a finite number > 0");
  }
  return m;
}

CacheConfig read_cache(const json& j, const std::string& path) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"dtype", "num_blocks", "spare_blocks", "page_order", "page_padding_bytes"});
  CacheConfig c;
  if (auto* v = find(j, "dtype")) {
    c.dtype = read_string(*v, at(path, "dtype"));
    static const char* const kDtypes[] = {"auto", "bf16", "fp8", "fp8_e4m3", "fp8_ds_mla"};
    if (std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const char* d) { return c.dtype == d; }) ==
        std::end(kDtypes))
      fail(at(path, "dtype"), "\"" + c.dtype + "\" is not a cache dtype: use auto, bf16, fp8, fp8_e4m3 or fp8_ds_mla");
  }
  if (auto* v = find(j, "num_blocks")) c.num_blocks = read_int32(*v, at(path, "num_blocks"), 0);
  if (auto* v = find(j, "spare_blocks")) c.spare_blocks = read_int32(*v, at(path, "spare_blocks"), 0);
  if (auto* v = find(j, "page_order")) {
    const std::string s = read_string(*v, at(path, "page_order"));
    auto o = page_order_from_string(s);
    if (!o) fail(at(path, "page_order"), "\"" + s + "\" is not a page order: use contiguous, shuffled or reversed");
    c.page_order = *o;
  }
  if (auto* v = find(j, "page_padding_bytes")) {
    c.page_padding_bytes = read_int32(*v, at(path, "page_padding_bytes"), 0);
    if (c.page_padding_bytes % 16 != 0)
      fail(at(path, "page_padding_bytes"), std::to_string(c.page_padding_bytes) +
                                               " is not a multiple of 16 (entries must stay 16-byte aligned)");
  }
  return c;
}

BlockTableConfig read_block_table(const json& j, const std::string& path) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"extra_columns", "stride_padding"});
  BlockTableConfig b;
  if (auto* v = find(j, "extra_columns")) b.extra_columns = read_int32(*v, at(path, "extra_columns"), 0);
  if (auto* v = find(j, "stride_padding")) b.stride_padding = read_int32(*v, at(path, "stride_padding"), 0);
  return b;
}

BatchGenerator read_generator(const json& j, const std::string& path) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"num_requests", "num_decodes", "decode_query_len", "seq_len", "prefill_query_len",
                                "decode_threshold"});
  BatchGenerator g;
  std::tie(g.num_requests_min, g.num_requests_max) =
      read_range(require(j, path, "num_requests"), at(path, "num_requests"), 1, 65536);
  if (auto* v = find(j, "num_decodes")) std::tie(g.num_decodes_min, g.num_decodes_max) = read_range(*v, at(path, "num_decodes"), 0);
  if (auto* v = find(j, "decode_query_len")) g.decode_query_len = read_int32(*v, at(path, "decode_query_len"), 1);
  std::tie(g.seq_len_min, g.seq_len_max) = read_range(require(j, path, "seq_len"), at(path, "seq_len"), 0);
  std::tie(g.prefill_query_len_min, g.prefill_query_len_max) =
      read_range(require(j, path, "prefill_query_len"), at(path, "prefill_query_len"), 0);
  g.decode_threshold = g.decode_query_len;
  if (auto* v = find(j, "decode_threshold")) {
    g.decode_threshold = read_int32(*v, at(path, "decode_threshold"), 1);
    if (g.decode_threshold < g.decode_query_len)
      fail(at(path, "decode_threshold"), "decode_threshold " + std::to_string(g.decode_threshold) +
                                             " < decode_query_len " + std::to_string(g.decode_query_len) +
                                             ": the generated decodes would not be decodes");
  }
  if (g.num_decodes_max > 0 && g.seq_len_min < g.decode_query_len)
    fail(at(path, "seq_len"), "min seq_len " + std::to_string(g.seq_len_min) + " < decode_query_len " +
                                  std::to_string(g.decode_query_len) + " while decodes can be generated");
  return g;
}

// Reads the batch; a generated batch is resolved with `seed`.
void read_batch(const json& j, const std::string& path, uint64_t seed, Scenario& s) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"seq_lens", "query_lens", "decode_threshold", "generate"});
  if (const json* gen = find(j, "generate")) {
    for (const char* explicit_key : {"seq_lens", "query_lens", "decode_threshold"})
      if (find(j, explicit_key))
        fail(at(path, explicit_key), std::string("\"") + explicit_key +
                                         "\" cannot be combined with \"generate\" (a batch is explicit or generated)");
    s.generator = read_generator(*gen, at(path, "generate"));
    s.batch = generate_batch(*s.generator, seed);
    return;
  }
  s.batch.seq_lens = read_int32_list(require(j, path, "seq_lens"), at(path, "seq_lens"), 0);
  s.batch.query_lens = read_int32_list(require(j, path, "query_lens"), at(path, "query_lens"), 0);
  if (auto* v = find(j, "decode_threshold")) s.batch.decode_threshold = read_int32(*v, at(path, "decode_threshold"), 1);
}

GatherCase read_gather(const json& j, const std::string& path) {
  expect_object(j, path);
  GatherCase g;
  if (find(j, "chunked_context")) {
    reject_unknown_keys(j, path, {"name", "chunked_context"});
    g.name = read_name(j, path);
    const std::string cpath = at(path, "chunked_context");
    const json& c = *find(j, "chunked_context");
    expect_object(c, cpath);
    reject_unknown_keys(c, cpath, {"chunk_rows"});
    g.chunked_context_rows = read_int32(require(c, cpath, "chunk_rows"), at(cpath, "chunk_rows"), 1);
    return g;
  }
  reject_unknown_keys(j, path, {"name", "workspace_starts", "seq_starts", "num_rows", "chunked_context"});
  g.name = read_name(j, path);
  g.workspace_starts = read_int32_list(require(j, path, "workspace_starts"), at(path, "workspace_starts"), 0);
  if (auto* v = find(j, "seq_starts")) g.seq_starts = read_int32_list(*v, at(path, "seq_starts"), 0);
  g.num_rows = read_int32(require(j, path, "num_rows"), at(path, "num_rows"), 0);
  return g;
}

ConvertCase read_convert(const json& j, const std::string& path) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"name", "rows", "invalid", "prefill_workspace", "dcp"});
  ConvertCase c;
  c.name = read_name(j, path);
  if (auto* v = find(j, "rows")) {
    const std::string rows = read_string(*v, at(path, "rows"));
    if (rows == "decode") c.rows = ConvertRows::kDecode;
    else if (rows == "all") c.rows = ConvertRows::kAll;
    else fail(at(path, "rows"), "\"" + rows + "\" is not a row selection: use \"decode\" or \"all\"");
  }
  if (auto* v = find(j, "invalid")) {
    const std::string ipath = at(path, "invalid");
    expect_object(*v, ipath);
    reject_unknown_keys(*v, ipath, {"minus_one", "int_min", "large_positive", "past_table", "negative_block"});
    const std::pair<const char*, double*> fields[] = {{"minus_one", &c.invalid.minus_one},
                                                      {"int_min", &c.invalid.int_min},
                                                      {"large_positive", &c.invalid.large_positive},
                                                      {"past_table", &c.invalid.past_table},
                                                      {"negative_block", &c.invalid.negative_block}};
    double sum = 0.0;
    for (const auto& [key, dst] : fields) {
      if (const json* f = find(*v, key)) {
        *dst = read_number(*f, at(ipath, key));
        if (!(*dst >= 0.0 && *dst <= 1.0)) fail(at(ipath, key), show(*f) + " is not a fraction in [0, 1]");
      }
      sum += *dst;
    }
    if (sum > 1.0 + 1e-12) fail(ipath, "the fractions sum to " + std::to_string(sum) + ", more than 1");
  }
  if (auto* v = find(j, "prefill_workspace")) {
    c.prefill_workspace = read_bool(*v, at(path, "prefill_workspace"));
    if (c.prefill_workspace && c.rows == ConvertRows::kDecode)
      fail(at(path, "prefill_workspace"), "prefill_workspace needs prefill rows, but rows is \"decode\"");
  }
  if (auto* v = find(j, "dcp")) {
    const std::string dpath = at(path, "dcp");
    expect_object(*v, dpath);
    reject_unknown_keys(*v, dpath, {"world_size", "interleave"});
    if (auto* w = find(*v, "world_size")) c.dcp_world_size = read_int32(*w, at(dpath, "world_size"), 1, 1024);
    if (auto* w = find(*v, "interleave")) c.dcp_interleave = read_int32(*w, at(dpath, "interleave"), 1);
  }
  return c;
}

Tolerance read_tolerance(const json& j, const std::string& path, Tolerance t) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"abs", "rel", "cos"});
  for (const char* key : {"abs", "rel", "cos"}) {
    const json* v = find(j, key);
    if (!v) continue;
    const double x = read_number(*v, at(path, key));
    if (!std::isfinite(x) || (x < 0 && std::string(key) != "cos"))
      fail(at(path, key), show(*v) + " must be a finite number >= 0" +
                              (std::string(key) == "cos" ? " (or negative: not checked)" : ""));
    (key[0] == 'a' ? t.abs : key[0] == 'r' ? t.rel : t.cos) = x;
  }
  return t;
}

AttentionConfig read_attention(const json& j, const std::string& path) {
  expect_object(j, path);
  reject_unknown_keys(j, path, {"force_sparse", "workspace_rows", "dcp", "drift", "tolerances"});
  AttentionConfig a;
  if (auto* v = find(j, "force_sparse")) a.force_sparse = read_bool(*v, at(path, "force_sparse"));
  if (auto* v = find(j, "workspace_rows")) a.workspace_rows = read_int32(*v, at(path, "workspace_rows"), 0);
  if (auto* v = find(j, "dcp")) {
    const std::string dpath = at(path, "dcp");
    expect_object(*v, dpath);
    reject_unknown_keys(*v, dpath, {"world_size", "interleave"});
    if (auto* w = find(*v, "world_size")) a.dcp_world_size = read_int32(*w, at(dpath, "world_size"), 1, 1024);
    if (auto* w = find(*v, "interleave")) a.dcp_interleave = read_int32(*w, at(dpath, "interleave"), 1);
  }
  if (auto* v = find(j, "drift")) {
    const std::string dpath = at(path, "drift");
    expect_object(*v, dpath);
    reject_unknown_keys(*v, dpath, {"layers"});
    if (auto* w = find(*v, "layers")) a.drift_layers = read_int32(*w, at(dpath, "layers"), 1, kMaxDriftLayers);
  }
  if (auto* v = find(j, "tolerances")) {
    const std::string tpath = at(path, "tolerances");
    expect_object(*v, tpath);
    AttentionTolerances& t = a.tolerances;
    reject_unknown_keys(*v, tpath, {"sparse_mqa", "sparse_lse", "dense_mha", "dense_lse", "forward",
                                    "equivalence_from_cache", "equivalence_bf16", "dcp"});
    const std::pair<const char*, Tolerance*> fields[] = {
        {"sparse_mqa", &t.sparse_mqa}, {"sparse_lse", &t.sparse_lse}, {"dense_mha", &t.dense_mha},
        {"dense_lse", &t.dense_lse},   {"forward", &t.forward},       {"equivalence_from_cache", &t.equivalence_from_cache},
        {"equivalence_bf16", &t.equivalence_bf16}, {"dcp", &t.dcp}};
    for (const auto& [key, field] : fields)
      if (auto* w = find(*v, key)) *field = read_tolerance(*w, at(tpath, key), *field);
  }
  return a;
}

std::vector<CheckKind> read_checks(const json& j, const std::string& path) {
  expect_array(j, path);
  if (j.empty()) fail(path, "no checks: a scenario that checks nothing cannot fail (omit the key for all four)");
  std::vector<CheckKind> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string name = read_string(j[i], at(path, i));
    auto k = check_kind_from_string(name);
    if (!k)
      fail(at(path, i), "\"" + name + "\" is not a check: use one of " + check_kind_names());
    if (std::find(out.begin(), out.end(), *k) != out.end()) fail(at(path, i), "\"" + name + "\" is listed twice");
    out.push_back(*k);
  }
  return out;
}

template <typename Case>
void reject_duplicate_names(const std::vector<Case>& cases, const std::string& path) {
  std::set<std::string> seen;
  for (size_t i = 0; i < cases.size(); ++i)
    if (!seen.insert(cases[i].name).second) fail(at(at(path, i), "name"), "\"" + cases[i].name + "\" is used twice");
}

Scenario read_scenario(const json& root, std::optional<uint64_t> seed_override) {
  expect_object(root, "");
  reject_unknown_keys(root, "", {"schema", "name", "description", "tags", "seed", "model", "cache", "block_table",
                                 "batch", "gather", "convert", "checks", "attention"});
  Scenario s;
  if (auto* v = find(root, "schema")) {
    const std::string schema = read_string(*v, "/schema");
    if (schema != kScenarioSchema)
      fail("/schema", "\"" + schema + "\" is not supported: this harness reads \"" + kScenarioSchema + "\"");
  }
  s.name = read_name(root, "");
  if (auto* v = find(root, "description")) s.description = read_string(*v, "/description");
  if (auto* v = find(root, "tags")) {
    expect_array(*v, "/tags");
    for (size_t i = 0; i < v->size(); ++i) s.tags.push_back(read_string((*v)[i], at("/tags", i)));
  }
  if (auto* v = find(root, "seed")) s.seed = read_uint64(*v, "/seed");
  if (seed_override) s.seed = *seed_override;
  if (auto* v = find(root, "model")) s.model = read_model(*v, "/model");
  if (auto* v = find(root, "cache")) s.cache = read_cache(*v, "/cache");
  if (auto* v = find(root, "block_table")) s.block_table = read_block_table(*v, "/block_table");
  read_batch(require(root, "", "batch"), "/batch", s.seed, s);
  if (auto* v = find(root, "gather")) {
    expect_array(*v, "/gather");
    for (size_t i = 0; i < v->size(); ++i) s.gathers.push_back(read_gather((*v)[i], at("/gather", i)));
    reject_duplicate_names(s.gathers, "/gather");
  }
  if (auto* v = find(root, "convert")) {
    expect_array(*v, "/convert");
    for (size_t i = 0; i < v->size(); ++i) s.converts.push_back(read_convert((*v)[i], at("/convert", i)));
    reject_duplicate_names(s.converts, "/convert");
  }
  if (auto* v = find(root, "attention")) s.attention = read_attention(*v, "/attention");
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
  int64_t widest = 0, tokens = 0;
  for (size_t r = 0; r < s.batch.seq_lens.size(); ++r) {
    widest = std::max<int64_t>(widest, (int64_t{s.batch.seq_lens[r]} + B - 1) / B);
    tokens += s.batch.query_lens[r];
  }
  const int64_t width = widest + s.block_table.extra_columns;
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

void check_scenario(const Scenario& s) {
  const int32_t B = s.model.block_size;
  if (B < 1) fail("/model/block_size", "must be >= 1");
  if (s.model.topk < 1) fail("/model/topk", "must be >= 1");
  check_batch(s.batch, s.generator.has_value());
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

  const int32_t num_decodes = count_decodes(s.batch.query_lens, s.batch.decode_threshold);
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
    Scenario s = read_scenario(root, seed_override);
    s.file = path;
    check_scenario(s);
    if (s.cache.num_blocks == 0) s.cache.num_blocks = blocks_needed(s.batch, s.model.block_size) + s.cache.spare_blocks;
    return s;
  } catch (const Failure& f) {
    return ScenarioError{path, f.path, f.problem};
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
