// mla-check: regression runs of the scenario suite on a backend.
// Exit codes: 0 all passed (SKIPs allowed), 1 a check failed, 2 bad usage or bad input,
// 3 a runtime or device error.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "apps/common/cli.h"
#include "apps/common/table.h"
#include "lib/backends/injection.h"
#include "lib/backends/kernel_policy_env.h"
#include "lib/dcp/launch_env.h"
#include "lib/run/memory_estimate.h"
#include "lib/run/report.h"
#include "lib/scenario/scenario.h"
#include "lib/run/selection.h"
#include "lib/run/shard.h"
#include "lib/run/suite_runner.h"
#include "fuzz_cli.h"
#include "progress.h"

using namespace mla;
using app::kExitFail, app::kExitPass, app::kExitRuntime, app::kExitUsage;

namespace {

size_t online_cpus() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<size_t>(n) : 1;
}

// --jobs 0 on the CUDA backend: every scenario process holds a CUDA context (hundreds of MB of
// device memory) and the processes given one GPU share it, so "one per CPU" is capped per GPU.
// An explicit --jobs N is taken as given.
constexpr size_t kAutoJobsOnGpu = 8;

size_t auto_jobs(bool on_gpu, int gpus) {
  const size_t cpus = online_cpus();
  return on_gpu ? std::min(cpus, kAutoJobsOnGpu * static_cast<size_t>(std::max(gpus, 1))) : cpus;
}

// Options that take a value and mean something else when the value is empty (no report, every
// scenario, no injection) are refused when given empty: "--report ''" from an unset shell
// variable must not run the suite without a report.
std::string empty_option(const CLI::App& app, const std::vector<std::pair<const char*, const std::string*>>& opts) {
  for (const auto& [name, value] : opts) {
    if (app.count(name) > 0 && value->empty()) return std::string(name) + ": the value is empty";
  }
  return "";
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"mla-check: proves sparse-MLA (fp8_ds_mla) kernels correct against an independent reference.\n"
               "With no arguments, runs every scenario of the shipped suite on the best backend."};
  SelectionOptions sel;
  std::vector<std::string> check_names;
  std::string backend_name = "auto", report_path, inject_name;
  bool list = false, list_injections = false, version = false, quiet = false, no_isolate = false, verbose = false;
  std::optional<uint64_t> seed;
  double timeout_s = 900.0;
  int jobs = 1;
  app::add_selection_options(app, &sel);
  app.add_option("--check", check_names,
                 "Run only this check of each scenario (repeatable, e.g. sparse_mqa); scenarios without any of "
                 "them are left out");
  app.add_flag("--list", list, "List the selected scenarios and exit");
  bool adapter_fallback = false;
  app.add_option("--backend", backend_name,
                 "auto (GPU when present), host, cuda, or python:ADAPTER.py (an implementation under test: "
                 "docs/adapters.md)")
      ->capture_default_str();
  app.add_flag("--adapter-fallback", adapter_fallback,
               "With python:ADAPTER.py: operations the adapter lacks run on the harness's own backend of its device "
               "(else the checks that need them are skipped)");
  app.add_option("--report", report_path, "Write the JSON report (schema mla-harness.report/1) to FILE");
  app.add_option("--inject", inject_name, "Reproduce a known failure mode (see --list-injections)");
  std::string dump_dir;
  int64_t dump_max_bytes = kDefaultDumpMaxBytes;
  app.add_option("--dump", dump_dir,
                 "Write every check's inputs, outputs and reference results as .npy files with an index.json per "
                 "scenario under DIR (docs/dump.md)");
  app.add_option("--dump-max-bytes", dump_max_bytes,
                 "Bytes of arrays --dump writes per scenario at most; what would pass it is left out and listed")
      ->check(CLI::Range(int64_t{0}, INT64_MAX))
      ->capture_default_str();
  app.add_flag("--list-injections", list_injections, "List the failure injections and exit");
  std::string seed_text;  // parsed below: CLI11 wraps "-1" and saturates past 2^64 - 1 for uint64
  app.add_option("--seed", seed_text, "Override every scenario's seed (an integer in [0, 2^64 - 1])");
  app.add_option("--timeout", timeout_s, "Seconds one scenario may run before it is killed (ERROR)")
      ->check(CLI::Range(1.0, 7 * 86400.0))
      ->capture_default_str();
  app.add_option("-j,--jobs", jobs,
                 "Scenario processes run at once (0: one per online CPU, at most 8 per GPU on the CUDA backend; with several "
                 "GPUs each process gets one); the results "
                 "keep the suite's order")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  std::string shard_text, shard_costs;
  app.add_option("--shard", shard_text,
                 "Run only shard I of N (I/N, 1 <= I <= N) of the selected scenarios, balanced by recorded durations "
                 "(scripts/merge_reports.py joins the shards' reports)");
  app.add_option("--shard-costs", shard_costs,
                 "With --shard: the report whose durations balance the shards (default: the host baseline, "
                 "scenarios/baselines/host-report.json beside the scenario directory)");
  app.add_flag("--no-isolate", no_isolate, "Run scenarios in this process, one at a time (a crash then ends the run)");
  app.add_flag("-q,--quiet", quiet, "Print only failing checks and the summary");
  app.add_flag("-v,--verbose", verbose, "Print every check (default: one row per passing scenario)");
  app.add_flag("--version", version, "Print the version and exit");
  // --fuzz, --fuzz-start, --fuzz-budget, --fuzz-shrink-budget, --fuzz-out (docs/fuzzing.md)
  std::string fuzz_text[5];
  CLI::Option* fuzz_opts[5] = {
      app.add_option("--fuzz", fuzz_text[0],
                     "Run N generated scenarios instead of the suite (--seed S picks them, default 1); shrink and "
                     "write each distinct failure"),
      app.add_option("--fuzz-start", fuzz_text[1], "With --fuzz: the first case's index (default 0)"),
      app.add_option("--fuzz-budget", fuzz_text[2], "With --fuzz: start no new case after SECONDS (default 300)"),
      app.add_option("--fuzz-shrink-budget", fuzz_text[3],
                     "With --fuzz: SECONDS to shrink each distinct failure (default 120)"),
      app.add_option("--fuzz-out", fuzz_text[4], "With --fuzz: folder for the shrunk failures (default fuzz-failures)")};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitPass : kExitUsage;
  }
  if (const std::string e = empty_option(app, {{"--report", &report_path}, {"--seed", &seed_text},
                                                {"--inject", &inject_name}, {"--scenario-dir", &sel.scenario_dir},
                                                {"--backend", &backend_name}, {"--shard", &shard_text},
                                                {"--shard-costs", &shard_costs}});
      !e.empty()) {
    std::fprintf(stderr, "mla-check: %s\n", e.c_str());
    return kExitUsage;
  }
  if (app.count("--seed") > 0) {
    uint64_t v = 0;
    const char* end = seed_text.data() + seed_text.size();
    const auto [stop, ec] = std::from_chars(seed_text.data(), end, v);
    if (ec != std::errc() || stop != end) {
      std::fprintf(stderr, "mla-check: --seed: '%s' is not an integer in [0, 2^64 - 1]\n", seed_text.c_str());
      return kExitUsage;
    }
    seed = v;
  }
  if (std::isnan(timeout_s)) {  // CLI::Range lets NaN through (every comparison with it is false)
    std::fprintf(stderr, "mla-check: --timeout: nan is not a number of seconds in [1, 604800]\n");
    return kExitUsage;
  }
  if (version) {
    std::printf("mla-check %s (git %s)\n", tool_version(), tool_git_revision());
    return kExitPass;
  }
  if (list_injections) {
    for (const auto& i : all_injections())
      std::printf("%-25s caught by %-11s as %-4s  %s\n", i.name, i.expected_check, i.expected_verdict, i.description);
    return kExitPass;
  }
  const auto injection = injection_from_string(inject_name);
  if (!injection) {
    std::fprintf(stderr, "mla-check: --inject: unknown failure '%s'; known:", inject_name.c_str());
    for (const auto& i : all_injections()) std::fprintf(stderr, " %s", i.name);
    std::fprintf(stderr, "\n");
    return kExitUsage;
  }
  std::vector<CheckKind> only_checks;
  for (const auto& name : check_names) {
    const auto k = check_kind_from_string(name);
    if (!k) {
      std::fprintf(stderr, "mla-check: --check: unknown check '%s'; known: %s\n", name.c_str(),
                   check_kind_names().c_str());
      return kExitUsage;
    }
    only_checks.push_back(*k);
  }
  if (no_isolate && app.count("--timeout") > 0) {
    std::fprintf(stderr, "mla-check: --timeout needs the scenarios in processes of their own to kill: it cannot be "
                         "combined with --no-isolate\n");
    return kExitUsage;
  }
  if (no_isolate && jobs != 1) {
    std::fprintf(stderr, "mla-check: --no-isolate runs every scenario in this process, one at a time: "
                         "it cannot be combined with --jobs %d (leave --jobs at 1)\n", jobs);
    return kExitUsage;
  }

  app::FuzzArgs fuzz_args;
  std::optional<std::string>* fuzz_fields[5] = {&fuzz_args.cases, &fuzz_args.start, &fuzz_args.budget,
                                                &fuzz_args.shrink_budget, &fuzz_args.out_dir};
  for (int i = 0; i < 5; ++i)
    if (fuzz_opts[i]->count() > 0) *fuzz_fields[i] = fuzz_text[i];
  const bool fuzz = app::fuzz_requested(fuzz_args);
  FuzzOptions fuzz_opt;
  if (fuzz) {
    if (const std::string bad = app::parse_fuzz_args(fuzz_args, &fuzz_opt); !bad.empty()) {
      std::fprintf(stderr, "mla-check: %s\n", bad.c_str());
      return kExitUsage;
    }
    if (!sel.scenario_args.empty() || !sel.filter.empty() || !sel.exclude_tags.empty() || list || no_isolate ||
        app.count("--shard") > 0 || app.count("--shard-costs") > 0) {
      std::fprintf(stderr, "mla-check: --fuzz generates its scenarios and runs each in a child process: it cannot be "
                           "combined with --scenario, --filter, --exclude-tag, --list, --no-isolate or --shard\n");
      return kExitUsage;
    }
    fuzz_opt.seed = seed.value_or(1);  // the fuzz run's seed; each case draws its own scenario seed
    fuzz_opt.grammar.checks = only_checks;
    if (app.count("--timeout") == 0) timeout_s = app::kDefaultFuzzCaseTimeoutS;
  }

  // Select and load scenarios; any invalid file is bad input (exit 2) before anything runs.
  sel.only_checks = only_checks;
  sel.seed = seed;
  std::vector<Scenario> scenarios;
  if (!fuzz) {
    std::optional<std::vector<Scenario>> selected = app::select_or_explain("mla-check", sel);
    if (!selected) return kExitUsage;
    scenarios = std::move(*selected);
  }
  std::optional<Provenance::Shard> shard;
  if (app.count("--shard") > 0 || app.count("--shard-costs") > 0) {
    auto part = select_shard(shard_text, shard_costs, sel.scenario_dir, scenarios);
    if (const auto* bad = std::get_if<std::string>(&part)) {
      std::fprintf(stderr, "mla-check: %s\n", bad->c_str());
      return kExitUsage;
    }
    auto& sel_part = std::get<ShardSelection>(part);
    if (!sel_part.note.empty()) std::fprintf(stderr, "mla-check: note: %s\n", sel_part.note.c_str());
    shard = std::move(sel_part.info);
    scenarios = std::move(sel_part.scenarios);
  }
  if (list) {
    for (const auto& s : scenarios) {
      std::string checks;
      for (auto k : s.checks) checks += std::string(checks.empty() ? "" : ",") + to_string(k);
      std::printf("%-36s %-28s %s\n", s.name.c_str(), checks.c_str(), s.file.c_str());
    }
    return kExitPass;
  }
  BackendChoice choice;
  if (const std::string bad = parse_backend_choice(backend_name, &choice); !bad.empty()) {
    std::fprintf(stderr, "mla-check: --backend: %s\n", bad.c_str());
    return kExitUsage;
  }
  // A report that cannot be written, or that would replace an input, is refused now, not after
  // the whole suite has run.
  if (!report_path.empty()) {
    for (const auto& s : scenarios) {
      if (app::same_file(report_path, s.file)) {
        std::fprintf(stderr, "mla-check: --report %s: is the scenario file %s (an input is never overwritten)\n",
                     report_path.c_str(), s.file.c_str());
        return kExitUsage;
      }
    }
    if (choice.kind == BackendChoice::Kind::kPython && app::same_file(report_path, choice.adapter)) {
      std::fprintf(stderr, "mla-check: --report %s: is the adapter file %s (an input is never overwritten)\n",
                   report_path.c_str(), choice.adapter.c_str());
      return kExitUsage;
    }
    const Status s = check_report_writable(report_path);
    if (!s.ok()) {
      std::fprintf(stderr, "mla-check: --report: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }

  if (!dump_dir.empty()) {  // refused now, not after the whole suite has run
    std::error_code ec;
    std::filesystem::create_directories(dump_dir, ec);
    if (ec || !std::filesystem::is_directory(dump_dir)) {
      std::fprintf(stderr, "mla-check: --dump: cannot create the directory %s: %s\n", dump_dir.c_str(),
                   ec ? ec.message().c_str() : "a file of that name exists");
      return kExitUsage;
    }
  }

  if (adapter_fallback && choice.kind != BackendChoice::Kind::kPython) {
    std::fprintf(stderr, "mla-check: --adapter-fallback needs --backend python:ADAPTER.py\n");
    return kExitUsage;
  }
  choice.adapter_fallback = adapter_fallback;
  // The CUDA backend's kernel policy (MLA_* variables), read once: the probe and every scenario
  // process make their backend with it, and the report records it as the probe's backend applies it.
  if (const Status s = kernel_policy_from_environment(&choice.kernels); !s.ok()) {
    std::fprintf(stderr, "mla-check: %s\n", s.message().c_str());
    return kExitUsage;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const BackendProbe probe = probe_backend(choice, !no_isolate);
  if (!probe.ok) {
    std::fprintf(stderr, "mla-check: %s\n", probe.error.c_str());
    // Asked for by name and not usable: bad usage; found by auto and then failing: runtime.
    return choice.kind == BackendChoice::Kind::kAuto ? kExitRuntime : kExitUsage;
  }

  // A scenario whose buffers cannot fit in the memory there is now is refused before anything is
  // allocated (host: MemAvailable; the CUDA device: its free memory as the probe saw it).
  {
    const bool backend_on_host = !probe.on_gpu;
    const std::optional<uint64_t> host_free = host_memory_available();
    for (const auto& s : scenarios) {
      if (probe.info.name == "host" && s.gpu_only()) continue;  // skipped on the host: allocates nothing
      const std::string refusal = memory_refusal(s, estimate_memory(s), backend_on_host, host_free, probe.free_memory);
      if (!refusal.empty()) {
        std::fprintf(stderr, "mla-check: %s\n", refusal.c_str());
        return kExitUsage;
      }
    }
  }

  const bool tty = ::isatty(STDERR_FILENO) != 0;
  SuiteOptions opt;
  opt.scenarios = std::move(scenarios);
  opt.backend = probe.resolved;
  opt.injection = *injection;
  opt.isolate = !no_isolate;
  opt.timeout_s = timeout_s;
  opt.jobs = jobs > 0 ? static_cast<size_t>(jobs) : auto_jobs(probe.on_gpu, probe.device_count);
  // Several GPUs: each scenario process gets one, by its slot (round robin).
  if (probe.on_gpu && probe.device_count > 1 && !no_isolate) {
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    opt.devices = visible_device_ids(cvd ? std::optional<std::string>(cvd) : std::nullopt, probe.device_count);
    if (opt.jobs > 1)
      std::fprintf(stderr, "mla-check: note: %zu scenario processes at once over %zu GPUs (CUDA_VISIBLE_DEVICES by slot)\n",
                   opt.jobs, opt.devices.size());
  }
  opt.dump.dir = dump_dir;
  opt.dump.max_bytes = dump_max_bytes;
  opt.repro_prefix = std::string(argv[0]) + " --backend " + to_string(probe.resolved) +
                     (adapter_fallback ? " --adapter-fallback" : "") +
                     (inject_name.empty() ? "" : " --inject " + inject_name) +
                     (seed && !fuzz ? " --seed " + std::to_string(*seed) : "");
  for (CheckKind k : only_checks)
    if (!fuzz) opt.repro_prefix += std::string(" --check ") + to_string(k);
  app::ProgressLine progress(stderr);
  if (tty) {
    opt.on_start = [&](size_t i, size_t n, const Scenario& s) { progress.started(i, n, s.name); };
    opt.on_result = [&](size_t i, size_t n, const ScenarioResult&) { progress.ended(i, n); };
  }

  RunReport report;
  report.provenance.version = tool_version();
  report.provenance.git_revision = tool_git_revision();
  report.provenance.argv.assign(argv, argv + argc);
  report.provenance.backend = probe.info.name;
  report.provenance.device = probe.info.device;
  report.provenance.runtime = probe.info.runtime;
  report.provenance.kernels = probe.info.kernels;
  report.provenance.backend_details = probe.info.details;
  report.provenance.host = hostname();
  report.provenance.started_at = utc_now_iso8601();
  report.provenance.injection = to_string(*injection);
  report.provenance.seed_override = fuzz ? std::nullopt : seed;  // with --fuzz, --seed picks the cases
  report.provenance.shard = shard;
  FuzzOutcome fuzz_out;
  if (fuzz) {
    fuzz_opt.suite = opt;
    fuzz_opt.log = [tty](const std::string& line) { std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", line.c_str()); };
    fuzz_out = run_fuzz(fuzz_opt);
    report.scenarios = fuzz_out.results;
  } else {
    report.scenarios = run_suite(opt);
  }
  report.provenance.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const app::TableMode mode = verbose ? app::TableMode::kAll : quiet ? app::TableMode::kFailures : app::TableMode::kCompact;
  app::print_table(stdout, report.scenarios, mode, ::isatty(STDOUT_FILENO) != 0);
  if (!report_path.empty()) {
    const Status s = write_report_atomic(report_path, report);
    if (!s.ok()) {
      std::fprintf(stderr, "mla-check: %s\n", s.message().c_str());
      return kExitRuntime;
    }
  }
  app::print_summary(stdout, report, report_path);
  // --dump's cap is never passed silently: each check that left arrays out says so.
  for (const auto& s : report.scenarios)
    for (const auto& c : s.checks)
      for (const auto& note : c.notes)
        if (note.rfind("--dump:", 0) == 0) std::fprintf(stderr, "mla-check: %s / %s: %s\n", s.name.c_str(), c.id.c_str(), note.c_str());
  if (fuzz) app::print_fuzz_summary(stdout, fuzz_opt, fuzz_out);

  // A failed check outranks a runtime error in the exit code: an OOB in one scenario must not
  // read as infrastructure trouble because another scenario crashed.
  bool failed = false, errored = false;
  for (const auto& s : report.scenarios) {
    failed = failed || (is_failure(s.verdict) && s.verdict != Verdict::kError);
    for (const auto& c : s.checks) failed = failed || (is_failure(c.verdict) && c.verdict != Verdict::kError);
    errored = errored || s.verdict == Verdict::kError;
  }
  if (*injection != Injection::kNone) {
    const InjectionOutcome o = injection_outcome(*injection, report.scenarios);
    std::printf("injection %s: %s\n", to_string(*injection), o.summary.c_str());
    if (!o.caught && o.exercised) return kExitFail;  // the injection altered something and no check failed: the harness's own bug
    if (!o.caught) return kExitUsage;                // nothing selected meets the injection's condition
  }
  if (failed) return kExitFail;
  return errored ? kExitRuntime : kExitPass;
}

int main(int argc, char** argv) { return app::main_guarded("mla-check", run, argc, argv); }
