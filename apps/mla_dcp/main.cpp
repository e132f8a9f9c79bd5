// mla-dcp: the scenarios' dcp checks over real ranks, one process per rank (docs/dcp.md).
// Started alone with --ranks N it forks N rank processes on this host, one GPU each; started by a
// launcher (torchrun, mpirun: RANK / WORLD_SIZE / LOCAL_RANK or OMPI_COMM_WORLD_*, with MASTER_ADDR
// and MASTER_PORT) each process is one rank, on any number of hosts. Rank 0 prints the table and
// writes the report (the mla-check report format). Exit codes as mla-check's: 0 all passed (SKIPs
// allowed), 1 a check failed, 2 bad usage or bad input (too few GPUs included), 3 a runtime error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <optional>
#include <variant>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "apps/common/cli.h"
#include "apps/common/table.h"
#include "lib/backends/backend_choice.h"
#include "lib/backends/kernel_policy_env.h"
#include "lib/dcp/communicator.h"
#include "lib/dcp/dcp_run.h"
#include "lib/dcp/launch_env.h"
#include "lib/dcp/local_launch.h"
#include "lib/run/report.h"
#include "lib/run/selection.h"
#include "lib/run/suite_runner.h"

using namespace mla;
using app::kExitFail, app::kExitPass, app::kExitRuntime, app::kExitUsage;

namespace {

// What every rank needs to know, fixed before the ranks start.
struct RunConfig {
  std::vector<Scenario> scenarios;
  BackendChoice backend;     // resolved where the parent probed it; else as given
  std::string transport;     // "nccl" or "socket"
  std::string launcher;      // "local", "torchrun" or "mpirun"
  std::string report_path;
  double timeout_s = 900.0;
  app::TableMode mode = app::TableMode::kCompact;
  std::vector<std::string> argv;
  std::string repro_prefix;
};

std::string selection_digest(const std::vector<Scenario>& scenarios) {
  std::string all;
  for (const Scenario& s : scenarios) all += s.name + ":" + std::to_string(s.seed) + ";";
  return fnv1a_hex(all.data(), all.size());
}

// What the ranks must agree on before they meet (the TCP hub compares it).
std::string run_token(const RunConfig& c, int world) {
  return std::string("mla-dcp ") + tool_version() + " (git " + tool_git_revision() + ") world " + std::to_string(world) +
         " backend " + to_string(c.backend) + " transport " + c.transport + " scenarios " +
         std::to_string(c.scenarios.size()) + "/" + selection_digest(c.scenarios);
}

int exit_code_of(const std::vector<ScenarioResult>& results) {
  bool failed = false, errored = false;
  for (const auto& s : results) {
    failed = failed || (is_failure(s.verdict) && s.verdict != Verdict::kError);
    for (const auto& c : s.checks) failed = failed || (is_failure(c.verdict) && c.verdict != Verdict::kError);
    errored = errored || s.verdict == Verdict::kError;
  }
  if (failed) return kExitFail;
  return errored ? kExitRuntime : kExitPass;
}

// One rank: its backend, the transport, every scenario; rank 0 reports.
int rank_main(const RunConfig& cfg, Exchange& exchange) {
  const int rank = exchange.rank(), world = exchange.size();
  set_multicast_off();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string started_at = utc_now_iso8601();
  std::string why;
  std::unique_ptr<Backend> backend = make_backend(cfg.backend, &why);
  std::unique_ptr<Communicator> comm;
  // The ranks meet once before anything collective: a rank without a backend must not leave the
  // others waiting for its NCCL id.
  std::vector<std::string> words;
  const std::string mine = backend ? std::string() : "cannot create the " + to_string(cfg.backend) + " backend: " + why;
  if (const Status s = exchange.all_gather(mine, cfg.timeout_s, &words); !s.ok()) {
    std::fprintf(stderr, "mla-dcp: rank %d: %s\n", rank, s.message().c_str());
    return kExitRuntime;
  }
  for (size_t r = 0; r < words.size(); ++r)
    if (!words[r].empty()) {
      if (rank == 0) std::fprintf(stderr, "mla-dcp: rank %zu: %s\n", r, words[r].c_str());
      return kExitRuntime;
    }
  const Status made = cfg.transport == "nccl" ? make_nccl_communicator(exchange, *backend, cfg.timeout_s, &comm)
                                               : Status();
  if (cfg.transport != "nccl") comm = make_socket_communicator(exchange, cfg.timeout_s);
  if (!made.ok()) {
    std::fprintf(stderr, "mla-dcp: rank %d: %s\n", rank, made.message().c_str());
    return kExitRuntime;
  }
  // Where each rank runs, for the report.
  const BackendInfo info = backend->info();
  if (const Status s = exchange.all_gather(hostname() + ": " + info.device, cfg.timeout_s, &words); !s.ok()) {
    std::fprintf(stderr, "mla-dcp: rank %d: %s\n", rank, s.message().c_str());
    return kExitRuntime;
  }

  DcpRunContext ctx{*backend, *comm, exchange, cfg.timeout_s};
  std::vector<ScenarioResult> results;
  for (const Scenario& s : cfg.scenarios) {
    ScenarioResult r = run_distributed_dcp(s, ctx);
    r.repro = cfg.repro_prefix + " --scenario " + s.file;
    results.push_back(std::move(r));
  }
  if (rank != 0) return kExitPass;

  RunReport report;
  report.provenance.tool = "mla-dcp";
  report.provenance.version = tool_version();
  report.provenance.git_revision = tool_git_revision();
  report.provenance.argv = cfg.argv;
  report.provenance.backend = info.name;
  report.provenance.device = info.device;
  report.provenance.runtime = info.runtime;
  report.provenance.kernels = info.kernels;
  report.provenance.backend_details = info.details;
  report.provenance.backend_details["dcp_ranks"] = std::to_string(world);
  report.provenance.backend_details["dcp_transport"] = comm->describe();
  report.provenance.backend_details["dcp_launcher"] = cfg.launcher;
  std::string where;
  for (size_t r = 0; r < words.size(); ++r) where += (r ? "; " : "") + std::string("rank ") + std::to_string(r) + ": " + words[r];
  report.provenance.backend_details["dcp_rank_devices"] = where;
  report.provenance.host = hostname();
  report.provenance.started_at = started_at;
  report.scenarios = std::move(results);
  report.provenance.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  app::print_table(stdout, report.scenarios, cfg.mode, ::isatty(STDOUT_FILENO) != 0);
  if (!cfg.report_path.empty()) {
    const Status s = write_report_atomic(cfg.report_path, report);
    if (!s.ok()) {
      std::fprintf(stderr, "mla-dcp: %s\n", s.message().c_str());
      return kExitRuntime;
    }
  }
  app::print_summary(stdout, report, cfg.report_path);
  std::fflush(stdout);
  return exit_code_of(report.scenarios);
}

// CUDA_VISIBLE_DEVICES of a launcher's process, from its local rank: a single entry set by the
// launcher (e.g. srun --gpus-per-task=1) is kept; a list gives the local rank's entry; unset, the
// local rank is the device index.
std::string bind_local_device(int local_rank) {
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  if (cvd == nullptr) return std::to_string(local_rank);
  const std::vector<std::string> ids = visible_device_ids(std::string(cvd), 1 << 16);
  if (ids.size() <= 1) return cvd;
  if (static_cast<size_t>(local_rank) >= ids.size()) return "";
  return ids[static_cast<size_t>(local_rank)];
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"mla-dcp: the scenarios' dcp checks over real ranks: one process per GPU, each holding its own\n"
               "shard of the cache, the partial attentions gathered with NCCL and merged by LSE (docs/dcp.md).\n"
               "Alone: --ranks N starts N ranks on this host. Under torchrun or mpirun each process is one rank."};
  SelectionOptions sel;
  std::string backend_name = "auto", transport = "auto", report_path;
  int ranks = 0;
  double timeout_s = 900.0;
  bool quiet = false, verbose = false, version = false, list = false;
  app.add_option("--ranks", ranks, "Start this many rank processes on this host (one GPU each on the cuda backend)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--backend", backend_name, "auto (cuda when a usable device is found), cuda or host")->capture_default_str();
  app.add_option("--transport", transport,
                 "How the partial results are gathered: nccl (GPUs), socket (through the hub; any backend), or "
                 "auto (nccl on the cuda backend, else socket)")
      ->check(CLI::IsMember({"auto", "nccl", "socket"}))
      ->capture_default_str();
  app::add_selection_options(app, &sel);
  app.add_option("--report", report_path, "Write the JSON report (mla-check's format) to FILE (rank 0)");
  app.add_option("--timeout", timeout_s, "Seconds a rank waits for the others at each meeting; the whole run may take "
                                         "this long per scenario")
      ->check(CLI::Range(1.0, 7 * 86400.0))
      ->capture_default_str();
  app.add_flag("--list", list, "List the selected scenarios (those with a dcp check) and exit");
  app.add_flag("-q,--quiet", quiet, "Print only failing checks and the summary");
  app.add_flag("-v,--verbose", verbose, "Print every check");
  app.add_flag("--version", version, "Print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitPass : kExitUsage;
  }
  if (version) {
    std::printf("mla-dcp %s (git %s)\n", tool_version(), tool_git_revision());
    return kExitPass;
  }
  if (app.count("--report") > 0 && report_path.empty()) {
    std::fprintf(stderr, "mla-dcp: --report: the value is empty\n");
    return kExitUsage;
  }

  RunConfig cfg;
  cfg.report_path = report_path;
  cfg.timeout_s = timeout_s;
  cfg.mode = verbose ? app::TableMode::kAll : quiet ? app::TableMode::kFailures : app::TableMode::kCompact;
  cfg.argv.assign(argv, argv + argc);
  sel.only_checks = {CheckKind::kDcp};
  std::optional<std::vector<Scenario>> selected = app::select_or_explain("mla-dcp", sel);
  if (!selected) return kExitUsage;
  cfg.scenarios = std::move(*selected);
  if (list) {
    for (const auto& s : cfg.scenarios)
      std::printf("%-36s interleave %-4d %s\n", s.name.c_str(), s.attention.dcp_interleave, s.file.c_str());
    return kExitPass;
  }
  if (const std::string bad = parse_backend_choice(backend_name, &cfg.backend); !bad.empty()) {
    std::fprintf(stderr, "mla-dcp: --backend: %s\n", bad.c_str());
    return kExitUsage;
  }
  if (cfg.backend.kind == BackendChoice::Kind::kPython) {
    std::fprintf(stderr, "mla-dcp: --backend %s: the distributed run takes the harness's backends (cuda, host)\n",
                 backend_name.c_str());
    return kExitUsage;
  }
  if (const Status s = kernel_policy_from_environment(&cfg.backend.kernels); !s.ok()) {
    std::fprintf(stderr, "mla-dcp: %s\n", s.message().c_str());
    return kExitUsage;
  }
  if (!report_path.empty()) {
    if (const Status s = check_report_writable(report_path); !s.ok()) {
      std::fprintf(stderr, "mla-dcp: --report: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  std::string nccl_why;
  const bool have_nccl = nccl_available(&nccl_why);
  if (transport == "nccl" && !have_nccl) {
    std::fprintf(stderr, "mla-dcp: --transport nccl is unavailable: %s\n", nccl_why.c_str());
    return kExitUsage;
  }

  const LaunchInfoResult launched = launch_info_from_env(process_env());
  if (!launched.error.empty()) {
    std::fprintf(stderr, "mla-dcp: %s\n", launched.error.c_str());
    return kExitUsage;
  }
  if (launched.info) {
    // One rank of a launcher's run.
    const LaunchInfo& li = *launched.info;
    if (ranks != 0 && ranks != li.world) {
      std::fprintf(stderr, "mla-dcp: --ranks %d, but %s started %d processes (WORLD_SIZE)\n", ranks,
                   li.launcher.c_str(), li.world);
      return kExitUsage;
    }
    if (cfg.backend.kind != BackendChoice::Kind::kHost) {
      const std::string device = bind_local_device(li.local_rank);
      if (device.empty()) {
        std::fprintf(stderr, "mla-dcp: rank %d: local rank %d has no entry in CUDA_VISIBLE_DEVICES=%s\n", li.rank,
                     li.local_rank, std::getenv("CUDA_VISIBLE_DEVICES"));
        return kExitUsage;
      }
      ::setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);  // before any CUDA call in this process
    }
    set_multicast_off();
    cfg.backend = resolve_auto(cfg.backend);
    cfg.transport = transport == "auto" ? (cfg.backend.kind == BackendChoice::Kind::kCuda && have_nccl ? "nccl" : "socket")
                                        : transport;
    cfg.launcher = li.launcher;
    cfg.repro_prefix = std::string(argv[0]) + " --backend " + to_string(cfg.backend) + " --transport " + cfg.transport;
    std::unique_ptr<Exchange> exchange;
    std::unique_ptr<TcpListener> listener;
    Status s;
    if (li.world == 1) {
      exchange = solo_exchange();
    } else if (li.rank == 0) {
      s = TcpListener::open(li.port, &listener);
      if (s.ok()) s = accept_hub_peers(*listener, li.world, run_token(cfg, li.world), cfg.timeout_s, &exchange);
      else s = Status::error("rank 0: " + s.message() + " (MLA_DCP_PORT chooses another port)");
    } else {
      s = connect_to_hub(li.master_addr, li.port, li.rank, li.world, run_token(cfg, li.world), cfg.timeout_s, &exchange);
    }
    if (!s.ok()) {
      std::fprintf(stderr, "mla-dcp: %s\n", s.message().c_str());
      return kExitRuntime;
    }
    return rank_main(cfg, *exchange);
  }

  // Alone: this process starts the ranks and relays between them; it never initialises CUDA
  // (the backend is probed in a child process).
  if (ranks == 0) {
    std::fprintf(stderr, "mla-dcp: give --ranks N, or start it under torchrun or mpirun (docs/dcp.md)\n");
    return kExitUsage;
  }
  const BackendProbe probe = probe_backend(cfg.backend, /*isolate=*/true);
  if (!probe.ok) {
    std::fprintf(stderr, "mla-dcp: %s\n", probe.error.c_str());
    return cfg.backend.kind == BackendChoice::Kind::kAuto ? kExitRuntime : kExitUsage;
  }
  cfg.backend = probe.resolved;
  cfg.transport = transport == "auto" ? (probe.on_gpu && have_nccl ? "nccl" : "socket") : transport;
  if (cfg.transport == "nccl" && !probe.on_gpu) {
    std::fprintf(stderr, "mla-dcp: --transport nccl needs the cuda backend (the %s backend was chosen)\n",
                 probe.info.name.c_str());
    return kExitUsage;
  }
  LocalLaunchOptions lo;
  lo.world = ranks;
  if (probe.on_gpu) {
    if (probe.device_count < ranks) {
      std::fprintf(stderr, "mla-dcp: needs %d GPUs for --ranks %d, %d visible\n", ranks, ranks, probe.device_count);
      return kExitUsage;
    }
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    lo.devices = visible_device_ids(cvd ? std::optional<std::string>(cvd) : std::nullopt, probe.device_count);
    lo.devices.resize(static_cast<size_t>(ranks));
  }
  lo.timeout_s = cfg.timeout_s * static_cast<double>(cfg.scenarios.size() + 2);
  cfg.launcher = "local";
  cfg.repro_prefix = std::string(argv[0]) + " --ranks " + std::to_string(ranks) + " --backend " + to_string(cfg.backend) +
                     " --transport " + cfg.transport;
  const LocalLaunchOutcome outcome =
      launch_local_ranks(lo, [&](int, int, Exchange& exchange) { return rank_main(cfg, exchange); });
  if (!outcome.error.empty()) std::fprintf(stderr, "mla-dcp: %s\n", outcome.error.c_str());
  return outcome.run_exit_code();
}

int main(int argc, char** argv) { return app::main_guarded("mla-dcp", run, argc, argv); }
