// Running one scenario on one backend: materialise the batch, generate the data, run the checks
// the scenario asks for, collect verdicts. Never throws: every failure becomes an ERROR.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "lib/backends/injection.h"
#include "lib/scenario/scenario.h"
#include "lib/checks/verdict.h"

namespace mla {

struct ScenarioResult {
  std::string name;
  std::string file;
  Verdict verdict = Verdict::kPass;
  std::string error;   // set when the scenario could not run at all (load error, crash, timeout)
  std::string repro;   // a command line that runs this scenario alone
  double duration_s = 0.0;
  std::vector<CheckResult> checks;
};

// on_check, when set, sees every check result as soon as it exists (the suite runner streams
// them out of the scenario's process, so a later crash or hang loses none of them).
ScenarioResult run_scenario(const Scenario& s, Backend& backend, Injection injection,
                            const std::function<void(const CheckResult&)>& on_check = {});

// The worst verdict of the checks (and ERROR when error is set).
Verdict scenario_verdict(const ScenarioResult& r);

// Whether an injected failure was caught: some scenario ran the injection's expected check and
// it ended in the expected verdict. summary says which scenarios caught it, or why not.
struct InjectionOutcome {
  bool exercised = false;  // some scenario ran the check that catches it
  bool caught = false;
  std::string summary;
};
InjectionOutcome injection_outcome(Injection injection, const std::vector<ScenarioResult>& results);

}  // namespace mla
