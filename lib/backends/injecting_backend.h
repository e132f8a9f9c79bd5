// The failure injections that only alter a kernel's parameters or replace a kernel, as a Backend
// decorator over any backend (docs/semantics.md §6): every caller (the checks, the forward step)
// calls the operation as it always does and the decorator reproduces the failure.
//   ignore-seq-starts (§6.3): gather() drops seq_starts, so every request's rows start at 0.
//   flat-fp8-gather   (§6.2): gather() reads the packed 656-byte entries as the plain "fp8" cache
//                             dtype does: the first 576 bytes as FP8 E4M3 with one global scale.
//                             It runs on the host over copies of the operands (the inner backend's
//                             memory is downloaded and the rows uploaded), so it needs nothing
//                             from the backend under test but its memory copies.
// The injections of the caller's own logic (unbounded-convert, full-batch-metadata,
// split-mismatch, page-size-576) stay where that logic is: lib/pipeline, lib/checks.
#pragma once

#include "lib/backends/forwarding_backend.h"
#include "lib/backends/injection.h"

namespace mla {

class InjectingBackend final : public ForwardingBackend {
 public:
  InjectingBackend(Backend& inner, Injection injection) : ForwardingBackend(inner), injection_(injection) {}

  Status gather(const GatherParams& p) override;

 private:
  Status gather_flat_fp8_on_host(const GatherParams& p);

  Injection injection_;
};

}  // namespace mla
