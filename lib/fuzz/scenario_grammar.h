// The fuzzer's scenario grammar (docs/fuzzing.md): random but valid scenarios that reach every
// axis of the scenario format (docs/scenarios.md), small enough that one runs in seconds on the
// host backend.
//
// A case is a pure function of (fuzz seed, case index, options): it draws only from
// Rng(seed).fork(index) (lib/batch/rng.h, identical on every machine and standard library), in a
// fixed order, with no std:: distributions and no unordered containers, so the same seed gives
// the same scenarios everywhere, and case i does not depend on how many cases ran before it. The
// order of draws is part of what a seed means: changing it changes every fuzz run's cases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/scenario/scenario.h"

namespace mla {

struct GrammarOptions {
  // The checks a generated scenario may list (mla-check --fuzz with --check); empty: every check.
  std::vector<CheckKind> checks;
};

// "fuzz_s<seed>_c<index>": the case's scenario name.
std::string fuzz_case_name(uint64_t fuzz_seed, uint64_t index);

// Case `index` of the fuzz run `fuzz_seed`. The result passes validate_scenario and the loader's
// per-field rules; cache.num_blocks is resolved as load_scenario resolves it. Its own `seed` (the
// data of the batch, pages, cache and indices) is drawn from the same stream. file is
// "fuzz:<seed>:<index>". Throws std::logic_error when a drawn scenario fails validation (a
// grammar bug, never an expected outcome).
Scenario generate_fuzz_scenario(uint64_t fuzz_seed, uint64_t index, const GrammarOptions& options = {});

// The work the attention checks of `s` do, in units of one head x one attended key (sparse, per
// new token: the keys it can see up to top-k; dense, per prefill: query x key pairs), times the
// number of attention passes the listed checks make. The grammar keeps it under
// kFuzzAttentionWorkCap so that a case runs in about a second on the host backend.
int64_t attention_work(const Scenario& s);
inline constexpr int64_t kFuzzAttentionWorkCap = 600'000;

}  // namespace mla
