#include "apps/mla_bench/sweep.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

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

}  // namespace

std::vector<std::string> builtin_sweep_names() {
  std::vector<std::string> names;
  for (const auto& kv : builtin_sweeps()) names.push_back(kv.first);
  return names;
}

Status parse_sweep(const std::string& json_text, const std::string& source, Sweep* out) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::parse_error& e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  }
  Sweep s;
  s.source = source;
  MLA_RETURN_IF_ERROR(check_keys(doc, {"schema", "name", "description", "seed", "repetitions",
                                       "min_time_s", "host", "pack", "gather", "convert"},
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
    MLA_RETURN_IF_ERROR(check_keys(h, {"max_tokens", "max_convert_elements"}, source, "/host"));
    MLA_RETURN_IF_ERROR(read_int<int64_t>(h, "max_tokens", 1, kMaxTokens, source, "/host", &s.host.max_tokens));
    MLA_RETURN_IF_ERROR(read_int<int64_t>(h, "max_convert_elements", 1, int64_t{1} << 34, source, "/host",
                                          &s.host.max_convert_elements));
  }
  if (doc.contains("pack")) {
    const json& p = doc["pack"];
    MLA_RETURN_IF_ERROR(check_keys(p, {"block_size", "tokens"}, source, "/pack"));
    MLA_RETURN_IF_ERROR(read_int(p, "block_size", 1, kMaxBlockSize, source, "/pack", &s.pack_block_size));
    MLA_RETURN_IF_ERROR(read_int_list<int64_t>(p, "tokens", 1, kMaxTokens, source, "/pack", &s.pack_tokens));
  }
  if (doc.contains("gather")) {
    const json& g = doc["gather"];
    MLA_RETURN_IF_ERROR(check_keys(g, {"block_sizes", "seq_starts", "rows"}, source, "/gather"));
    MLA_RETURN_IF_ERROR(
        read_int_list<int32_t>(g, "block_sizes", 1, kMaxBlockSize, source, "/gather", &s.gather_block_sizes));
    MLA_RETURN_IF_ERROR(read_int_list<int64_t>(g, "rows", 1, kMaxTokens, source, "/gather", &s.gather_rows));
    if (!g.contains("seq_starts")) return err(source, "/gather/seq_starts", "missing");
    const json& ss = g["seq_starts"];
    if (!ss.is_array()) return err(source, "/gather/seq_starts", "expected an array of booleans");
    for (size_t i = 0; i < ss.size(); ++i) {
      if (!ss[i].is_boolean()) {
        return err(source, "/gather/seq_starts/" + std::to_string(i), "expected true or false");
      }
      s.gather_seq_starts.push_back(ss[i].get<bool>());
    }
  }
  if (doc.contains("convert")) {
    const json& c = doc["convert"];
    MLA_RETURN_IF_ERROR(check_keys(c, {"block_size", "topk", "rows"}, source, "/convert"));
    MLA_RETURN_IF_ERROR(read_int(c, "block_size", 1, kMaxBlockSize, source, "/convert", &s.convert_block_size));
    MLA_RETURN_IF_ERROR(read_int_list<int32_t>(c, "topk", 1, kMaxTopk, source, "/convert", &s.convert_topk));
    MLA_RETURN_IF_ERROR(read_int_list<int64_t>(c, "rows", 1, kMaxTokens, source, "/convert", &s.convert_rows));
  }
  *out = std::move(s);
  return Status();
}

Status load_sweep(const std::string& name_or_file, Sweep* out) {
  std::ifstream in(name_or_file, std::ios::binary);
  if (in) {
    std::ostringstream text;
    text << in.rdbuf();
    return parse_sweep(text.str(), name_or_file, out);
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
