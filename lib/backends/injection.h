// Failure injection (docs/semantics.md §6): --inject NAME reproduces a known failure mode inside
// the pipeline, so the harness can prove it catches each one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mla {

enum class Injection {
  kNone,
  kUnboundedConvert,     // §6.1: converter launched over the full-batch req_id, decode-sized output
  kFlatFp8Gather,        // §6.2: dense-path gather reads the packed cache as flat FP8
  kIgnoreSeqStarts,      // §6.3: gather ignores seq_starts
  kPageSize576,          // §6.5: cache view sized by 576 bytes per token over 656-byte pages
  kFullBatchMetadata,    // §6.4: sparse scheduler metadata built for the full batch, q holds the decodes
  kSplitMismatch,        // §6.7: decode/prefill split computed two ways that disagree
  kConvertBoundOffByOne, // §6.8: converter checks the logical block against width with > instead of >=
};

struct InjectionInfo {
  Injection injection;
  const char* name;
  const char* expected_check;    // the check that must catch it
  const char* expected_verdict;  // the verdict that check must end in
  const char* description;
  const char* condition;         // when it alters anything (what "exercised" means for it)
};

const std::vector<InjectionInfo>& all_injections();
const InjectionInfo& injection_info(Injection i);  // i != kNone
std::optional<Injection> injection_from_string(const std::string& name);
const char* to_string(Injection i);  // "" for kNone

// Whether an injection did anything. The code that carries an injection out (the injecting
// backend, the convert and layout checks, the forward pipeline) calls applied() each time the
// injected path actually changed a call from what the correct code would have made: a launch over
// more rows than its buffers hold, a gather with a non-zero seq_start, a split the two rules
// disagree on, an element the wrong bound converts differently. Each check result records whether
// the count grew while it ran (metrics.extra["injection_applied"]), and injection_outcome decides
// "exercised" from that, not from which checks ran.
class InjectionProbe {
 public:
  void applied() { ++count_; }
  int64_t count() const { return count_; }

 private:
  int64_t count_ = 0;
};

// The metric name of the per-check flag: 1 when the injection altered something during the check.
inline constexpr const char* kInjectionAppliedMetric = "injection_applied";

}  // namespace mla
