#include "apps/mla_bench/sweep.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "lib/scenario/input_file.h"
#include "lib/scenario/json_keys.h"

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

Status err(const std::string& source, const std::string& path, const std::string& problem) {
  return Status::error(source + ": at " + path + ": " + problem);
}

Status check_keys(const json& obj, const std::set<std::string>& allowed, const std::string& source,
                  const std::string& path) {
  if (!obj.is_object()) return err(source, path.empty() ? "/" : path, "expected an object");
  for (const auto& item : obj.items()) {
    if (!allowed.count(item.key())) return err(source, path + "/" + item.key(), "unknown key");
  }
  return Status();
}

template <typename T>
Status read_int(const json& obj, const char* key, T lo, T hi, const std::string& source,
                const std::string& path, T* out) {
  if (!obj.contains(key)) return Status();
  const json& v = obj.at(key);
  const std::string where = path + "/" + key;
  if (!v.is_number_integer()) return err(source, where, "expected an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    return err(source, where, "value " + std::to_string(v.get<uint64_t>()) + " is outside [" + std::to_string(lo) +
                                  ", " + std::to_string(hi) + "]");
  }
  const int64_t x = v.get<int64_t>();
  if (x < static_cast<int64_t>(lo) || x > static_cast<int64_t>(hi)) {
    return err(source, where, "value " + std::to_string(x) + " is outside [" + std::to_string(lo) +
                                  ", " + std::to_string(hi) + "]");
  }
  *out = static_cast<T>(x);
  return Status();
}

Status read_seconds(const json& obj, const char* key, const std::string& source, const std::string& path,
                    double* out) {
  if (!obj.contains(key)) return Status();
  const json& v = obj.at(key);
  if (!v.is_number() || v.get<double>() <= 0.0 || v.get<double>() > 60.0) {
    return err(source, path + "/" + key, "expected a number of seconds in (0, 60]");
  }
  *out = v.get<double>();
  return Status();
}

template <typename T>
Status read_int_list(const json& obj, const char* key, T lo, T hi, const std::string& source,
                     const std::string& path, std::vector<T>* out) {
  const std::string where = path + "/" + key;
  if (!obj.contains(key)) return err(source, where, "missing");
  const json& v = obj.at(key);
  if (!v.is_array()) return err(source, where, "expected an array of integers");
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "/" + std::to_string(i);
    if (!v[i].is_number_integer()) return err(source, at, "expected an integer");
    const int64_t x = v[i].get<int64_t>();
    if (x < static_cast<int64_t>(lo) || x > static_cast<int64_t>(hi)) {
      return err(source, at, "value " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
    }
    out->push_back(static_cast<T>(x));
  }
  return Status();
}

// Sizes are bounded so that every slot and output index fits int32 (the kernels' index type).
constexpr int64_t kMaxTokens = int64_t{1} << 24;
constexpr int32_t kMaxBlockSize = 4096;
constexpr int32_t kMaxTopk = 65536;
constexpr int32_t kMaxHeads = 1024;
constexpr int32_t kMaxRequests = 65536;
constexpr int32_t kMaxQueryTokens = 4096;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Every pair of a cartesian product group: each key is a non-empty list.
template <typename T>
Status read_group_list(const json& obj, const char* key, T lo, T hi, const std::string& source,
                       const std::string& path, std::vector<T>* out) {
  MLA_RETURN_IF_ERROR(read_int_list<T>(obj, key, lo, hi, source, path, out));
  if (out->empty()) return err(source, path + "/" + key, "expected at least one value");
  return Status();
}

Status parse_sparse(const json& sp, const std::string& source, Sweep* s) {
  const std::string path = "/attention/sparse_mqa";
  MLA_RETURN_IF_ERROR(check_keys(sp, {"block_size", "shapes"}, source, path));
  MLA_RETURN_IF_ERROR(read_int(sp, "block_size", 1, kMaxBlockSize, source, path, &s->sparse_block_size));
  if (!sp.contains("shapes") || !sp["shapes"].is_array()) {
    return err(source, path + "/shapes", "expected an array of shape groups");
  }
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t, int64_t>> seen;
  for (size_t i = 0; i < sp["shapes"].size(); ++i) {
    const json& g = sp["shapes"][i];
    const std::string gp = path + "/shapes/" + std::to_string(i);
    MLA_RETURN_IF_ERROR(check_keys(g, {"batch", "query_tokens", "heads", "topk", "seq_len"}, source, gp));
    std::vector<int32_t> batch, query, heads, topk;
    std::vector<int64_t> seq;
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(g, "batch", 1, kMaxRequests, source, gp, &batch));
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(g, "query_tokens", 1, kMaxQueryTokens, source, gp, &query));
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(g, "heads", 1, kMaxHeads, source, gp, &heads));
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(g, "topk", 1, kMaxTopk, source, gp, &topk));
    MLA_RETURN_IF_ERROR(read_group_list<int64_t>(g, "seq_len", 1, kMaxTokens, source, gp, &seq));
    for (int32_t b : batch)
      for (int32_t q : query)
        for (int32_t h : heads)
          for (int32_t k : topk)
            for (int64_t l : seq) {
              if (q > l) {
                return err(source, gp + "/query_tokens",
                           "query_tokens " + std::to_string(q) + " > seq_len " + std::to_string(l));
              }
              // Slots (and converted indices) are int32: the whole pool must fit.
              if (int64_t{b} * (ceil_div(l, s->sparse_block_size) + 1) * s->sparse_block_size > INT32_MAX) {
                return err(source, gp, "batch " + std::to_string(b) + " x seq_len " + std::to_string(l) +
                                           " has cache slots past INT32_MAX");
              }
              if (int64_t{b} * q * k > INT32_MAX) {
                return err(source, gp, "batch x query_tokens x topk exceeds INT32_MAX indices");
              }
              if (!seen.insert({b, q, h, k, l}).second) continue;
              s->sparse_shapes.push_back({b, q, h, k, l});
            }
  }
  return Status();
}

// An optional list of booleans: absent leaves *out as it is; present, it must be non-empty.
Status read_bool_group_list(const json& obj, const char* key, const std::string& source, const std::string& path,
                            std::vector<bool>* out) {
  if (!obj.contains(key)) return Status();
  const std::string where = path + "/" + key;
  const json& v = obj.at(key);
  if (!v.is_array()) return err(source, where, "expected an array of booleans");
  if (v.empty()) return err(source, where, "expected at least one value");
  out->clear();
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_boolean()) return err(source, where + "/" + std::to_string(i), "expected true or false");
    out->push_back(v[i].get<bool>());
  }
  return Status();
}

Status parse_dense(const json& d, const std::string& source, Sweep* s) {
  const std::string path = "/attention/dense_mha";
  MLA_RETURN_IF_ERROR(check_keys(d, {"shapes"}, source, path));
  if (!d.contains("shapes") || !d["shapes"].is_array()) {
    return err(source, path + "/shapes", "expected an array of shape groups");
  }
  std::set<std::tuple<int32_t, int64_t, int32_t, int64_t, bool>> seen;
  for (size_t i = 0; i < d["shapes"].size(); ++i) {
    const json& g = d["shapes"][i];
    const std::string gp = path + "/shapes/" + std::to_string(i);
    MLA_RETURN_IF_ERROR(check_keys(g, {"heads", "tokens", "requests", "keys_per_request", "causal"}, source, gp));
    std::vector<int32_t> heads, requests;
    std::vector<int64_t> tokens;
    std::vector<int64_t> keys = {0};  // 0: absent, keys = the request's queries
    std::vector<bool> causal = {true};
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(g, "heads", 1, kMaxHeads, source, gp, &heads));
    MLA_RETURN_IF_ERROR(read_group_list<int64_t>(g, "tokens", 1, kMaxTokens, source, gp, &tokens));
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(g, "requests", 1, kMaxRequests, source, gp, &requests));
    if (g.contains("keys_per_request")) {
      MLA_RETURN_IF_ERROR(read_group_list<int64_t>(g, "keys_per_request", 1, kMaxTokens, source, gp, &keys));
    }
    MLA_RETURN_IF_ERROR(read_bool_group_list(g, "causal", source, gp, &causal));
    for (int32_t h : heads)
      for (int64_t n : tokens)
        for (int32_t r : requests)
          for (size_t ki = 0; ki < keys.size(); ++ki)
            for (bool c : causal) {
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
  MLA_RETURN_IF_ERROR(check_keys(f, {"block_size", "batches"}, source, path));
  MLA_RETURN_IF_ERROR(read_int(f, "block_size", 1, kMaxBlockSize, source, path, &s->forward_block_size));
  if (!f.contains("batches") || !f["batches"].is_array()) {
    return err(source, path + "/batches", "expected an array of batches");
  }
  std::set<std::tuple<std::string, int32_t, int32_t>> seen;
  std::set<std::string> names;  // a name given twice would lose one batch's rows (same benchmark names)
  for (size_t i = 0; i < f["batches"].size(); ++i) {
    const json& b = f["batches"][i];
    const std::string bp = path + "/batches/" + std::to_string(i);
    MLA_RETURN_IF_ERROR(check_keys(
        b, {"name", "description", "heads", "topk", "decode_threshold", "seq_lens", "query_lens", "requests"},
        source, bp));
    ForwardBatch fb;
    if (!b.contains("name") || !b["name"].is_string() || b["name"].get<std::string>().empty()) {
      return err(source, bp + "/name", "expected a non-empty string");
    }
    fb.name = b["name"].get<std::string>();
    if (!names.insert(fb.name).second) {
      return err(source, bp + "/name", "\"" + fb.name + "\" names an earlier batch too (names are part of benchmark names)");
    }
    for (char c : fb.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
        return err(source, bp + "/name", "use letters, digits, '_', '-' and '.' only (it is part of benchmark names)");
      }
    }
    if (b.contains("description") && !b["description"].is_string()) {
      return err(source, bp + "/description", "expected a string");
    }
    std::vector<int32_t> heads, topk;
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(b, "heads", 1, kMaxHeads, source, bp, &heads));
    MLA_RETURN_IF_ERROR(read_group_list<int32_t>(b, "topk", 1, kMaxTopk, source, bp, &topk));
    MLA_RETURN_IF_ERROR(read_int(b, "decode_threshold", 1, kMaxQueryTokens, source, bp, &fb.decode_threshold));
    const bool explicit_lists = b.contains("seq_lens") || b.contains("query_lens");
    if (explicit_lists == b.contains("requests")) {
      return err(source, bp, "give either \"seq_lens\" and \"query_lens\" or \"requests\" (groups of "
                             "{\"count\", \"seq_len\", \"query_len\"})");
    }
    if (explicit_lists) {
      MLA_RETURN_IF_ERROR(read_int_list<int32_t>(b, "seq_lens", 0, kMaxTokens, source, bp, &fb.seq_lens));
      MLA_RETURN_IF_ERROR(read_int_list<int32_t>(b, "query_lens", 0, kMaxTokens, source, bp, &fb.query_lens));
    } else {
      const json& groups = b["requests"];
      if (!groups.is_array()) return err(source, bp + "/requests", "expected an array of request groups");
      for (size_t j = 0; j < groups.size(); ++j) {
        const std::string gp = bp + "/requests/" + std::to_string(j);
        const json& g = groups[j];
        MLA_RETURN_IF_ERROR(check_keys(g, {"count", "seq_len", "query_len"}, source, gp));
        for (const char* key : {"count", "seq_len", "query_len"}) {
          if (!g.contains(key)) return err(source, gp + "/" + key, "missing");
        }
        int32_t count = 0, seq = 0, query = 0;
        MLA_RETURN_IF_ERROR(read_int(g, "count", 1, kMaxRequests, source, gp, &count));
        MLA_RETURN_IF_ERROR(read_int<int32_t>(g, "seq_len", 0, kMaxTokens, source, gp, &seq));
        MLA_RETURN_IF_ERROR(read_int<int32_t>(g, "query_len", 0, kMaxTokens, source, gp, &query));
        fb.seq_lens.insert(fb.seq_lens.end(), static_cast<size_t>(count), seq);
        fb.query_lens.insert(fb.query_lens.end(), static_cast<size_t>(count), query);
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
    for (int32_t h : heads)
      for (int32_t k : topk) {
        if (!seen.insert({fb.name, h, k}).second) continue;
        ForwardBatch v = fb;
        v.heads = h;
        v.topk = k;
        s->forward_batches.push_back(std::move(v));
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
    return err(source, e.path.empty() ? "/" : e.path, "nesting deeper than " + std::to_string(e.max_depth) + " levels");
  } catch (const json::parse_error& e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  } catch (const json::exception& e) {  // raised while parsing too, e.g. a number past double's range
    return Status::error(source + ": not valid JSON: " + e.what());
  }
  if (keys.found()) return err(source, *keys.found(), "key given twice in one object");
  Sweep s;
  s.source = source;
  MLA_RETURN_IF_ERROR(check_keys(doc, {"schema", "name", "description", "seed", "repetitions",
                                       "min_time_s", "host", "pack", "gather", "convert", "attention"},
                                 source, ""));
  int schema = 0;
  MLA_RETURN_IF_ERROR(read_int(doc, "schema", 1, 1, source, "", &schema));
  if (schema != 1) return err(source, "/schema", "missing (this mla-bench reads schema 1)");
  if (!doc.contains("name") || !doc["name"].is_string() || doc["name"].get<std::string>().empty()) {
    return err(source, "/name", "expected a non-empty string");
  }
  s.name = doc["name"].get<std::string>();
  if (doc.contains("description")) {
    if (!doc["description"].is_string()) return err(source, "/description", "expected a string");
    s.description = doc["description"].get<std::string>();
  }
  if (doc.contains("seed")) {
    if (!doc["seed"].is_number_unsigned()) return err(source, "/seed", "expected a non-negative integer");
    s.seed = doc["seed"].get<uint64_t>();
  }
  MLA_RETURN_IF_ERROR(read_int(doc, "repetitions", 1, 1000, source, "", &s.repetitions));
  MLA_RETURN_IF_ERROR(read_seconds(doc, "min_time_s", source, "", &s.min_time_s));

  if (doc.contains("host")) {
    const json& h = doc["host"];
    MLA_RETURN_IF_ERROR(
        check_keys(h, {"max_tokens", "max_convert_elements", "max_attention_flops"}, source, "/host"));
    MLA_RETURN_IF_ERROR(read_int<int64_t>(h, "max_tokens", 1, kMaxTokens, source, "/host", &s.host.max_tokens));
    MLA_RETURN_IF_ERROR(read_int<int64_t>(h, "max_convert_elements", 1, int64_t{1} << 34, source, "/host",
                                          &s.host.max_convert_elements));
    MLA_RETURN_IF_ERROR(read_int<int64_t>(h, "max_attention_flops", 1, int64_t{1} << 50, source, "/host",
                                          &s.host.max_attention_flops));
  }
  if (doc.contains("pack")) {
    const json& p = doc["pack"];
    MLA_RETURN_IF_ERROR(check_keys(p, {"block_size", "block_sizes", "tokens"}, source, "/pack"));
    if (p.contains("block_size") && p.contains("block_sizes")) {
      return err(source, "/pack/block_sizes", "give either block_size or block_sizes, not both");
    }
    if (p.contains("block_sizes")) {
      MLA_RETURN_IF_ERROR(
          read_group_list<int32_t>(p, "block_sizes", 1, kMaxBlockSize, source, "/pack", &s.pack_block_sizes));
    } else {
      int32_t b = s.pack_block_sizes.front();
      MLA_RETURN_IF_ERROR(read_int(p, "block_size", 1, kMaxBlockSize, source, "/pack", &b));
      s.pack_block_sizes = {b};
    }
    MLA_RETURN_IF_ERROR(read_int_list<int64_t>(p, "tokens", 1, kMaxTokens, source, "/pack", &s.pack_tokens));
  }
  if (doc.contains("gather")) {
    const json& g = doc["gather"];
    MLA_RETURN_IF_ERROR(check_keys(g, {"block_sizes", "seq_starts", "rows"}, source, "/gather"));
    MLA_RETURN_IF_ERROR(
        read_int_list<int32_t>(g, "block_sizes", 1, kMaxBlockSize, source, "/gather", &s.gather_block_sizes));
    MLA_RETURN_IF_ERROR(read_int_list<int64_t>(g, "rows", 1, kMaxTokens, source, "/gather", &s.gather_rows));
    if (!g.contains("seq_starts")) return err(source, "/gather/seq_starts", "missing");
    MLA_RETURN_IF_ERROR(read_bool_group_list(g, "seq_starts", source, "/gather", &s.gather_seq_starts));
  }
  if (doc.contains("convert")) {
    const json& c = doc["convert"];
    MLA_RETURN_IF_ERROR(check_keys(c, {"block_size", "topk", "rows"}, source, "/convert"));
    MLA_RETURN_IF_ERROR(read_int(c, "block_size", 1, kMaxBlockSize, source, "/convert", &s.convert_block_size));
    MLA_RETURN_IF_ERROR(read_int_list<int32_t>(c, "topk", 1, kMaxTopk, source, "/convert", &s.convert_topk));
    MLA_RETURN_IF_ERROR(read_int_list<int64_t>(c, "rows", 1, kMaxTokens, source, "/convert", &s.convert_rows));
  }
  if (doc.contains("attention")) {
    const json& a = doc["attention"];
    MLA_RETURN_IF_ERROR(check_keys(a, {"sparse_mqa", "dense_mha", "forward"}, source, "/attention"));
    if (a.contains("sparse_mqa")) MLA_RETURN_IF_ERROR(parse_sparse(a["sparse_mqa"], source, &s));
    if (a.contains("dense_mha")) MLA_RETURN_IF_ERROR(parse_dense(a["dense_mha"], source, &s));
    if (a.contains("forward")) MLA_RETURN_IF_ERROR(parse_forward(a["forward"], source, &s));
  }
  const bool any = !s.pack_tokens.empty() ||
                   (!s.gather_rows.empty() && !s.gather_block_sizes.empty() && !s.gather_seq_starts.empty()) ||
                   (!s.convert_rows.empty() && !s.convert_topk.empty()) || !s.sparse_shapes.empty() ||
                   !s.dense_shapes.empty() || !s.forward_batches.empty();
  if (!any) return err(source, "/", "defines no benchmark (every family is absent or has an empty list)");
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
