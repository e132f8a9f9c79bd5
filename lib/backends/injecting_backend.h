// The failure injections that only alter a kernel's parameters or a kernel's result, as a Backend
// decorator over any backend (docs/semantics.md §6): every caller (the checks, the forward step)
// calls the operation as it always does and the decorator reproduces the failure.
//   ignore-seq-starts (§6.3): gather() drops seq_starts, so every request's rows start at 0.
//   flat-fp8-gather   (§6.2): gather() reads the packed 656-byte entries as the plain "fp8" cache
//                             dtype does: the first 576 bytes as FP8 E4M3 with one global scale.
//                             It runs on the host over copies of the operands (the inner backend's
//                             memory is downloaded and the rows uploaded), so it needs nothing
//                             from the backend under test but its memory copies.
//   convert-bound-off-by-one (§6.8): convert() runs the inner backend's conversion, then rewrites
//                             every element whose logical block equals the block-table width as a
//                             converter with the bound `> width` would: it reads the entry after
//                             the row's last column (the stride padding, the next row's first
//                             entry, or for the last row of an unpadded table the 4 bytes after
//                             the table, inside the harness's guard zone) as a page. Over copies,
//                             like flat-fp8-gather.
// Each reports to the probe (when given) whenever it changed what the correct call would give.
// The injections of the caller's own logic (unbounded-convert, full-batch-metadata,
// split-mismatch, page-size-576) stay where that logic is: lib/pipeline, lib/checks.
#pragma once

#include "lib/backends/forwarding_backend.h"
#include "lib/backends/injection.h"

namespace mla {

class InjectingBackend final : public ForwardingBackend {
 public:
  InjectingBackend(Backend& inner, Injection injection, InjectionProbe* probe = nullptr)
      : ForwardingBackend(inner), injection_(injection), probe_(probe) {}

  Status gather(const GatherParams& p) override;
  Status convert(const ConvertParams& p) override;

 private:
  Status gather_flat_fp8_on_host(const GatherParams& p);
  Status convert_bound_off_by_one(const ConvertParams& p);
  // Whether dropping seq_starts changes the call: some request that owns rows starts elsewhere than 0.
  Status seq_starts_matter(const GatherParams& p, bool* matter);
  void applied() {
    if (probe_ != nullptr) probe_->applied();
  }

  Injection injection_;
  InjectionProbe* probe_;
};

}  // namespace mla
