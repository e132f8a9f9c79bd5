// Failure injection (DESIGN.md): --inject NAME reproduces a known failure mode of docs/semantics.md
// section 6 inside the pipeline, so the harness can prove it catches each one.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mla {

enum class Injection {
  kNone,
  kUnboundedConvert,  // docs/semantics.md §6.1: converter launched over the full-batch req_id, decode-sized output
  kFlatFp8Gather,     // docs/semantics.md §6.2: dense-path gather reads the packed cache as flat FP8
  kIgnoreSeqStarts,   // docs/semantics.md §6.3: gather ignores seq_starts
  kPageSize576,       // docs/semantics.md §6.5: cache view sized by 576 bytes per token over 656-byte pages
  kFullBatchMetadata, // docs/semantics.md §6.4: sparse scheduler metadata built for the full batch, q holds the decodes
  kSplitMismatch,     // docs/semantics.md §6.7: decode/prefill split computed two ways that disagree
};

struct InjectionInfo {
  Injection injection;
  const char* name;
  const char* expected_check;    // the check that must catch it
  const char* expected_verdict;  // the verdict that check must end in
  const char* description;
};

const std::vector<InjectionInfo>& all_injections();
const InjectionInfo& injection_info(Injection i);  // i != kNone
std::optional<Injection> injection_from_string(const std::string& name);
const char* to_string(Injection i);  // "" for kNone

}  // namespace mla
