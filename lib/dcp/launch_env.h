// The environment of a distributed run's processes: who started this process (a launcher's
// variables), the variables every process the harness starts gets, and which GPU a child binds.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mla {

// Reads one environment variable (getenv in the tools; a map in tests).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();
EnvLookup env_from_map(const std::map<std::string, std::string>& vars);

// NVLink multicast stays off in every process of a distributed run (NCCL's NVLS algorithms,
// PyTorch's symmetric memory, NVSHMEM): set in the process before NCCL initialises and in every
// environment the harness builds for a child process, overriding what the caller's environment
// says.
inline const std::vector<std::pair<std::string, std::string>>& multicast_off_variables() {
  static const std::vector<std::pair<std::string, std::string>> v = {
      {"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}};
  return v;
}
// setenv of multicast_off_variables() in this process.
void set_multicast_off();

// A child's environment: `base` with `overrides` applied, then multicast_off_variables().
std::map<std::string, std::string> child_environment(const std::map<std::string, std::string>& base,
                                                     const std::map<std::string, std::string>& overrides);
// This process's environment as a map.
std::map<std::string, std::string> current_environment();
// Replaces this process's environment with `env` (in a forked child, before anything reads it).
void replace_environment(const std::map<std::string, std::string>& env);

// A process started by a launcher: torchrun (RANK, WORLD_SIZE, LOCAL_RANK) or mpirun
// (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK), with rank 0's address
// in MASTER_ADDR and MASTER_PORT for every world size above 1.
struct LaunchInfo {
  std::string launcher;  // "torchrun" or "mpirun"
  int rank = 0;
  int world = 1;
  int local_rank = 0;    // which of this host's GPUs the process binds
  std::string master_addr;
  int port = 0;          // where rank 0 serves the rendezvous (dcp_port below)
};

struct LaunchInfoResult {
  std::optional<LaunchInfo> info;  // nullopt with error empty: no launcher started this process
  std::string error;               // a launcher's variables are present but incomplete or invalid
};
// torchrun's variables win when both sets are present. The rendezvous port: MLA_DCP_PORT when set;
// else MASTER_PORT, except when torchrun's agent holds a TCP store there
// (TORCHELASTIC_USE_AGENT_STORE=True): then MASTER_PORT + 1.
LaunchInfoResult launch_info_from_env(const EnvLookup& env);

// The devices the harness may give its children, as CUDA_VISIBLE_DEVICES values: the first
// `count` entries of the caller's CUDA_VISIBLE_DEVICES (when set: indices, UUIDs or MIG ids), else
// "0" .. "count-1". count is what the CUDA runtime reports with the caller's environment.
std::vector<std::string> visible_device_ids(const std::optional<std::string>& cuda_visible_devices, int count);

// The device of a child by its slot: ids[slot % ids.size()] (round robin); "" when ids is empty.
std::string device_for_slot(const std::vector<std::string>& ids, size_t slot);

}  // namespace mla
