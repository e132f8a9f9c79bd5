// Starting the ranks and their environment (lib/dcp/launch_env.h, local_launch.h): a launcher's
// variables, the child environment (NVLink multicast off, the rank's GPU), the GPU of a child by
// its slot, and forked ranks that meet through this process (the NCCL id's path on one host),
// gather each other's bytes through the socket transport, and end cleanly or are killed.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "kernels/backend.h"
#include "lib/dcp/communicator.h"
#include "lib/dcp/launch_env.h"
#include "lib/dcp/local_launch.h"

namespace mla {
namespace {

LaunchInfoResult from(const std::map<std::string, std::string>& vars) { return launch_info_from_env(env_from_map(vars)); }

TEST(LaunchInfo, NoLauncherNoError) {
  const LaunchInfoResult r = from({{"PATH", "/bin"}});
  EXPECT_FALSE(r.info);
  EXPECT_EQ(r.error, "");
}

TEST(LaunchInfo, Torchrun) {
  const LaunchInfoResult r = from({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node0"},
                                   {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(r.info) << r.error;
  EXPECT_EQ(r.info->launcher, "torchrun");
  EXPECT_EQ(r.info->rank, 5);
  EXPECT_EQ(r.info->world, 8);
  EXPECT_EQ(r.info->local_rank, 1);
  EXPECT_EQ(r.info->master_addr, "node0");
  EXPECT_EQ(r.info->port, 29500);
}

TEST(LaunchInfo, TorchrunsAgentStoreHoldsMasterPortSoTheNextOneIsUsed) {
  const LaunchInfoResult r = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                                   {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  ASSERT_TRUE(r.info) << r.error;
  EXPECT_EQ(r.info->port, 29501);
  const LaunchInfoResult own = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"},
                                     {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"MLA_DCP_PORT", "40000"}});
  ASSERT_TRUE(own.info) << own.error;
  EXPECT_EQ(own.info->port, 40000);
}

TEST(LaunchInfo, Mpirun) {
  const LaunchInfoResult r = from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                   {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "5000"}});
  ASSERT_TRUE(r.info) << r.error;
  EXPECT_EQ(r.info->launcher, "mpirun");
  EXPECT_EQ(r.info->rank, 3);
  EXPECT_EQ(r.info->world, 4);
  EXPECT_EQ(r.info->local_rank, 3);
  EXPECT_EQ(r.info->port, 5000);
}

TEST(LaunchInfo, TorchrunsVariablesWinOverMpiruns) {
  const LaunchInfoResult r = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"},
                                   {"OMPI_COMM_WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  ASSERT_TRUE(r.info) << r.error;
  EXPECT_EQ(r.info->launcher, "torchrun");
  EXPECT_EQ(r.info->rank, 1);
}

TEST(LaunchInfo, OneProcessNeedsNoAddress) {
  const LaunchInfoResult r = from({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_TRUE(r.info) << r.error;
  EXPECT_EQ(r.info->world, 1);
  EXPECT_EQ(r.info->local_rank, 0);
}

TEST(LaunchInfo, IncompleteOrInvalidVariablesSayWhich) {
  const auto error = [](const std::map<std::string, std::string>& v) { return from(v).error; };
  EXPECT_NE(error({{"RANK", "0"}}).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK='2' is not a rank in [0, 2)"), std::string::npos);
  EXPECT_NE(error({{"RANK", "0"}, {"WORLD_SIZE", "zero"}}).find("WORLD_SIZE='zero'"), std::string::npos);
  EXPECT_NE(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}).find("MASTER_ADDR"), std::string::npos);
  EXPECT_NE(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT is not set"), std::string::npos);
  EXPECT_NE(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}).find("not a TCP port"),
            std::string::npos);
  EXPECT_NE(error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-1"}}).find("LOCAL_RANK='-1'"), std::string::npos);
  EXPECT_NE(error({{"OMPI_COMM_WORLD_SIZE", "2"}}).find("OMPI_COMM_WORLD_RANK is not set"), std::string::npos);
}

TEST(ChildEnvironment, MulticastOffOverridesTheCallersValuesAndKeepsTheRest) {
  const auto env = child_environment({{"PATH", "/bin"}, {"NCCL_NVLS_ENABLE", "1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}},
                                     {{"CUDA_VISIBLE_DEVICES", "1"}, {"RANK", "1"}});
  EXPECT_EQ(env.at("NCCL_NVLS_ENABLE"), "0");
  EXPECT_EQ(env.at("TORCH_SYMM_MEM_DISABLE_MULTICAST"), "1");
  EXPECT_EQ(env.at("NVSHMEM_DISABLE_NVLS"), "1");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(env.at("RANK"), "1");
  EXPECT_EQ(env.at("PATH"), "/bin");
}

TEST(DeviceIds, FromTheCountOrTheCallersList) {
  using V = std::vector<std::string>;
  EXPECT_EQ(visible_device_ids(std::nullopt, 4), (V{"0", "1", "2", "3"}));
  EXPECT_EQ(visible_device_ids(std::nullopt, 0), V{});
  EXPECT_EQ(visible_device_ids(std::string("4,6, 7"), 3), (V{"4", "6", "7"}));
  // The runtime counted 2: the third entry is not a device it sees.
  EXPECT_EQ(visible_device_ids(std::string("GPU-aaaa,GPU-bbbb,9"), 2), (V{"GPU-aaaa", "GPU-bbbb"}));
  EXPECT_EQ(visible_device_ids(std::string("MIG-1"), 1), (V{"MIG-1"}));
}

TEST(DeviceIds, RoundRobinBySlot) {
  const std::vector<std::string> ids = {"2", "3", "5"};
  std::vector<std::string> got;
  for (size_t slot = 0; slot < 7; ++slot) got.push_back(device_for_slot(ids, slot));
  EXPECT_EQ(got, (std::vector<std::string>{"2", "3", "5", "2", "3", "5", "2"}));
  EXPECT_EQ(device_for_slot({}, 3), "");
}

// Each rank checks its own environment; rank 0 collects every rank's report through the exchange
// and returns 0 only when all of them are right (a forked child reports through its exit code).
TEST(LocalLaunch, EveryRankGetsItsEnvironmentAndRankZerosId) {
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);  // the caller's value: the children must not inherit it
  LocalLaunchOptions opt;
  opt.world = 3;
  opt.devices = {"7", "GPU-x", "2"};
  opt.timeout_s = 60;
  const LocalLaunchOutcome out = launch_local_ranks(opt, [&](int rank, int world, Exchange& ex) {
    const auto get = [](const char* n) { const char* v = std::getenv(n); return std::string(v ? v : "(unset)"); };
    std::string problems;
    const std::map<std::string, std::string> want = {
        {"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"},
        {"RANK", std::to_string(rank)}, {"WORLD_SIZE", "3"}, {"LOCAL_RANK", std::to_string(rank)},
        {"CUDA_VISIBLE_DEVICES", opt.devices[static_cast<size_t>(rank)]}};
    for (const auto& [k, v] : want)
      if (get(k.c_str()) != v) problems += k + "=" + get(k.c_str()) + " ";
    if (ex.rank() != rank || ex.size() != world) problems += "exchange rank/size ";
    std::vector<std::string> ids, reports;
    const std::string id = rank == 0 ? std::string(128, '\x5c') : std::string();
    if (!ex.all_gather(id, 30, &ids).ok() || ids[0] != std::string(128, '\x5c')) problems += "id ";
    if (!ex.all_gather(problems, 30, &reports).ok()) return 20;
    if (rank != 0) return 0;
    for (const auto& r : reports)
      if (!r.empty()) {
        std::fprintf(stderr, "%s\n", r.c_str());
        return 10;
      }
    return 0;
  });
  ::unsetenv("NCCL_NVLS_ENABLE");
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.exit_codes, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(out.run_exit_code(), 0);
}

TEST(LocalLaunch, RankZerosExitCodeIsTheRuns) {
  LocalLaunchOptions opt;
  opt.world = 2;
  const LocalLaunchOutcome out = launch_local_ranks(opt, [](int rank, int, Exchange&) { return rank == 0 ? 1 : 0; });
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.run_exit_code(), 1);
}

TEST(LocalLaunch, ACrashedRankEndsTheRunAndTheOthersAreKilled) {
  LocalLaunchOptions opt;
  opt.world = 3;
  opt.grace_s = 0.5;
  const LocalLaunchOutcome out = launch_local_ranks(opt, [](int rank, int, Exchange& ex) {
    if (rank == 1) std::raise(SIGSEGV);
    std::vector<std::string> all;
    (void)ex.all_gather("", 600, &all);  // waits for rank 1, which never comes
    return 0;
  });
  EXPECT_NE(out.error.find("rank 1 killed by signal 11"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("still running"), std::string::npos) << out.error;
  EXPECT_EQ(out.run_exit_code(), 3);
}

TEST(LocalLaunch, ATimeoutKillsEveryRank) {
  LocalLaunchOptions opt;
  opt.world = 2;
  opt.timeout_s = 0.5;
  const LocalLaunchOutcome out = launch_local_ranks(opt, [](int, int, Exchange&) {
    for (;;) ::pause();
    return 0;
  });
  EXPECT_NE(out.error.find("ran past"), std::string::npos) << out.error;
  EXPECT_EQ(out.exit_codes, (std::vector<int>{-1, -1}));
}

// The socket transport between forked ranks on the host backend: every rank gets every rank's
// bytes at its offset.
TEST(SocketCommunicator, GathersEveryRanksBytesInRankOrder) {
  LocalLaunchOptions opt;
  opt.world = 4;
  const LocalLaunchOutcome out = launch_local_ranks(opt, [](int rank, int world, Exchange& ex) {
    auto backend = make_host_backend();
    auto comm = make_socket_communicator(ex, 30);
    const size_t bytes = 1000 + 3;
    void* send = nullptr;
    void* recv = nullptr;
    if (!backend->allocate(bytes, &send).ok() || !backend->allocate(bytes * world, &recv).ok()) return 11;
    std::vector<uint8_t> mine(bytes);
    for (size_t i = 0; i < bytes; ++i) mine[i] = static_cast<uint8_t>(rank * 37 + i);
    if (!backend->copy_to_device(send, mine.data(), bytes).ok()) return 12;
    if (!comm->all_gather(*backend, send, recv, bytes).ok()) return 13;
    std::vector<uint8_t> all(bytes * world);
    if (!backend->copy_to_host(all.data(), recv, all.size()).ok()) return 14;
    for (int r = 0; r < world; ++r)
      for (size_t i = 0; i < bytes; ++i)
        if (all[r * bytes + i] != static_cast<uint8_t>(r * 37 + i)) return 15;
    return 0;
  });
  EXPECT_EQ(out.error, "");
  EXPECT_EQ(out.exit_codes, (std::vector<int>{0, 0, 0, 0}));
}

}  // namespace
}  // namespace mla
