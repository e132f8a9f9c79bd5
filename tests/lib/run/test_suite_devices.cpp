// run_suite over several GPUs (SuiteOptions::devices): each scenario process gets the
// CUDA_VISIBLE_DEVICES of its slot and NVLink multicast off before its backend exists, and the
// report records the device. The devices are a fake list (no GPU needed): the scenario processes
// make no backend, they report their environment in the error of the backend they could not make.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <variant>

#include "lib/run/report.h"
#include "lib/run/suite_runner.h"

namespace mla {
namespace {

Scenario shipped(const std::string& name) {
  auto loaded = load_scenario(std::string(MLA_SOURCE_DIR) + "/scenarios/suite/" + name + ".json");
  if (auto* err = std::get_if<ScenarioError>(&loaded)) throw std::runtime_error(err->to_string());
  return std::get<Scenario>(std::move(loaded));
}

SuiteOptions reporting_environment(size_t jobs) {
  SuiteOptions opt;
  for (const char* n : {"gather_block_size_1", "gather_block_size_4", "gather_block_size_16", "convert_pinned_indices",
                        "pack_fixed_scales", "gather_pages_reversed", "gather_zero_length_requests"})
    opt.scenarios.push_back(shipped(n));
  opt.backend.kind = BackendChoice::Kind::kHost;
  opt.jobs = jobs;
  opt.timeout_s = 60;
  opt.make_backend = [](std::string* error) -> std::unique_ptr<Backend> {
    const auto get = [](const char* n) { const char* v = std::getenv(n); return std::string(v ? v : "(unset)"); };
    *error = "CUDA_VISIBLE_DEVICES=" + get("CUDA_VISIBLE_DEVICES") + " NCCL_NVLS_ENABLE=" + get("NCCL_NVLS_ENABLE") +
             " NVSHMEM_DISABLE_NVLS=" + get("NVSHMEM_DISABLE_NVLS") + " TORCH_SYMM_MEM_DISABLE_MULTICAST=" +
             get("TORCH_SYMM_MEM_DISABLE_MULTICAST") + ";";
    return nullptr;
  };
  return opt;
}

TEST(SuiteDevices, EachScenarioProcessGetsTheDeviceOfItsSlot) {
  SuiteOptions opt = reporting_environment(3);
  opt.devices = {"4", "GPU-5b2c"};
  const auto results = run_suite(opt);
  ASSERT_EQ(results.size(), opt.scenarios.size());
  std::set<std::string> used;
  for (const ScenarioResult& r : results) {
    EXPECT_TRUE(r.cuda_visible_devices == "4" || r.cuda_visible_devices == "GPU-5b2c") << r.name << ": " << r.cuda_visible_devices;
    EXPECT_NE(r.error.find("CUDA_VISIBLE_DEVICES=" + r.cuda_visible_devices + " "), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1;"), std::string::npos)
        << r.error;
    used.insert(r.cuda_visible_devices);
  }
  EXPECT_EQ(used.size(), 2u);  // three slots over two devices: both serve
  // The report names the device of each scenario.
  RunReport report;
  report.scenarios = results;
  const auto j = nlohmann::json::parse(report_to_json(report));
  EXPECT_EQ(j["scenarios"][0]["cuda_visible_devices"], results[0].cuda_visible_devices);
}

TEST(SuiteDevices, WithoutDevicesTheProcessesKeepTheCallersAndTheReportSaysNothing) {
  ::setenv("CUDA_VISIBLE_DEVICES", "9", 1);
  const auto results = run_suite(reporting_environment(2));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  for (const ScenarioResult& r : results) {
    EXPECT_EQ(r.cuda_visible_devices, "");
    EXPECT_NE(r.error.find("CUDA_VISIBLE_DEVICES=9 NCCL_NVLS_ENABLE=0"), std::string::npos) << r.error;
  }
  RunReport report;
  report.scenarios = results;
  EXPECT_FALSE(nlohmann::json::parse(report_to_json(report))["scenarios"][0].contains("cuda_visible_devices"));
}

TEST(SuiteDevices, TheProbeCountsNoGpuOnTheHostBackend) {
  BackendChoice host;
  host.kind = BackendChoice::Kind::kHost;
  const BackendProbe p = probe_backend(host, /*isolate=*/true);
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_FALSE(p.on_gpu);
  EXPECT_EQ(p.device_count, 0);
}

}  // namespace
}  // namespace mla
