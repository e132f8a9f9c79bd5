// Running one scenario on one backend: materialise the batch, generate the data, run the checks
// the scenario asks for, collect verdicts. Never throws: every failure becomes an ERROR.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "lib/backends/injection.h"
#include "lib/checks/verdict.h"
#include "lib/run/dump_writer.h"
#include "lib/scenario/scenario.h"

namespace mla {

struct ScenarioResult {
  std::string name;
  std::string file;
  Verdict verdict = Verdict::kPass;
  std::string error;   // set when the scenario could not run at all (load error, crash, timeout)
  std::string repro;   // a command line that runs this scenario alone
  double duration_s = 0.0;
  std::vector<CheckResult> checks;
  // CUDA_VISIBLE_DEVICES of the scenario's process when the suite runner spread the scenarios
  // over several GPUs (SuiteOptions::devices); empty otherwise.
  std::string cuda_visible_devices;
};

// on_check, when set, sees every check result as soon as it exists (the suite runner streams
// them out of the scenario's process, so a later crash or hang loses none of them). With an
// injection every check result records whether it altered anything (kInjectionAppliedMetric);
// with dump.dir set the checks' arrays are written there (lib/run/dump_writer.h).
ScenarioResult run_scenario(const Scenario& s, Backend& backend, Injection injection,
                            const std::function<void(const CheckResult&)>& on_check = {},
                            const DumpOptions& dump = {});

// The worst verdict of the checks (and ERROR when error is set).
Verdict scenario_verdict(const ScenarioResult& r);

// Whether an injected failure was caught, decided by the injection's own condition: a check
// result exercised it when the injected code path altered something while the check ran
// (kInjectionAppliedMetric is 1). Caught: some exercised result ended in FAIL, NONFINITE or OOB.
// Not caught: some check exercised it and none of those failed (the harness's own bug). Not
// exercised: nothing it ran met the injection's condition (whatever failed beside it). summary
// says where it was caught (and whether the expected check and verdict were among them), or why
// not.
struct InjectionOutcome {
  bool exercised = false;  // some check result altered by the injection
  bool caught = false;     // one of those failed
  bool expected_seen = false;  // one of those is the expected check ending in the expected verdict
  std::string summary;
};
InjectionOutcome injection_outcome(Injection injection, const std::vector<ScenarioResult>& results);

}  // namespace mla
