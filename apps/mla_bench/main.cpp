// mla-bench: throughput sweeps of the cache-path kernels (pack, gather + upconvert, top-k index
// conversion) and of attention (sparse MQA, dense MHA, the whole forward step) on Google
// Benchmark, timed on the device with cold L2, against roofline figures measured in the same run
// (copy bandwidth, bf16 GEMM rate). docs/benchmarks.md explains the output.
//
// Flags: every --benchmark_* flag of Google Benchmark (consumed first by benchmark::Initialize),
// then ours (CLI11). Exit codes: 0 ok, 2 bad usage or bad input, 3 a runtime or device error.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <benchmark/benchmark.h>

#include "apps/common/cli.h"
#include "apps/mla_bench/bench_attention_ops.h"
#include "apps/mla_bench/benchmark_flags.h"
#include "apps/mla_bench/bench_cache_ops.h"
#include "apps/mla_bench/bench_dcp.h"
#include "apps/mla_bench/device_timer.h"
#include "apps/mla_bench/dump.h"
#include "apps/mla_bench/l2_flush.h"
#include "apps/mla_bench/list_shapes.h"
#include "apps/mla_bench/roofline.h"
#include "apps/mla_bench/sweep.h"
#include "kernels/backend.h"
#include "lib/backends/backend_choice.h"
#include "lib/backends/kernel_policy_env.h"
#include "lib/run/report.h"

namespace {

using namespace mla;
using namespace mla::bench;

constexpr int kExitOk = 0, kExitUsage = 2, kExitRuntime = 3;

constexpr const char* kBenchmarkFlagsHelp =
    "Google Benchmark flags (all accepted), e.g.:\n"
    "  --benchmark_filter=REGEX         run only matching benchmarks (names: pack/B:64/tokens:1024,\n"
    "                                   gather/B:61/seq_starts:on/rows:4096, convert/B:64/K:2048/rows:64,\n"
    "                                   sparse_mqa/batch:128/q:2/H:128/K:2048/seq:8192,\n"
    "                                   dense_mha/H:128/reqs:1/tokens:8192, forward/mixed_medium/H:128/K:2048,\n"
    "                                   route/dense/H:128/K:2048/prefill:256,\n"
    "                                   dcp/ranks:4/batch:128/q:2/H:128/K:2048/seq:131072)\n"
    "  --benchmark_out=FILE --benchmark_out_format=json|csv|console\n"
    "  --benchmark_repetitions=N        default: the sweep's \"repetitions\" (5 in cache_path)\n"
    "  --benchmark_report_aggregates_only=true|false   default: true (mean/median/stddev/cv)\n"
    "  --benchmark_min_time=T           default: the sweep's \"min_time_s\" of timed time per repetition\n"
    "  --benchmark_list_tests=true      list the benchmark names and exit\n";

bool help_requested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "-help")) return true;
  }
  return false;
}

std::string human_rate(double bytes_per_second) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", bytes_per_second / 1e9);
  return buf;
}

std::string human_flops(double flops_per_second) {
  char buf[64];
  if (flops_per_second >= 1e12) {
    std::snprintf(buf, sizeof buf, "%.1f TFLOP/s", flops_per_second / 1e12);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", flops_per_second / 1e9);
  }
  return buf;
}

int list_sweeps() {
  for (const std::string& name : builtin_sweep_names()) {
    Sweep s;
    Status st = load_sweep(name, &s);
    if (!st.ok()) {
      std::fprintf(stderr, "mla-bench: %s\n", st.message().c_str());
      return kExitUsage;
    }
    const size_t shapes = s.pack_tokens.size() +
                          s.gather_block_sizes.size() * s.gather_seq_starts.size() * s.gather_rows.size() +
                          s.convert_topk.size() * s.convert_rows.size() + s.sparse_shapes.size() +
                          s.dense_shapes.size() + s.forward_batches.size() + s.route_shapes.size() +
                          s.dcp_shapes.size() * s.dcp_ranks.size();
    std::printf("%-12s %3zu shapes, %d repetitions  %s\n", name.c_str(), shapes, s.repetitions, s.description.c_str());
  }
  std::printf("(or --sweep FILE with a sweep file: docs/benchmarks.md)\n");
  return kExitOk;
}

struct Options {
  std::string backend = "auto";
  bool adapter_fallback = false;
  std::string sweep;
  std::string dump_dir;
  bool list_sweeps = false, quick = false, no_host_caps = false, version = false;
  bool list_shapes = false, json = false;
  int64_t lead_cycles = L2Flusher::kDefaultLeadCycles;
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--backend", o.backend,
                 "auto (cuda when available), host, cuda, or python:ADAPTER.py (an implementation under test, timed "
                 "by the same protocol: docs/adapters.md)")
      ->capture_default_str();
  app.add_flag("--adapter-fallback", o.adapter_fallback,
               "With python:ADAPTER.py: operations the adapter lacks run on the harness's own backend");
  auto* sweep = app.add_option("--sweep", o.sweep,
                               "Built-in sweep name or sweep file (default: cache_path; see --list-sweeps)");
  app.add_flag("--quick", o.quick, "The small 'quick' sweep (a smoke test); same as --sweep quick")->excludes(sweep);
  app.add_flag("--list-sweeps", o.list_sweeps, "List the built-in sweeps and exit");
  auto* shapes_flag = app.add_flag(
      "--list-shapes", o.list_shapes,
      "List every shape the sweep registers (benchmark name, bytes and FLOPs per call as the counters "
      "count them) and exit, without a backend or a GPU; --no-host-caps does not apply (host-capped "
      "shapes are marked)");
  app.add_flag("--json", o.json,
               "With --list-shapes: print JSON (\"schema\": \"mla-bench.shapes/1\"): the sweep's seed, "
               "repetitions and min_time_s, and per shape its name and run_name, op, the parameters that "
               "build its inputs, items, bytes, flops, model details and host_capped (read by "
               "scripts/peer_timing.py)")
      ->needs(shapes_flag);
  app.add_option("--dump", o.dump_dir,
                 "Run one small shape of each operation, write inputs, outputs and manifest.json to DIR "
                 "(for scripts/peer_check.py), and exit");
  app.add_flag("--no-host-caps", o.no_host_caps, "Host backend: also run shapes above the sweep's host limits");
  app.add_option("--lead-cycles", o.lead_cycles,
                 "GPU: SM clock cycles one thread spins before each L2 flush, so that the timed launches are "
                 "queued before the start event (0: none; scripts/peer_timing.py uses the same count)")
      ->check(CLI::Range(int64_t{0}, L2Flusher::kMaxLeadCycles))
      ->capture_default_str();
  app.add_flag("--version", o.version, "Print the version and exit");
  app.footer(kBenchmarkFlagsHelp);
}

std::string sweep_name(const Options& o) { return o.quick ? "quick" : (o.sweep.empty() ? "cache_path" : o.sweep); }

// Options whose empty value means something else (the default sweep, no dump) are refused when
// given empty: "--sweep ''" from an unset shell variable must not run the default sweep.
std::string empty_option(const CLI::App& app, const Options& o) {
  const std::pair<const char*, const std::string*> opts[] = {
      {"--sweep", &o.sweep}, {"--dump", &o.dump_dir}, {"--backend", &o.backend}};
  for (const auto& [name, value] : opts) {
    if (app.count(name) > 0 && value->empty()) return std::string(name) + ": the value is empty";
  }
  return "";
}

// --dump DIR: an existing non-directory, or a folder that cannot be made, is refused before the
// backend is made ("" when DIR is usable).
std::string dump_dir_problem(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!ec && fs::exists(st) && !fs::is_directory(st)) return "--dump " + dir + ": exists and is not a directory";
  fs::create_directories(dir, ec);
  if (ec) return "--dump " + dir + ": cannot create the directory: " + ec.message();
  if (::access(dir.c_str(), W_OK) != 0) return "--dump " + dir + ": cannot write into it: " + std::strerror(errno);
  return "";
}

}  // namespace

int run(int argc, char** argv) {
  const char* description =
      "mla-bench: throughput of the sparse-MLA cache-path kernels (pack, gather, convert) and of\n"
      "attention (sparse MQA, dense MHA, the forward step), device-timed with cold L2, against the\n"
      "copy bandwidth and the bf16 GEMM rate measured in the same run.";
  if (help_requested(argc, argv)) {
    CLI::App app{description, "mla-bench"};
    Options unused;
    add_options(app, unused);
    std::printf("%s", app.help().c_str());
    return kExitOk;
  }

  BenchmarkFlags bm_flags;
  if (const std::string bad = check_benchmark_flags(argc, argv, &bm_flags); !bad.empty()) {
    std::fprintf(stderr, "mla-bench: %s\n", bad.c_str());
    return kExitUsage;
  }
  // The sweep sets the defaults of --benchmark_repetitions, --benchmark_report_aggregates_only
  // and --benchmark_min_time. They are passed as flags ahead of the user's (the last occurrence
  // wins; one set in a BENCHMARK_* variable is left alone), so that Google Benchmark's own flags
  // override them and benchmark names do not depend on them. Our flags are read leniently here
  // to find the sweep; errors are reported by the full parse below.
  Sweep sweep;
  Status sweep_status;
  {
    CLI::App pre{description, "mla-bench"};
    Options o;
    add_options(pre, o);
    pre.allow_extras();
    try {
      pre.parse(argc, argv);
    } catch (const CLI::Error&) {
    }
    sweep_status = load_sweep(sweep_name(o), &sweep);
  }
  std::vector<std::string> defaults;
  if (sweep_status.ok()) {
    if (!benchmark_flag_given(argc, argv, "benchmark_repetitions"))
      defaults.push_back("--benchmark_repetitions=" + std::to_string(sweep.repetitions));
    if (!benchmark_flag_given(argc, argv, "benchmark_report_aggregates_only") &&
        !benchmark_flag_given(argc, argv, "benchmark_display_aggregates_only"))
      defaults.push_back("--benchmark_report_aggregates_only=true");
    if (!benchmark_flag_given(argc, argv, "benchmark_min_time")) defaults.push_back(min_time_flag(sweep.min_time_s));
  }
  std::vector<char*> args;
  args.push_back(argv[0]);
  for (auto& d : defaults) args.push_back(d.data());
  for (auto& a : bm_flags.args) args.push_back(a.data());
  int args_count = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&args_count, args.data());  // removes the --benchmark_* flags it knows

  CLI::App app{description, "mla-bench"};
  Options opt;
  add_options(app, opt);
  try {
    app.parse(args_count, args.data());
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (const std::string e = empty_option(app, opt); !e.empty()) {
    std::fprintf(stderr, "mla-bench: %s\n", e.c_str());
    return kExitUsage;
  }
  if (opt.version) {
    std::printf("mla-bench %s (git %s)\n", tool_version(), tool_git_revision());
    return kExitOk;
  }
  if (opt.list_sweeps) return list_sweeps();
  if (!sweep_status.ok()) {
    std::fprintf(stderr, "mla-bench: %s\n", sweep_status.message().c_str());
    return kExitUsage;
  }
  if (opt.list_shapes) return list_shapes(sweep, opt.json);
  if (bm_flags.out && sweep.source != "built-in" && app::same_file(*bm_flags.out, sweep.source)) {
    std::fprintf(stderr, "mla-bench: --benchmark_out %s: is the sweep file (an input is never overwritten)\n",
                 bm_flags.out->c_str());
    return kExitUsage;
  }
  if (!opt.dump_dir.empty()) {
    if (const std::string problem = dump_dir_problem(opt.dump_dir); !problem.empty()) {
      std::fprintf(stderr, "mla-bench: %s\n", problem.c_str());
      return kExitUsage;
    }
  }
  RegisterOptions options;
  options.host_caps = !opt.no_host_caps;
  const std::string& backend_name = opt.backend;
  const std::string& dump_dir = opt.dump_dir;

  std::unique_ptr<Backend> backend;
  BackendChoice choice;
  {
    if (const std::string bad = parse_backend_choice(backend_name, &choice); !bad.empty()) {
      std::fprintf(stderr, "mla-bench: --backend: %s\n", bad.c_str());
      return kExitUsage;
    }
    if (opt.adapter_fallback && choice.kind != BackendChoice::Kind::kPython) {
      std::fprintf(stderr, "mla-bench: --adapter-fallback needs --backend python:ADAPTER.py\n");
      return kExitUsage;
    }
    choice.adapter_fallback = opt.adapter_fallback;
    // The CUDA backend's kernel policy (MLA_* variables), read once; info.kernels (the context's
    // mla_kernels) records it as the backend applies it.
    if (const Status s = kernel_policy_from_environment(&choice.kernels); !s.ok()) {
      std::fprintf(stderr, "mla-bench: %s\n", s.message().c_str());
      return kExitUsage;
    }
    // The dcp sweep's workers are processes of their own, one per GPU (bench_dcp.h).
    if (sweep.has_dcp()) return run_dcp_sweep(sweep, choice);
    std::string why;
    backend = make_backend(choice, &why);
    if (!backend) {
      std::fprintf(stderr, "mla-bench: --backend %s: %s\n", backend_name.c_str(), why.c_str());
      // Asked for by name and not there: a usage error, as in mla-check; found by auto and then
      // failing: a runtime error.
      return choice.kind == BackendChoice::Kind::kAuto ? kExitRuntime : kExitUsage;
    }
  }
  const BackendInfo info = backend->info();

  if (!dump_dir.empty()) {
    Status st = write_dump(*backend, dump_dir, sweep.seed);
    if (!st.ok()) {
      std::fprintf(stderr, "mla-bench: %s\n", st.message().c_str());
      return kExitRuntime;
    }
    std::printf("mla-bench: wrote pack, gather and convert inputs and %s outputs (%s) to %s/manifest.json\n",
                info.name.c_str(), info.device.c_str(), dump_dir.c_str());
    return kExitOk;
  }

  // What runs: the sweep's shapes that --benchmark_filter keeps, less those above the host caps
  // on the host. Nothing is refused here, before the roofline is measured, instead of a run that
  // measures nothing and exits 0.
  {
    const bool capped = backend->native_device().kind == NativeDevice::Kind::kHost && options.host_caps;
    size_t matching = 0, matching_capped = 0;
    const nlohmann::ordered_json shapes = shapes_json(sweep);
    for (const auto& shape : shapes.at("shapes")) {
      if (bm_flags.filter && !filter_matches(*bm_flags.filter, shape["run_name"].get<std::string>())) continue;
      ++matching;
      if (capped && shape["host_capped"].get<bool>()) ++matching_capped;
    }
    const std::string filter = bm_flags.filter ? " --benchmark_filter='" + *bm_flags.filter + "'" : "";
    if (matching == 0) {
      std::fprintf(stderr,
                   "mla-bench:%s matches none of the %zu benchmarks of sweep '%s' (their names: mla-bench --sweep %s "
                   "--list-shapes)\n",
                   filter.empty() ? " the sweep" : filter.c_str(), shapes.at("shapes").size(),
                   sweep.name.c_str(), sweep_name(opt).c_str());
      return kExitUsage;
    }
    if (matching == matching_capped) {
      std::fprintf(stderr,
                   "mla-bench:%s leaves only shapes above the sweep's host limits (%zu), which the host backend does "
                   "not run; --no-host-caps runs them\n",
                   filter.empty() ? " the sweep" : filter.c_str(), matching);
      return kExitUsage;
    }
  }

  std::unique_ptr<DeviceTimer> timer;
  std::unique_ptr<L2Flusher> flusher;
  BenchEnv env;
  env.backend = backend.get();
  env.sweep = sweep;
  env.harness = HarnessBackend(backend->native_device().kind, choice.kernels);
  Status st = DeviceTimer::create(*backend, &timer);
  if (st.ok()) st = L2Flusher::create(*backend, timer->stream(), opt.lead_cycles, &flusher);
  if (st.ok()) st = measure_roofline(*backend, *timer, &env.roofline);
  if (!st.ok()) {
    std::fprintf(stderr, "mla-bench: setup on %s failed: %s\n", info.name.c_str(), st.message().c_str());
    return kExitRuntime;
  }
  env.timer = timer.get();
  env.flusher = flusher.get();
  // The GEMM ceiling, when the sweep has attention shapes (it is what their FLOP/s are read against;
  // the harness's own backend of the device measures it for an adapter without gemm).
  GemmCeiling gemm;
  if (sweep.has_attention()) {
    st = measure_gemm_ceiling(*backend, *timer, env.harness, &gemm);
    if (!st.ok()) {
      std::fprintf(stderr, "mla-bench: measuring the GEMM ceiling on %s failed: %s\n", info.name.c_str(),
                   st.message().c_str());
      return kExitRuntime;
    }
  }

  RegisterResult reg = register_cache_benchmarks(&env, options);
  const RegisterResult attn = register_attention_benchmarks(&env, &gemm, options);
  reg.registered += attn.registered;
  reg.left_out.insert(reg.left_out.end(), attn.left_out.begin(), attn.left_out.end());
  if (!reg.left_out.empty()) {
    std::fprintf(stderr,
                 "mla-bench: host backend: %zu shapes above the sweep's host limits are not run "
                 "(%s ... %s); --no-host-caps runs them\n",
                 reg.left_out.size(), reg.left_out.front().c_str(), reg.left_out.back().c_str());
  }

  // Context: printed in the console header and stored in the JSON output's "context".
  benchmark::AddCustomContext("mla_version", std::string(tool_version()) + " (git " + tool_git_revision() + ")");
  benchmark::AddCustomContext("mla_backend", info.name);
  benchmark::AddCustomContext("mla_device", info.device);
  if (!info.runtime.empty()) benchmark::AddCustomContext("mla_runtime", info.runtime);
  if (!info.kernels.empty()) benchmark::AddCustomContext("mla_kernels", info.kernels);
  for (const auto& [key, value] : info.details) benchmark::AddCustomContext("mla_backend_" + key, value);
  benchmark::AddCustomContext("mla_sweep", sweep.name + " (" + sweep.source + ")");
  benchmark::AddCustomContext("mla_timing", timer->on_device()
                                                ? "CUDA events on the backend stream, L2 flushed before each iteration after the lead (mla_lead_cycles)"
                                                : "std::chrono around each call (host: warm cache)");
  benchmark::AddCustomContext("mla_copy_bw_bytes_per_second", std::to_string(env.roofline.copy_bytes_per_second));
  benchmark::AddCustomContext("mla_copy_bw", human_rate(env.roofline.copy_bytes_per_second));
  if (env.roofline.empty_launch_seconds > 0.0) {
    benchmark::AddCustomContext("mla_empty_launch_us", std::to_string(env.roofline.empty_launch_seconds * 1e6));
  }
  benchmark::AddCustomContext("mla_roofline_method", env.roofline.method);
  if (gemm.flops_per_second > 0.0) {
    benchmark::AddCustomContext("mla_gemm_flops_per_second", std::to_string(gemm.flops_per_second));
    benchmark::AddCustomContext("mla_gemm_flops", human_flops(gemm.flops_per_second));
  }
  if (!gemm.method.empty()) benchmark::AddCustomContext("mla_gemm_method", gemm.method);
  if (!gemm.backend.empty()) benchmark::AddCustomContext("mla_gemm_ceiling_backend", gemm.backend);
  if (flusher->buffer_bytes() > 0) {
    benchmark::AddCustomContext("mla_l2_flush", std::to_string(flusher->buffer_bytes()) + " bytes read (L2 " +
                                                    std::to_string(flusher->l2_bytes()) + " bytes)");
    // scripts/peer_timing.py --ours reads this count and runs the same lead.
    benchmark::AddCustomContext("mla_lead_cycles", std::to_string(flusher->lead_cycles()));
  }

  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  release_benchmark_state();
  release_attention_state();
  if (ran == 0) {  // the check above makes this unreachable unless Google Benchmark disagrees with it
    std::fprintf(stderr, "mla-bench: no benchmark ran (see the message above)\n");
    return kExitUsage;
  }
  const int runtime_errors = benchmark_runtime_errors() + attention_runtime_errors();
  if (runtime_errors > 0) {
    std::fprintf(stderr, "mla-bench: %d benchmark(s) failed with a runtime error (see error_message above)\n",
                 runtime_errors);
    return kExitRuntime;
  }
  return kExitOk;
}

int main(int argc, char** argv) { return app::main_guarded("mla-bench", run, argc, argv); }
