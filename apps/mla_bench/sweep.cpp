#include "apps/mla_bench/sweep.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "lib/batch/batch_spec.h"
#include "lib/scenario/input_file.h"
#include "lib/scenario/json_keys.h"
#include "lib/scenario/json_schema.h"

namespace mla::bench {
namespace {

// Generated at configure time from scenarios/sweeps/*.json: {"name", R"(...)"} pairs.
const std::map<std::string, std::string>& builtin_sweeps() {
  static const std::map<std::string, std::string> sweeps = {
#include "builtin_sweeps.inc"
  };
  return sweeps;
}

using json = nlohmann::json;

// Generated at configure time from scenarios/schema/sweep.schema.json: the schema as a raw string.
const JsonSchema& sweep_schema() {
  static const JsonSchema schema(
#include "sweep_schema.inc"
      , "scenarios/schema/sweep.schema.json (built in)");
  return schema;
}

Status err(const std::string& source, const std::string& path, const std::string& problem) {
  return Status::error(located_problem(source, path, problem));
}

// Limits of the rules between fields (the schema bounds each field on its own: the same numbers).
// Sizes are bounded so that every slot and output index fits int32 (the kernels' index type).
constexpr int64_t kMaxTokens = int64_t{1} << 24;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A list the schema has checked: every element an integer within T's range.
template <typename T>
std::vector<T> ints(const json& obj, const char* key, std::vector<T> absent = {}) {
  if (!obj.contains(key)) return absent;
  std::vector<T> out;
  for (const json& v : obj.at(key)) out.push_back(static_cast<T>(v.get<int64_t>()));
  return out;
}

std::vector<bool> bools(const json& obj, const char* key, std::vector<bool> absent) {
  if (!obj.contains(key)) return absent;
  std::vector<bool> out;
  for (const json& v : obj.at(key)) out.push_back(v.get<bool>());
  return out;
}

template <typename T>
T integer(const json& obj, const char* key, T absent) {
  return obj.contains(key) ? static_cast<T>(obj.at(key).get<int64_t>()) : absent;
}

// Sparse-MQA shape groups (attention.sparse_mqa and dcp): each group's cartesian product,
// duplicates removed, in file order.
Status parse_sparse_shapes(const json& groups, const std::string& path, int32_t block_size, const std::string& source,
                           std::vector<SparseMqaShape>* out) {
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t, int64_t, int32_t>> seen;
  for (size_t i = 0; i < groups.size(); ++i) {
    const json& g = groups[i];
    const std::string gp = path + "/shapes/" + std::to_string(i);
    for (int32_t b : ints<int32_t>(g, "batch"))
      for (int32_t q : ints<int32_t>(g, "query_tokens"))
        for (int32_t h : ints<int32_t>(g, "heads"))
          for (int32_t k : ints<int32_t>(g, "topk"))
            for (int64_t l : ints<int64_t>(g, "seq_len"))
              for (int32_t sp : ints<int32_t>(g, "splits", {0})) {
              if (q > l) {
                return err(source, gp + "/query_tokens",
                           "query_tokens " + std::to_string(q) + " > seq_len " + std::to_string(l));
              }
              // Slots (and converted indices) are int32: the whole pool must fit.
              if (int64_t{b} * (ceil_div(l, block_size) + 1) * block_size > INT32_MAX) {
                return err(source, gp, "batch " + std::to_string(b) + " x seq_len " + std::to_string(l) +
                                           " has cache slots past INT32_MAX");
              }
              if (int64_t{b} * q * k > INT32_MAX) {
                return err(source, gp, "batch x query_tokens x topk exceeds INT32_MAX indices");
              }
              // A split count past the top-k's 64-column blocks is clamped by the plan: the same shape.
              const int32_t splits = std::min<int32_t>(sp, static_cast<int32_t>(ceil_div(k, 64)));
              if (!seen.insert({b, q, h, k, l, splits}).second) continue;
              out->push_back({b, q, h, k, l, splits});
            }
  }
  return Status();
}

Status parse_sparse(const json& sp, const std::string& source, Sweep* s) {
  s->sparse_block_size = integer(sp, "block_size", s->sparse_block_size);
  return parse_sparse_shapes(sp.at("shapes"), "/attention/sparse_mqa", s->sparse_block_size, source, &s->sparse_shapes);
}

Status parse_dcp(const json& d, const std::string& source, Sweep* s) {
  s->dcp_block_size = integer(d, "block_size", s->dcp_block_size);
  s->dcp_interleave = integer(d, "interleave", s->dcp_interleave);
  if (s->dcp_block_size % s->dcp_interleave != 0)
    return err(source, "/dcp/interleave", "interleave " + std::to_string(s->dcp_interleave) + " does not divide block_size " +
                                              std::to_string(s->dcp_block_size) + " (docs/semantics.md §3)");
  s->dcp_ranks = ints<int32_t>(d, "ranks");
  std::sort(s->dcp_ranks.begin(), s->dcp_ranks.end());
  s->dcp_ranks.erase(std::unique(s->dcp_ranks.begin(), s->dcp_ranks.end()), s->dcp_ranks.end());
  return parse_sparse_shapes(d.at("shapes"), "/dcp/shapes", s->dcp_block_size, source, &s->dcp_shapes);
}

Status parse_dense(const json& d, const std::string& source, Sweep* s) {
  const std::string path = "/attention/dense_mha";
  std::set<std::tuple<int32_t, int64_t, int32_t, int64_t, bool>> seen;
  const json& groups = d.at("shapes");
  for (size_t i = 0; i < groups.size(); ++i) {
    const json& g = groups[i];
    const std::string gp = path + "/shapes/" + std::to_string(i);
    const std::vector<int64_t> keys = ints<int64_t>(g, "keys_per_request", {0});  // 0: keys = the request's queries
    for (int32_t h : ints<int32_t>(g, "heads"))
      for (int64_t n : ints<int64_t>(g, "tokens"))
        for (int32_t r : ints<int32_t>(g, "requests"))
          for (size_t ki = 0; ki < keys.size(); ++ki)
            for (bool c : bools(g, "causal", {true})) {
              const int64_t k = keys[ki];
              if (r > n) {
                return err(source, gp + "/requests",
                           std::to_string(r) + " requests cannot share " + std::to_string(n) + " tokens");
              }
              if (k > 0) {
                const std::string kp = gp + "/keys_per_request/" + std::to_string(ki);
                const int64_t longest = ceil_div(n, r);  // the first requests of equal_split
                if (c && k < longest) {
                  return err(source, kp,
                             "keys_per_request " + std::to_string(k) + " is less than the " + std::to_string(longest) +
                                 " queries of a request (" + std::to_string(n) + " tokens in " + std::to_string(r) +
                                 " requests): bottom-right causal attention needs keys >= queries (\"causal\": "
                                 "[false] measures it unmasked)");
                }
                if (k * r > kMaxTokens) {  // cu_seqlens_k and the key rows are int32-indexed
                  return err(source, kp,
                             std::to_string(r) + " requests x keys_per_request " + std::to_string(k) + " = " +
                                 std::to_string(k * r) + " keys, more than " + std::to_string(kMaxTokens));
                }
              }
              if (!seen.insert({h, n, r, k, c}).second) continue;
              DenseMhaShape shape;
              shape.heads = h;
              shape.tokens = n;
              shape.requests = r;
              shape.keys_per_request = k;
              shape.causal = c;
              s->dense_shapes.push_back(shape);
            }
  }
  return Status();
}

Status parse_forward(const json& f, const std::string& source, Sweep* s) {
  const std::string path = "/attention/forward";
  s->forward_block_size = integer(f, "block_size", s->forward_block_size);
  std::set<std::tuple<std::string, int32_t, int32_t>> seen;
  std::set<std::string> names;  // a name given twice would lose one batch's rows (same benchmark names)
  const json& batches = f.at("batches");
  for (size_t i = 0; i < batches.size(); ++i) {
    const json& b = batches[i];
    const std::string bp = path + "/batches/" + std::to_string(i);
    ForwardBatch fb;
    fb.name = b.at("name").get<std::string>();
    if (!names.insert(fb.name).second) {
      return err(source, bp + "/name", "\"" + fb.name + "\" names an earlier batch too (names are part of benchmark names)");
    }
    fb.decode_threshold = integer(b, "decode_threshold", fb.decode_threshold);
    const bool explicit_lists = b.contains("seq_lens") || b.contains("query_lens");
    if (explicit_lists == b.contains("requests")) {
      return err(source, bp, "give either \"seq_lens\" and \"query_lens\" or \"requests\" (groups of "
                             "{\"count\", \"seq_len\", \"query_len\"})");
    }
    if (explicit_lists) {
      for (const char* key : {"seq_lens", "query_lens"}) {
        if (!b.contains(key)) return err(source, bp + "/" + key, std::string("missing required key \"") + key + "\"");
      }
      fb.seq_lens = ints<int32_t>(b, "seq_lens");
      fb.query_lens = ints<int32_t>(b, "query_lens");
    } else {
      for (const json& g : b.at("requests")) {
        const auto count = static_cast<size_t>(g.at("count").get<int64_t>());
        fb.seq_lens.insert(fb.seq_lens.end(), count, static_cast<int32_t>(g.at("seq_len").get<int64_t>()));
        fb.query_lens.insert(fb.query_lens.end(), count, static_cast<int32_t>(g.at("query_len").get<int64_t>()));
      }
    }
    if (fb.seq_lens.empty()) return err(source, bp, "the batch needs at least one request");
    if (fb.seq_lens.size() != fb.query_lens.size()) {
      return err(source, bp + "/query_lens", "has " + std::to_string(fb.query_lens.size()) +
                                                  " entries but seq_lens has " + std::to_string(fb.seq_lens.size()));
    }
    int64_t pages = 0, tokens = 0;
    for (size_t r = 0; r < fb.seq_lens.size(); ++r) {
      if (fb.query_lens[r] > fb.seq_lens[r]) {
        return err(source, bp, "request " + std::to_string(r) + ": query_len " + std::to_string(fb.query_lens[r]) +
                                   " > seq_len " + std::to_string(fb.seq_lens[r]));
      }
      pages += ceil_div(fb.seq_lens[r], s->forward_block_size);
      tokens += fb.query_lens[r];
    }
    if ((pages + 8) * s->forward_block_size > INT32_MAX) {
      return err(source, bp, "the batch has cache slots past INT32_MAX");
    }
    if (tokens == 0) return err(source, bp, "the batch has no new token (every query_len is 0)");
    for (int32_t h : ints<int32_t>(b, "heads"))
      for (int32_t k : ints<int32_t>(b, "topk")) {
        if (!seen.insert({fb.name, h, k}).second) continue;
        ForwardBatch v = fb;
        v.heads = h;
        v.topk = k;
        s->forward_batches.push_back(std::move(v));
      }
  }
  return Status();
}

// The route comparison: the decodes, then `prefills` requests of P new tokens each; per topk and
// heads every prefill length (the explicit ones and the multiples of topk), ascending.
Status parse_routes(const json& r, const std::string& source, Sweep* s) {
  const std::string path = "/attention/routes";
  s->routes_block_size = integer(r, "block_size", s->routes_block_size);
  ForwardBatch base;
  base.decode_threshold = integer(r, "decode_threshold", base.decode_threshold);
  for (const json& g : r.at("decodes")) {
    const auto count = static_cast<size_t>(g.at("count").get<int64_t>());
    base.seq_lens.insert(base.seq_lens.end(), count, static_cast<int32_t>(g.at("seq_len").get<int64_t>()));
    base.query_lens.insert(base.query_lens.end(), count, static_cast<int32_t>(g.at("query_len").get<int64_t>()));
  }
  const auto decodes = static_cast<int32_t>(base.seq_lens.size());
  for (int32_t i = 0; i < decodes; ++i) {
    if (base.query_lens[static_cast<size_t>(i)] > base.seq_lens[static_cast<size_t>(i)]) {
      return err(source, path + "/decodes", "request " + std::to_string(i) + ": query_len " +
                                                std::to_string(base.query_lens[static_cast<size_t>(i)]) + " > seq_len " +
                                                std::to_string(base.seq_lens[static_cast<size_t>(i)]));
    }
  }
  if (count_decodes(base.query_lens, base.decode_threshold) != decodes) {
    return err(source, path + "/decodes",
               "not every request is a decode: decodes have one query length, at most decode_threshold " +
                   std::to_string(base.decode_threshold));
  }
  const auto prefills = integer<int32_t>(r, "prefills", 1);
  std::vector<int64_t> lens = ints<int64_t>(r, "prefill_lens");
  const std::vector<int64_t> multiples = ints<int64_t>(r, "prefill_topk_multiples");
  for (int32_t k : ints<int32_t>(r, "topk")) {
    std::vector<int64_t> ks = lens;
    for (int64_t m : multiples) ks.push_back(m * k);
    std::sort(ks.begin(), ks.end());
    ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
    for (int32_t h : ints<int32_t>(r, "heads")) {
      for (int64_t p : ks) {
        if (p > kMaxTokens) {
          return err(source, path, "prefill length " + std::to_string(p) + " (K " + std::to_string(k) +
                                       ") is more than " + std::to_string(kMaxTokens) + " tokens");
        }
        ForwardBatch fb = base;
        fb.name = "routes";
        fb.heads = h;
        fb.topk = k;
        fb.seq_lens.insert(fb.seq_lens.end(), static_cast<size_t>(prefills), static_cast<int32_t>(p));
        fb.query_lens.insert(fb.query_lens.end(), static_cast<size_t>(prefills), static_cast<int32_t>(p));
        // The split must see the prefills as prefills (a prefill of the decodes' query length, or
        // one within the threshold with no decodes before it, would be split as a decode).
        if (count_decodes(fb.query_lens, fb.decode_threshold) != decodes) {
          return err(source, path, "a prefill of " + std::to_string(p) + " tokens would be split as a decode (decode " +
                                       "threshold " + std::to_string(fb.decode_threshold) +
                                       "): choose prefill lengths that differ from the decodes' query length");
        }
        int64_t pages = 0, tokens = 0;
        for (size_t i = 0; i < fb.seq_lens.size(); ++i) {
          pages += ceil_div(fb.seq_lens[i], s->routes_block_size);
          tokens += fb.query_lens[i];
        }
        if ((pages + 8) * s->routes_block_size > INT32_MAX) {
          return err(source, path, "prefill length " + std::to_string(p) + ": the batch has cache slots past INT32_MAX");
        }
        if (tokens * k > INT32_MAX) {
          return err(source, path, "prefill length " + std::to_string(p) + ": tokens x topk exceeds INT32_MAX indices");
        }
        for (const bool sparse : {false, true}) {
          if (!sparse && p > k) continue;  // the prefills would not go dense: no dense route to time
          RouteShape rs;
          rs.prefill_len = static_cast<int32_t>(p);
          rs.prefills = prefills;
          rs.batch = fb;
          rs.batch.force_sparse = sparse;
          s->route_shapes.push_back(std::move(rs));
        }
      }
    }
  }
  return Status();
}

}  // namespace

std::vector<std::string> builtin_sweep_names() {
  std::vector<std::string> names;
  for (const auto& kv : builtin_sweeps()) names.push_back(kv.first);
  return names;
}

Status parse_sweep(const std::string& json_text, const std::string& source, Sweep* out) {
  json doc;
  JsonKeyAudit keys;  // duplicated keys, nesting past 64 levels
  try {
    doc = json::parse(json_text, [&](int depth, json::parse_event_t e, json& parsed) {
      return keys.on_event(depth, e, parsed);
    });
  } catch (const JsonTooDeep& e) {
    return err(source, e.path, "nesting deeper than " + std::to_string(e.max_depth) + " levels");
  } catch (const json::parse_error& e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  } catch (const json::exception& e) {  // raised while parsing too, e.g. a number past double's range
    return Status::error(source + ": not valid JSON: " + e.what());
  }
  if (keys.found()) return err(source, *keys.found(), "key given twice in one object");
  // The structure, types and ranges: the schema. Every violation is listed, one per line.
  const std::vector<SchemaViolation> violations = sweep_schema().validate(doc);
  if (!violations.empty()) {
    std::string message;
    for (const SchemaViolation& v : violations) {
      message += (message.empty() ? "" : "\n") + located_problem(source, v.pointer, v.problem);
    }
    return Status::error(message);
  }
  Sweep s;
  s.source = source;
  s.name = doc.at("name").get<std::string>();
  s.description = doc.value("description", std::string());
  if (doc.contains("seed")) {
    // The schema says "integer": valijson reads integers as int64, so the sign of a seed past
    // INT64_MAX (a valid uint64) is checked here instead.
    if (!doc["seed"].is_number_unsigned()) return err(source, "/seed", "expected a non-negative integer");
    s.seed = doc["seed"].get<uint64_t>();
  }
  s.repetitions = integer(doc, "repetitions", s.repetitions);
  s.min_time_s = doc.value("min_time_s", s.min_time_s);
  if (doc.contains("host")) {
    const json& h = doc["host"];
    s.host.max_tokens = integer(h, "max_tokens", s.host.max_tokens);
    s.host.max_convert_elements = integer(h, "max_convert_elements", s.host.max_convert_elements);
    s.host.max_attention_flops = integer(h, "max_attention_flops", s.host.max_attention_flops);
  }
  if (doc.contains("pack")) {
    const json& p = doc["pack"];
    if (p.contains("block_size") && p.contains("block_sizes")) {
      return err(source, "/pack/block_sizes", "give either block_size or block_sizes, not both");
    }
    if (p.contains("block_sizes")) s.pack_block_sizes = ints<int32_t>(p, "block_sizes");
    if (p.contains("block_size")) s.pack_block_sizes = {integer<int32_t>(p, "block_size", 0)};
    s.pack_tokens = ints<int64_t>(p, "tokens");
  }
  if (doc.contains("gather")) {
    const json& g = doc["gather"];
    s.gather_block_sizes = ints<int32_t>(g, "block_sizes");
    s.gather_rows = ints<int64_t>(g, "rows");
    s.gather_seq_starts = bools(g, "seq_starts", {});
  }
  if (doc.contains("convert")) {
    const json& c = doc["convert"];
    s.convert_block_size = integer(c, "block_size", s.convert_block_size);
    s.convert_topk = ints<int32_t>(c, "topk");
    s.convert_rows = ints<int64_t>(c, "rows");
  }
  if (doc.contains("attention")) {
    const json& a = doc["attention"];
    if (a.contains("sparse_mqa")) MLA_RETURN_IF_ERROR(parse_sparse(a["sparse_mqa"], source, &s));
    if (a.contains("dense_mha")) MLA_RETURN_IF_ERROR(parse_dense(a["dense_mha"], source, &s));
    if (a.contains("forward")) MLA_RETURN_IF_ERROR(parse_forward(a["forward"], source, &s));
    if (a.contains("routes")) MLA_RETURN_IF_ERROR(parse_routes(a["routes"], source, &s));
  }
  if (doc.contains("dcp")) {
    MLA_RETURN_IF_ERROR(parse_dcp(doc["dcp"], source, &s));
    for (const char* other : {"pack", "gather", "convert", "attention"})
      if (doc.contains(other))
        return err(source, std::string("/") + other,
                   "a sweep with a dcp section holds nothing else (its benchmarks run in processes of their own)");
    if (!s.has_dcp()) return err(source, "/dcp", "defines no benchmark (no shape or no rank count)");
    *out = std::move(s);
    return Status();
  }
  const bool any = !s.pack_tokens.empty() ||
                   (!s.gather_rows.empty() && !s.gather_block_sizes.empty() && !s.gather_seq_starts.empty()) ||
                   (!s.convert_rows.empty() && !s.convert_topk.empty()) || !s.sparse_shapes.empty() ||
                   !s.dense_shapes.empty() || !s.forward_batches.empty() || !s.route_shapes.empty();
  if (!any) return err(source, "", "defines no benchmark (every family is absent or has an empty list)");
  *out = std::move(s);
  return Status();
}

Status load_sweep(const std::string& name_or_file, Sweep* out) {
  std::string text, problem;
  switch (read_input_file(name_or_file, "sweep file", &text, &problem)) {
    case InputFile::kRead: return parse_sweep(text, name_or_file, out);
    case InputFile::kRefused: return Status::error("--sweep " + name_or_file + ": " + problem);
    case InputFile::kMissing: break;  // a built-in sweep's name
  }
  const auto& builtins = builtin_sweeps();
  const auto it = builtins.find(name_or_file);
  if (it == builtins.end()) {
    std::string names;
    for (const auto& kv : builtins) names += (names.empty() ? "" : ", ") + kv.first;
    return Status::error("--sweep " + name_or_file + ": no such file and no built-in sweep of that name (built-in: " +
                         names + ")");
  }
  Status st = parse_sweep(it->second, "built-in sweep '" + it->first + "'", out);
  if (st.ok()) out->source = "built-in";
  return st;
}

}  // namespace mla::bench
