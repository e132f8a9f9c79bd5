#include "apps/mla_bench/benchmark_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>

#include <sys/stat.h>

namespace mla::bench {

namespace {

constexpr bool kMinTimeHasSuffix =
#if MLA_BENCHMARK_VERSION_MAJOR > 1 || (MLA_BENCHMARK_VERSION_MAJOR == 1 && MLA_BENCHMARK_VERSION_MINOR >= 8)
    true;
#else
    false;
#endif

enum class Kind { kBool, kInt, kMinTime, kSeconds, kFormat, kColor, kTimeUnit, kFilter, kOutFile, kText };

// Every flag of Google Benchmark 1.7 and 1.8 (benchmark.cc), with how its value is checked.
const std::map<std::string, Kind>& known_flags() {
  static const std::map<std::string, Kind> flags = {
      {"benchmark_list_tests", Kind::kBool},
      {"benchmark_filter", Kind::kFilter},
      {"benchmark_min_time", Kind::kMinTime},
      {"benchmark_min_warmup_time", Kind::kSeconds},
      {"benchmark_repetitions", Kind::kInt},
      {"benchmark_enable_random_interleaving", Kind::kBool},
      {"benchmark_report_aggregates_only", Kind::kBool},
      {"benchmark_display_aggregates_only", Kind::kBool},
      {"benchmark_format", Kind::kFormat},
      {"benchmark_out_format", Kind::kFormat},
      {"benchmark_out", Kind::kOutFile},
      {"benchmark_color", Kind::kColor},
      {"benchmark_counters_tabular", Kind::kBool},
      {"benchmark_perf_counters", Kind::kText},
      {"benchmark_context", Kind::kText},
      {"benchmark_time_unit", Kind::kTimeUnit},
      {"benchmark_dry_run", Kind::kBool},
      {"v", Kind::kInt},
  };
  return flags;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::optional<bool> parse_bool(const std::string& v) {
  const std::string l = lower(v);
  if (l == "true" || l == "yes" || l == "on" || l == "1" || l == "t" || l == "y") return true;
  if (l == "false" || l == "no" || l == "off" || l == "0" || l == "f" || l == "n") return false;
  return std::nullopt;
}

bool parse_long(const std::string& v, long lo, long hi, long* out) {
  if (v.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || errno != 0 || n < lo || n > hi) return false;
  *out = n;
  return true;
}

// A positive, finite number of seconds (with an optional "s"); nullopt otherwise.
std::optional<double> parse_seconds(const std::string& v, bool allow_zero) {
  if (v.empty()) return std::nullopt;
  char* end = nullptr;
  const double t = std::strtod(v.c_str(), &end);
  const std::string rest = end;
  if (end == v.c_str() || !std::isfinite(t) || t < 0.0 || (t == 0.0 && !allow_zero) || !(rest.empty() || rest == "s"))
    return std::nullopt;
  return t;
}

std::string env_name(const std::string& flag) {
  std::string env;
  for (char c : flag) env += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

// The problem with `value` for flag `name` given as `given` (e.g. "--benchmark_format=xml"), or "".
// *rewritten receives the value to pass on.
std::string check_value(const std::string& name, Kind kind, const std::string& value, const std::string& given,
                        std::string* rewritten) {
  *rewritten = value;
  const std::string bad = given + ": ";
  switch (kind) {
    case Kind::kBool:
      if (!parse_bool(value)) return bad + "'" + value + "' is not true or false (also: yes/no, on/off, 1/0)";
      return "";
    case Kind::kInt: {
      long n = 0;
      const long lo = name == "v" ? 0 : 1;
      if (!parse_long(value, lo, 1000000, &n))
        return bad + "'" + value + "' is not an integer in [" + std::to_string(lo) + ", 1000000]";
      return "";
    }
    case Kind::kMinTime: {
      if (!value.empty() && value.back() == 'x') {
        long n = 0;
        if (!parse_long(value.substr(0, value.size() - 1), 1, 1000000000, &n))
          return bad + "'" + value + "' is not an iteration count (Nx, N a positive integer)";
        if (!kMinTimeHasSuffix)
          return bad + "'" + value + "': an iteration count (Nx) needs Google Benchmark 1.8 or newer; this mla-bench "
                 "is built with " + std::to_string(MLA_BENCHMARK_VERSION_MAJOR) + "." +
                 std::to_string(MLA_BENCHMARK_VERSION_MINOR) + ", which takes seconds only (T or Ts)";
        return "";
      }
      const auto t = parse_seconds(value, false);
      if (!t) return bad + "'" + value + "' is not a positive, finite time (T or Ts) or iteration count (Nx)";
      char buf[64];
      std::snprintf(buf, sizeof buf, kMinTimeHasSuffix ? "%.17gs" : "%.17g", *t);
      *rewritten = buf;
      return "";
    }
    case Kind::kSeconds: {
      const auto t = parse_seconds(value, true);
      if (!t) return bad + "'" + value + "' is not a finite number of seconds >= 0";
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", *t);
      *rewritten = buf;
      return "";
    }
    case Kind::kFormat:
      if (value != "console" && value != "json" && value != "csv")
        return bad + "'" + value + "' is not a format: console, json or csv";
      return "";
    case Kind::kColor:
      if (lower(value) != "auto" && !parse_bool(value)) return bad + "'" + value + "' is not auto, true or false";
      return "";
    case Kind::kTimeUnit:
      if (value != "ns" && value != "us" && value != "ms" && value != "s")
        return bad + "'" + value + "' is not a time unit: ns, us, ms or s";
      return "";
    case Kind::kFilter:
      try {
        const std::string re = !value.empty() && value[0] == '-' ? value.substr(1) : value;
        std::regex(re, std::regex_constants::extended);
      } catch (const std::regex_error& e) {
        return bad + "'" + value + "' is not a valid regular expression (POSIX extended): " + e.what();
      }
      return "";
    case Kind::kOutFile: {
      if (value.empty()) return bad + "the file name is empty";
      namespace fs = std::filesystem;
      std::error_code ec;
      if (fs::is_directory(value, ec)) return bad + "'" + value + "' is a directory";
      const fs::path parent = fs::path(value).parent_path();
      const std::string dir = parent.empty() ? "." : parent.string();
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0)
        return bad + "cannot write '" + value + "': its directory '" + dir + "': " + std::strerror(errno);
      if (!S_ISDIR(st.st_mode)) return bad + "cannot write '" + value + "': '" + dir + "' is not a directory";
      if (::access(value.c_str(), F_OK) == 0 ? ::access(value.c_str(), W_OK) != 0 : ::access(dir.c_str(), W_OK) != 0)
        return bad + "cannot write '" + value + "': " + std::strerror(errno);
      return "";
    }
    case Kind::kText:
      return "";
  }
  return "";
}

std::string known_names() {
  std::string names;
  for (const auto& [name, kind] : known_flags()) names += (names.empty() ? "--" : ", --") + name;
  return names;
}

}  // namespace

std::string check_benchmark_flags(int argc, char** argv, BenchmarkFlags* flags) {
  flags->args.clear();
  // The environment first: a flag given on the command line wins over its variable.
  for (const auto& [name, kind] : known_flags()) {
    if (name == "v") continue;
    const std::string var = env_name(name);
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) continue;
    std::string rewritten;
    const std::string problem = check_value(name, kind, value, var + " (environment)", &rewritten);
    if (!problem.empty()) return problem;
    if (rewritten != value) ::setenv(var.c_str(), rewritten.c_str(), 1);
    if (name == "benchmark_filter") flags->filter = rewritten;
    if (name == "benchmark_out") flags->out = rewritten;
    if (name == "benchmark_list_tests") flags->list_tests = *parse_bool(rewritten);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool gb = a.rfind("--benchmark_", 0) == 0 || a.rfind("--v=", 0) == 0;
    if (!gb) {
      flags->args.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto it = known_flags().find(name);
    if (it == known_flags().end())
      return "--" + name + ": not a Google Benchmark flag (known: " + known_names() + ")";
    if (eq == std::string::npos && it->second != Kind::kBool) {
      return "--" + name + ": Google Benchmark flags take their value after '=' (--" + name + "=VALUE)";
    }
    const std::string value = eq == std::string::npos ? "true" : a.substr(eq + 1);
    std::string rewritten;
    const std::string problem = check_value(name, it->second, value, "--" + name, &rewritten);
    if (!problem.empty()) return problem;
    flags->args.push_back("--" + name + "=" + rewritten);
    if (name == "benchmark_filter") flags->filter = rewritten;
    if (name == "benchmark_out") flags->out = rewritten;
    if (name == "benchmark_list_tests") flags->list_tests = *parse_bool(rewritten);
  }
  return "";
}

bool benchmark_flag_given(int argc, char** argv, const std::string& name) {
  const std::string flag = "--" + name;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return std::getenv(env_name(name).c_str()) != nullptr;
}

bool filter_matches(const std::string& filter, const std::string& name) {
  if (filter.empty() || filter == "all") return true;
  const bool negative = filter[0] == '-';
  const std::regex re(negative ? filter.substr(1) : filter, std::regex_constants::extended);
  return std::regex_search(name, re) != negative;
}

std::string min_time_flag(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, kMinTimeHasSuffix ? "--benchmark_min_time=%gs" : "--benchmark_min_time=%g", seconds);
  return buf;
}

}  // namespace mla::bench
