#include "lib/backends/injection.h"

namespace mla {

const std::vector<InjectionInfo>& all_injections() {
  static const std::vector<InjectionInfo> kAll = {
      {Injection::kUnboundedConvert, "unbounded-convert", "convert", "OOB",
       "index conversion launched over the full-batch req_id while indices (and the output) hold only "
       "the decode rows: writes past the end of the output"},
      {Injection::kFlatFp8Gather, "flat-fp8-gather", "gather", "FAIL",
       "dense-prefill gather reads each 656-byte entry as 576 flat FP8 bytes with one global scale"},
      {Injection::kIgnoreSeqStarts, "ignore-seq-starts", "gather", "FAIL",
       "gather ignores seq_starts: every context chunk after the first reads the first chunk's tokens"},
      {Injection::kPageSize576, "page-size-576", "layout", "FAIL",
       "KV-cache view sized by the head size (576 bytes per token) over 656-byte fp8_ds_mla pages"},
      {Injection::kFullBatchMetadata, "full-batch-metadata", "forward", "OOB",
       "sparse-MQA scheduler metadata built for the whole batch while q holds only the decode rows"},
      {Injection::kSplitMismatch, "split-mismatch", "forward", "FAIL",
       "routing splits decodes from prefills by the non-uniform rule, the sparse side by the uniform "
       "rule: a request with a shorter decode length falls between the two routes"},
  };
  return kAll;
}

const InjectionInfo& injection_info(Injection inj) {
  for (const auto& i : all_injections())
    if (i.injection == inj) return i;
  return all_injections().front();
}

std::optional<Injection> injection_from_string(const std::string& name) {
  if (name.empty() || name == "none") return Injection::kNone;
  for (const auto& i : all_injections())
    if (name == i.name) return i.injection;
  return std::nullopt;
}

const char* to_string(Injection inj) {
  for (const auto& i : all_injections())
    if (i.injection == inj) return i.name;
  return "";
}

}  // namespace mla
