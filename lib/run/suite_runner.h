// Runs a list of scenarios on one backend and collects a RunReport. With isolation (the default)
// each scenario runs in a child process of its own: a crash, an illegal address that poisons the
// CUDA context, or a hang (killed after timeout_s) ends that scenario in ERROR and the others
// still report. Up to `jobs` scenario processes run at once; the results keep the order of
// `scenarios` whatever order they finish in. The parent never initialises CUDA (it probes the
// backend in a child too).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "lib/backends/injection.h"
#include "lib/run/report.h"
#include "lib/scenario/scenario.h"

namespace mla {

enum class BackendChoice { kAuto, kHost, kCuda };

struct BackendProbe {
  bool ok = false;
  BackendInfo info;   // of the backend that will run
  std::string error;  // why the requested backend cannot run
};

// Resolves auto (cuda when a device is usable, else host) and reports the chosen backend's info
// (a CUDA backend's made with `kernels`).
BackendProbe probe_backend(BackendChoice choice, const KernelPolicy& kernels, bool isolate);

// Creates the backend named by info.name ("host" or "cuda") in this process; `kernels` is the CUDA
// backend's policy (the host backend has none).
std::unique_ptr<Backend> make_backend(const std::string& name, const KernelPolicy& kernels, std::string* error);

struct SuiteOptions {
  std::vector<Scenario> scenarios;  // loaded and validated
  std::string backend;              // "host" or "cuda" (after probe_backend)
  KernelPolicy kernels;             // the CUDA backend's (the one given to probe_backend)
  Injection injection = Injection::kNone;
  bool isolate = true;
  double timeout_s = 900.0;         // per scenario, with isolation, from its own process's start
  // Scenario processes at once, with isolation (0 counts as 1). Without isolation scenarios
  // always run one at a time (mla-check refuses --no-isolate with --jobs other than 1).
  size_t jobs = 1;
  std::string repro_prefix;         // e.g. "build/bin/mla-check --backend host"
  // Progress display; i is the scenario's index in `scenarios`. on_start is called in that order,
  // just before each scenario starts; on_result after each one ends, in the order they end (the
  // same order when jobs is 1). An exception from either ends run_suite and kills the scenario
  // processes still running.
  std::function<void(size_t i, size_t n, const Scenario&)> on_start;
  std::function<void(size_t i, size_t n, const ScenarioResult&)> on_result;
};

// One result per scenario, at the scenario's index.
std::vector<ScenarioResult> run_suite(const SuiteOptions& opt);

}  // namespace mla
