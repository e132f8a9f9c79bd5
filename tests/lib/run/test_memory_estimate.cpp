// lib/run/memory_estimate: the memory a scenario's run needs, estimated before anything is
// allocated. The estimate must not be below what a run really takes (measured here as the growth
// of the peak resident set of a process that runs the scenario on the host backend), must not
// refuse the shipped suite on the machines it is meant for, and a refusal names the file and both
// figures.
#include "lib/run/memory_estimate.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <limits>
#include <string>

#include "lib/run/scenario_run.h"
#include "lib/run/suite_runner_children.h"
#include "tests/common/temp_dir.h"

namespace mla {
namespace {

const std::string kSuite = std::string(MLA_SOURCE_DIR) + "/scenarios/suite";

Scenario load(const std::string& path) {
  auto r = load_scenario(path);
  if (auto* e = std::get_if<ScenarioError>(&r)) {
    ADD_FAILURE() << e->to_string();
    return {};
  }
  return std::get<Scenario>(std::move(r));
}

Scenario from_text(const test::TempDir& dir, const std::string& batch, const std::string& checks,
                   const std::string& extra = "") {
  return load(dir.write("s.json", R"({"schema": "mla-scenario/1", "name": "s", "batch": )" + batch +
                                      R"(, "checks": [)" + checks + "]" + extra + "}"));
}

std::uint64_t total(const MemoryEstimate& e) { return e.host_bytes + e.backend_bytes; }

long max_rss_kib() {
  rusage u {};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// The growth of the peak resident set while `s` runs on the host backend, in a child process of
// its own (so that what earlier tests left in this process does not count).
std::uint64_t measured_growth(const Scenario& s) {
  const ChildOutcome c = run_in_child(
      [&](const ChildEmit& emit) {
        auto backend = make_host_backend();
        const long before = max_rss_kib();
        const ScenarioResult r = run_scenario(s, *backend, Injection::kNone);
        const long after = max_rss_kib();
        emit(std::string(to_string(r.verdict)) + " " + std::to_string((after - before) * 1024L));
      },
      600.0);
  EXPECT_TRUE(c.ok) << c.error;
  const size_t space = c.output.find(' ');
  EXPECT_EQ(c.output.substr(0, space), "PASS") << c.output;
  return std::stoull(c.output.substr(space + 1));
}

// Shipped scenarios of each family of checks that run in a second or two on the host.
class EstimateBoundsTheRun : public ::testing::TestWithParam<const char*> {};

TEST_P(EstimateBoundsTheRun, NoLessThanThePeakGrowthOfARealRun) {
  const Scenario s = load(kSuite + "/" + GetParam());
  const std::uint64_t need = total(estimate_memory(s));
  const std::uint64_t used = measured_growth(s);
  EXPECT_GE(need, used) << s.name << ": estimated " << need << " bytes, the run grew by " << used;
  // And not absurdly above it: a refusal must mean the scenario really could not run. The
  // allowance covers the estimate's upper bounds of the reference's working arrays.
  EXPECT_LE(need, 16 * used + (std::uint64_t{64} << 20)) << s.name << ": estimated " << need << ", used " << used;
}

INSTANTIATE_TEST_SUITE_P(Shipped, EstimateBoundsTheRun,
                         ::testing::Values("gather_block_size_64.json", "convert_dcp_4_ranks.json",
                                           "vllm_large_q_prefill.json", "topk_2048_few_rows.json",
                                           "attention/attn_force_sparse.json",
                                           "attention/attn_dcp_4_ranks_interleave_8.json",
                                           "attention/attn_small_prefill_k128.json",
                                           "attention/attn_heads_16.json", "vllm_mixed_medium.json",
                                           "attention/attn_heads_32.json"));

TEST(MemoryEstimate, TheShippedSuiteFitsTheMachinesItIsFor) {
  // Host scenarios on a 24 GiB machine; gpu-only ones on an 80 GB GPU.
  for (const std::string& f : list_scenario_files(kSuite)) {
    const Scenario s = load(f);
    const MemoryEstimate e = estimate_memory(s);
    if (s.gpu_only()) {
      EXPECT_LT(e.backend_bytes, std::uint64_t{60} << 30) << f;
    } else {
      EXPECT_LT(total(e), std::uint64_t{8} << 30) << f;
    }
  }
}

TEST(MemoryEstimate, GrowsWithTheBatchAndTheChecks) {
  test::TempDir dir;
  auto pack_of = [&](int tokens) {
    return total(estimate_memory(
        from_text(dir, R"({"seq_lens": [)" + std::to_string(tokens) + R"(], "query_lens": [1]})", R"("pack")")));
  };
  // Every large term of the pack check is per cached token: the growth is linear, and each token
  // costs at least its generated row (576 bf16) and its cache entry (656 bytes), host and device.
  const std::uint64_t t1 = pack_of(100000), t2 = pack_of(200000), t3 = pack_of(300000);
  const double slope = static_cast<double>(t2 - t1) / 100000;
  EXPECT_NEAR(static_cast<double>(t3 - t2) / 100000, slope, 0.05 * slope);
  EXPECT_GE(slope, 2.0 * (1152 + 656));
  const auto attention =
      estimate_memory(from_text(dir, R"({"seq_lens": [10000], "query_lens": [1]})", R"("pack", "dense_mha")"));
  const auto pack_only = estimate_memory(from_text(dir, R"({"seq_lens": [10000], "query_lens": [1]})", R"("pack")"));
  EXPECT_GT(attention.backend_bytes, pack_only.backend_bytes);
  EXPECT_GT(attention.host_bytes, pack_only.host_bytes);
}

TEST(MemoryEstimate, TwelveMillionTokensNeedMoreThanTheirRowsAlone) {
  test::TempDir dir;
  const auto e = estimate_memory(from_text(dir, R"({"seq_lens": [12000000], "query_lens": [1]})", R"("pack")"));
  // At least the generated rows (12e6 x 576 bf16) and the cache (12e6 x 656 bytes), host and device.
  const std::uint64_t rows = std::uint64_t{12000000} * 1152, cache = std::uint64_t{12000000} * 656;
  EXPECT_GE(e.host_bytes, rows + cache);
  EXPECT_GE(e.backend_bytes, rows + cache);
}

TEST(MemoryEstimate, ACheckThatIsSkippedAllocatesNothing) {
  test::TempDir dir;
  // pack on a cache dtype that is not fp8_ds_mla ends in SKIP before any buffer is made.
  const auto e = estimate_memory(
      from_text(dir, R"({"seq_lens": [100000], "query_lens": [1]})", R"("pack")", R"(, "cache": {"dtype": "auto"})"));
  EXPECT_EQ(e.backend_bytes, 0u);
}

TEST(MemoryEstimate, SaturatesInsteadOfWrapping) {
  Scenario s;
  s.file = "huge.json";
  s.name = "huge";
  s.model.heads = std::numeric_limits<int32_t>::max();
  s.model.topk = std::numeric_limits<int32_t>::max();
  s.batch.seq_lens.assign(1000, std::numeric_limits<int32_t>::max());
  s.batch.query_lens.assign(1000, std::numeric_limits<int32_t>::max());
  s.checks = {CheckKind::kDenseMha, CheckKind::kEquivalence};
  const auto e = estimate_memory(s);
  EXPECT_EQ(e.host_bytes, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(e.backend_bytes, std::numeric_limits<std::uint64_t>::max());
  EXPECT_NE(memory_refusal(s, e, true, std::uint64_t{1} << 40, std::nullopt), "");
}

TEST(MemoryEstimate, TheRefusalNamesTheFileAndBothFigures) {
  Scenario s;
  s.file = "dir/big.json";
  s.name = "big";
  MemoryEstimate need;
  need.host_bytes = std::uint64_t{3} << 30;
  need.backend_bytes = std::uint64_t{2} << 30;
  // Host backend: both parts count against host memory.
  const std::string host = memory_refusal(s, need, true, std::uint64_t{4} << 30, std::nullopt);
  EXPECT_NE(host.find("dir/big.json"), std::string::npos) << host;
  EXPECT_NE(host.find("5.0 GiB of host memory"), std::string::npos) << host;
  EXPECT_NE(host.find("4.0 GiB"), std::string::npos) << host;
  EXPECT_NE(host.find("MemAvailable"), std::string::npos) << host;
  EXPECT_EQ(memory_refusal(s, need, true, std::uint64_t{5} << 30, std::nullopt), "");
  // A device backend: the buffers count against the device, the rest against the host.
  EXPECT_EQ(memory_refusal(s, need, false, std::uint64_t{4} << 30, std::uint64_t{2} << 30), "");
  const std::string device = memory_refusal(s, need, false, std::uint64_t{4} << 30, std::uint64_t{1} << 30);
  EXPECT_NE(device.find("2.0 GiB of device memory"), std::string::npos) << device;
  EXPECT_NE(device.find("1.0 GiB"), std::string::npos) << device;
  // Unknown figures refuse nothing.
  EXPECT_EQ(memory_refusal(s, need, false, std::nullopt, std::nullopt), "");
}

TEST(MemoryEstimate, HostMemoryAvailableIsReadFromTheKernel) {
  const auto available = host_memory_available();
  ASSERT_TRUE(available.has_value());
  EXPECT_GT(*available, std::uint64_t{1} << 20);
}

TEST(MemoryEstimate, FormatBytes) {
  EXPECT_EQ(format_bytes(17), "17 bytes");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(std::uint64_t{3} << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes(std::uint64_t{12} << 30), "12.0 GiB");
}

}  // namespace
}  // namespace mla
