// The inputs a scenario's checks see do not depend on which of its checks run: mla-check --check
// (one sanitizer process per check, say) must reproduce what the whole scenario's run used.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "lib/scenario_run.h"

namespace mla {
namespace {

// The host backend, recording an FNV-1a hash of every pack's kv_c input (host memory there).
class PackInputRecorder : public Backend {
 public:
  BackendInfo info() const override { return host_->info(); }
  Status allocate(std::size_t bytes, void** ptr) override { return host_->allocate(bytes, ptr); }
  void release(void* ptr) override { host_->release(ptr); }
  Status copy_to_device(void* d, const void* s, std::size_t n) override { return host_->copy_to_device(d, s, n); }
  Status copy_to_host(void* d, const void* s, std::size_t n) override { return host_->copy_to_host(d, s, n); }
  Status synchronize() override { return host_->synchronize(); }
  Status pack(const PackParams& p) override {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t t = 0; t < p.num_tokens; ++t) {
      for (int i = 0; i < DsMlaEntry::kNopeDims; ++i) h = (h ^ p.kv_c[t * p.kv_c_row_stride + i]) * 1099511628211ULL;
    }
    pack_inputs.push_back(h);
    return host_->pack(p);
  }
  Status gather(const GatherParams& p) override { return host_->gather(p); }
  Status gather_flat_fp8(const FlatFp8GatherParams& p) override { return host_->gather_flat_fp8(p); }
  Status convert(const ConvertParams& p) override { return host_->convert(p); }
  Status gemm(const GemmParams& p) override { return host_->gemm(p); }
  Status sparse_mqa(const SparseMqaParams& p) override { return host_->sparse_mqa(p); }
  Status dense_mha(const DenseMhaParams& p) override { return host_->dense_mha(p); }
  Status merge(const MergeParams& p) override { return host_->merge(p); }
  bool supports_attention() const override { return host_->supports_attention(); }

  std::vector<uint64_t> pack_inputs;

 private:
  std::unique_ptr<Backend> host_ = make_host_backend();
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
  PackInputRecorder backend;
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
