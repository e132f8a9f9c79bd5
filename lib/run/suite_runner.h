// Runs a list of scenarios on one backend and collects a RunReport. With isolation (the default)
// each scenario runs in a child process of its own: a crash, an illegal address that poisons the
// CUDA context, or a hang (killed after timeout_s) ends that scenario in ERROR and the others
// still report. Up to `jobs` scenario processes run at once; the results keep the order of
// `scenarios` whatever order they finish in. The parent never initialises CUDA (it probes the
// backend in a child too).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "lib/backends/backend_choice.h"
#include "lib/backends/injection.h"
#include "lib/run/report.h"
#include "lib/scenario/scenario.h"

namespace mla {

struct BackendProbe {
  bool ok = false;
  BackendChoice resolved;  // the choice with auto resolved: what every scenario process makes
  BackendInfo info;        // of the backend that will run
  bool on_gpu = false;     // its memory and operations are on a CUDA device
  std::optional<uint64_t> free_memory;  // Backend::free_memory() as the probe's backend saw it
  int device_count = 0;     // CUDA devices the probe's process sees (on_gpu only): what --jobs spreads over
  std::string error;       // why the requested backend cannot run
};

// Makes the chosen backend once (in a child process with `isolate`, so that this process never
// initialises CUDA or Python before it forks) and reports what it is.
BackendProbe probe_backend(const BackendChoice& choice, bool isolate);

struct SuiteOptions {
  std::vector<Scenario> scenarios;  // loaded and validated
  BackendChoice backend;            // resolved (probe_backend's)
  Injection injection = Injection::kNone;
  bool isolate = true;
  double timeout_s = 900.0;         // per scenario, with isolation, from its own process's start
  // Scenario processes at once, with isolation (0 counts as 1). Without isolation scenarios
  // always run one at a time (mla-check refuses --no-isolate with --jobs other than 1).
  size_t jobs = 1;
  // With isolation: the CUDA_VISIBLE_DEVICES each scenario process gets, by the slot it runs in
  // (device_for_slot: slot % devices.size(); a slot is the lowest one free when the scenario
  // starts, so at most ceil(jobs / devices) processes share a GPU). Empty: the processes inherit
  // this process's environment. Every scenario process also gets NVLink multicast off
  // (lib/dcp/launch_env.h).
  std::vector<std::string> devices;
  std::string repro_prefix;         // e.g. "build/bin/mla-check --backend host"
  // When set, each scenario's process makes its backend with this instead of from `backend`
  // (an embedding program's own backend, or a test's).
  std::function<std::unique_ptr<Backend>(std::string* error)> make_backend;
  DumpOptions dump;                 // --dump: each scenario writes its arrays (in its own process)
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
