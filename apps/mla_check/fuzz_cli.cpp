#include "fuzz_cli.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>

namespace mla::app {

namespace {

constexpr uint64_t kMaxFuzzCases = 1'000'000;
constexpr double kMaxSeconds = 7 * 86400.0;

// A number of seconds in (0, 7 days], written as a plain decimal.
bool parse_seconds(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0.0 || v > kMaxSeconds) return false;
  *out = v;
  return true;
}

}  // namespace

bool fuzz_requested(const FuzzArgs& a) {
  return a.cases || a.start || a.budget || a.shrink_budget || a.out_dir;
}

std::string parse_fuzz_args(const FuzzArgs& a, FuzzOptions* o) {
  if (!a.cases) return "--fuzz-start, --fuzz-budget, --fuzz-shrink-budget and --fuzz-out need --fuzz N";
  const std::string& cases = *a.cases;
  uint64_t n = 0;
  const char* end = cases.data() + cases.size();
  const auto [stop, ec] = std::from_chars(cases.data(), end, n);
  if (cases.empty() || ec != std::errc() || stop != end || n < 1 || n > kMaxFuzzCases)
    return "--fuzz: '" + cases + "' is not a number of cases (an integer in [1, " + std::to_string(kMaxFuzzCases) + "])";
  o->cases = n;
  o->first = 0;
  if (a.start) {
    const std::string& text = *a.start;
    const char* e = text.data() + text.size();
    const auto [at, err] = std::from_chars(text.data(), e, o->first);
    if (text.empty() || err != std::errc() || at != e || o->first > UINT64_MAX - n)
      return "--fuzz-start: '" + text + "' is not a case index (an integer in [0, 2^64 - 1 - N])";
  }
  o->budget_s = kDefaultFuzzBudgetS;
  if (a.budget && !parse_seconds(*a.budget, &o->budget_s))
    return "--fuzz-budget: '" + *a.budget + "' is not a number of seconds in (0, 604800]";
  o->shrink_budget_s = kDefaultShrinkBudgetS;
  if (a.shrink_budget && !parse_seconds(*a.shrink_budget, &o->shrink_budget_s))
    return "--fuzz-shrink-budget: '" + *a.shrink_budget + "' is not a number of seconds in (0, 604800]";
  if (a.out_dir && a.out_dir->empty()) return "--fuzz-out: the folder name is empty";
  o->out_dir = a.out_dir.value_or(kDefaultFuzzOutDir);
  std::error_code ec2;
  if (std::filesystem::exists(o->out_dir, ec2) && !std::filesystem::is_directory(o->out_dir, ec2))
    return "--fuzz-out: '" + o->out_dir + "' exists and is not a directory";
  return "";
}

void print_fuzz_summary(std::FILE* out, const FuzzOptions& o, const FuzzOutcome& r) {
  std::fprintf(out, "fuzz: seed %llu, %llu of %llu cases ran in %.1f s%s\n", static_cast<unsigned long long>(o.seed),
               static_cast<unsigned long long>(r.cases_run), static_cast<unsigned long long>(o.cases), r.run_s,
               r.budget_spent ? " (--fuzz-budget spent)" : "");
  if (o.first > 0) std::fprintf(out, "fuzz: cases %llu and up\n", static_cast<unsigned long long>(o.first));
  if (r.findings.empty()) {
    std::fprintf(out, "fuzz: no failing case\n");
    return;
  }
  size_t distinct = 0;
  for (const FuzzFinding& f : r.findings) distinct += f.duplicate_of.empty();
  std::fprintf(out, "fuzz: first failure after %.1f s; %zu failing cases, %zu distinct failures\n", r.first_failure_s,
               r.findings.size(), distinct);
  for (const FuzzFinding& f : r.findings) {
    if (!f.duplicate_of.empty()) continue;
    std::string same;
    size_t more = 0;
    for (const FuzzFinding& g : r.findings)
      if (g.duplicate_of == f.case_name && more++ < 8) same += " " + g.case_name;
    if (more > 8) same += " ...";
    std::fprintf(out, "  %s: %s (after %.1f s)\n", f.case_name.c_str(), f.signature.to_string().c_str(), f.found_s);
    if (more > 0) std::fprintf(out, "    also in %zu later cases (not shrunk):%s\n", more, same.c_str());
    if (f.shrunk)
      std::fprintf(out, "    shrunk in %.1f s (%lld candidates, %lld steps%s)\n      from %s\n      to   %s\n", f.shrink_s,
                   static_cast<long long>(f.candidates_run), static_cast<long long>(f.steps),
                   f.shrink_budget_spent ? ", --fuzz-shrink-budget spent" : "", f.before.to_string().c_str(),
                   f.after.to_string().c_str());
    if (!f.file.empty()) std::fprintf(out, "    written to %s\n", f.file.c_str());
    if (!f.write_error.empty()) std::fprintf(out, "    NOT written: %s\n", f.write_error.c_str());
  }
}

}  // namespace mla::app
