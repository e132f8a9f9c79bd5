#include "lib/dcp/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

extern char** environ;

namespace mla {

namespace {

// A decimal integer in [lo, hi] and nothing else.
std::optional<long> parse_int(const std::string& s, long lo, long hi) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup env_from_map(const std::map<std::string, std::string>& vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

void set_multicast_off() {
  for (const auto& [name, value] : multicast_off_variables()) ::setenv(name.c_str(), value.c_str(), 1);
}

std::map<std::string, std::string> child_environment(const std::map<std::string, std::string>& base,
                                                     const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> env = base;
  for (const auto& [k, v] : overrides) env[k] = v;
  for (const auto& [k, v] : multicast_off_variables()) env[k] = v;
  return env;
}

std::map<std::string, std::string> current_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

void replace_environment(const std::map<std::string, std::string>& env) {
  ::clearenv();
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
}

LaunchInfoResult launch_info_from_env(const EnvLookup& env) {
  struct Names {
    const char* launcher;
    const char* rank;
    const char* world;
    const char* local_rank;
  };
  static const Names kLaunchers[] = {{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
                                     {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                      "OMPI_COMM_WORLD_LOCAL_RANK"}};
  LaunchInfoResult res;
  for (const Names& n : kLaunchers) {
    const auto rank = env(n.rank), world = env(n.world);
    if (!rank && !world) continue;
    const std::string who = std::string(n.launcher) + "'s variables: ";
    if (!rank || !world) {
      res.error = who + (rank ? std::string(n.world) : std::string(n.rank)) + " is not set (" +
                  (rank ? n.rank : n.world) + " is)";
      return res;
    }
    LaunchInfo li;
    li.launcher = n.launcher;
    const auto w = parse_int(*world, 1, 1 << 20);
    if (!w) {
      res.error = who + n.world + "='" + *world + "' is not a world size >= 1";
      return res;
    }
    li.world = static_cast<int>(*w);
    const auto r = parse_int(*rank, 0, li.world - 1);
    if (!r) {
      res.error = who + n.rank + "='" + *rank + "' is not a rank in [0, " + std::to_string(li.world) + ")";
      return res;
    }
    li.rank = static_cast<int>(*r);
    li.local_rank = li.rank;
    if (const auto lr = env(n.local_rank)) {
      const auto v = parse_int(*lr, 0, li.world - 1);
      if (!v) {
        res.error = who + n.local_rank + "='" + *lr + "' is not a local rank in [0, " + std::to_string(li.world) + ")";
        return res;
      }
      li.local_rank = static_cast<int>(*v);
    }
    if (li.world > 1) {
      const auto addr = env("MASTER_ADDR"), port = env("MASTER_PORT"), own = env("MLA_DCP_PORT");
      if (!addr || addr->empty()) {
        res.error = who + "MASTER_ADDR (rank 0's host) is not set";
        return res;
      }
      li.master_addr = *addr;
      if (own) {
        const auto p = parse_int(*own, 1, 65535);
        if (!p) {
          res.error = "MLA_DCP_PORT='" + *own + "' is not a TCP port in [1, 65535]";
          return res;
        }
        li.port = static_cast<int>(*p);
      } else {
        if (!port) {
          res.error = who + "MASTER_PORT is not set (or set MLA_DCP_PORT)";
          return res;
        }
        const auto p = parse_int(*port, 1, 65535);
        if (!p) {
          res.error = who + "MASTER_PORT='" + *port + "' is not a TCP port in [1, 65535]";
          return res;
        }
        const bool agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
        if (agent_store && *p == 65535) {
          res.error = who + "MASTER_PORT=65535 is held by torchrun's store and leaves no port above it; set MLA_DCP_PORT";
          return res;
        }
        li.port = static_cast<int>(*p) + (agent_store ? 1 : 0);
      }
    }
    res.info = li;
    return res;
  }
  return res;
}

std::vector<std::string> visible_device_ids(const std::optional<std::string>& cuda_visible_devices, int count) {
  std::vector<std::string> ids;
  if (count <= 0) return ids;
  if (cuda_visible_devices) {
    for (const std::string& part : split(*cuda_visible_devices, ',')) {
      if (static_cast<int>(ids.size()) == count) break;
      const std::string id = trim(part);
      if (!id.empty()) ids.push_back(id);
    }
  }
  for (int i = static_cast<int>(ids.size()); i < count && !cuda_visible_devices; ++i) ids.push_back(std::to_string(i));
  return ids;
}

std::string device_for_slot(const std::vector<std::string>& ids, size_t slot) {
  return ids.empty() ? std::string() : ids[slot % ids.size()];
}

}  // namespace mla
