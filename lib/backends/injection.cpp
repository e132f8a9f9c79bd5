#include "lib/backends/injection.h"

namespace mla {

const std::vector<InjectionInfo>& all_injections() {
  static const std::vector<InjectionInfo> kAll = {
      {Injection::kUnboundedConvert, "unbounded-convert", "convert", "OOB",
       "index conversion launched over the full-batch req_id while indices (and the output) hold only "
       "the decode rows: writes past the end of the output",
       "a conversion of fewer rows than the batch has new tokens (decode rows next to prefills)"},
      {Injection::kFlatFp8Gather, "flat-fp8-gather", "gather", "FAIL",
       "dense-prefill gather reads each 656-byte entry as 576 flat FP8 bytes with one global scale",
       "a gather of at least one row"},
      {Injection::kIgnoreSeqStarts, "ignore-seq-starts", "gather", "FAIL",
       "gather ignores seq_starts: every context chunk after the first reads the first chunk's tokens",
       "a gather where a request with rows has a non-zero seq_start"},
      {Injection::kPageSize576, "page-size-576", "layout", "FAIL",
       "KV-cache view sized by the head size (576 bytes per token) over 656-byte fp8_ds_mla pages",
       "a layout check whose view at 576 bytes per token differs from the real one"},
      {Injection::kFullBatchMetadata, "full-batch-metadata", "forward", "OOB",
       "sparse-MQA scheduler metadata built for the whole batch while q holds only the decode rows",
       "a forward step whose sparse route gets some but not all of the batch's tokens"},
      {Injection::kSplitMismatch, "split-mismatch", "forward", "FAIL",
       "routing splits decodes from prefills by the non-uniform rule, the sparse side by the uniform "
       "rule: a request with a shorter decode length falls between the two routes",
       "a forward step where the two decode-count rules disagree"},
      {Injection::kConvertBoundOffByOne, "convert-bound-off-by-one", "convert", "FAIL",
       "index conversion checks the logical block against the block-table width with > instead of >=: "
       "an index in the block just past the width reads the entry after the row (stride padding, the "
       "next request's first page) as its page",
       "a conversion with an index whose logical block equals the block-table width"},
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
