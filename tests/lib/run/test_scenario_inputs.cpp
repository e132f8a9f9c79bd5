// The inputs a scenario's checks see do not depend on which of its checks run: mla-check --check
// (one sanitizer process per check, say) must reproduce what the whole scenario's run used.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "lib/backends/forwarding_backend.h"
#include "lib/run/scenario_run.h"

namespace mla {
namespace {

// Passes every call to `inner`, recording an FNV-1a hash of every pack's kv_c input (host memory:
// `inner` is the host backend).
class PackInputRecorder final : public ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  Status pack(const PackParams& p) override {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t t = 0; t < p.num_tokens; ++t) {
      for (int i = 0; i < DsMlaEntry::kNopeDims; ++i) h = (h ^ p.kv_c[t * p.kv_c_row_stride + i]) * 1099511628211ULL;
    }
    pack_inputs.push_back(h);
    return inner().pack(p);
  }

  std::vector<uint64_t> pack_inputs;
};

Scenario pack_and_forward() {
  Scenario s;
  s.name = "inputs_probe";
  s.file = "(test)";
  s.seed = 11;
  s.model.heads = 4;
  s.model.topk = 64;
  s.model.block_size = 16;
  s.batch.seq_lens = {100, 40};
  s.batch.query_lens = {1, 8};
  s.checks = {CheckKind::kPack, CheckKind::kForward};
  return s;
}

// The pack check's input (the first pack of the run; forward packs again after it).
uint64_t pack_check_input(const Scenario& s) {
  const std::unique_ptr<Backend> host = make_host_backend();
  PackInputRecorder backend(*host);
  const ScenarioResult r = run_scenario(s, backend, Injection::kNone);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.verdict, Verdict::kPass);
  return backend.pack_inputs.empty() ? 0 : backend.pack_inputs.front();
}

TEST(ScenarioInputs, PackSeesTheWholeRunsInputsWhenTheAttentionChecksWereRemoved) {
  const uint64_t whole = pack_check_input(pack_and_forward());
  ASSERT_NE(whole, 0u);
  Scenario only_pack = pack_and_forward();
  only_pack.checks = {CheckKind::kPack};
  only_pack.attention_checks_removed = true;  // what mla-check --check pack sets
  EXPECT_EQ(pack_check_input(only_pack), whole);
  // A scenario that never had attention checks gets other values (large tiles): what the flag is for.
  only_pack.attention_checks_removed = false;
  EXPECT_NE(pack_check_input(only_pack), whole);
}

}  // namespace
}  // namespace mla
