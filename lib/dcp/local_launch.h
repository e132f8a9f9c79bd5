// Starts the ranks of a distributed run on this host: one forked child per rank, each with its
// own environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, CUDA_VISIBLE_DEVICES = its GPU
// when devices are given, NVLink multicast off: lib/dcp/launch_env.h) set before the body runs,
// so before any CUDA call. Each child reaches the others through this process, the hub of their
// exchange (lib/dcp/exchange.h), over a socketpair made before the fork.
// Hazards: fork() without exec: the caller must be single-threaded and must not have initialised
// CUDA (mla-dcp's parent never does). A child never returns into the caller: it _exits with the
// body's code (4 when the body throws), running no destructors. A child is SIGKILLed when the
// parent dies.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/dcp/exchange.h"

namespace mla {

struct LocalLaunchOptions {
  int world = 1;
  // CUDA_VISIBLE_DEVICES of rank r is devices[r]; empty: the children keep the caller's value.
  std::vector<std::string> devices;
  std::map<std::string, std::string> extra_env;  // set in every child
  double timeout_s = 3600.0;                     // the whole run; then every child is killed
  // After the first child ends abnormally (a signal, or a non-zero exit of a rank other than 0),
  // the others are given this long to end before they are killed: a rank blocked in a collective
  // with a dead peer never ends by itself.
  double grace_s = 10.0;
};

// The body of rank `rank`: returns its exit code. Ranks other than 0 return 0 when they finished
// normally; rank 0's code is the run's.
using RankBody = std::function<int(int rank, int world, Exchange& exchange)>;

struct LocalLaunchOutcome {
  std::vector<int> exit_codes;  // per rank; -1 when killed or never started
  std::string error;            // empty when every rank ended by itself, ranks 1.. with 0
  int run_exit_code() const;    // rank 0's code when error is empty, else 3
};

LocalLaunchOutcome launch_local_ranks(const LocalLaunchOptions& opt, const RankBody& body);

// The same start, for a caller that drives the ranks itself instead of relaying between them
// (mla-bench's DCP workers): rank r's body gets its end of the socketpair (it owns it); the caller
// gets the other ends in `fds`. opt.timeout_s and opt.grace_s do not apply: end_local_ranks ends
// them.
struct RankProcesses {
  std::vector<int> pids;
  std::vector<int> fds;  // the caller's ends, by rank
  std::string error;     // not every rank started: those that did were killed, pids and fds are empty
};
using RankFdBody = std::function<int(int rank, int world, int fd)>;
RankProcesses start_local_ranks(const LocalLaunchOptions& opt, const RankFdBody& body);
// Closes the caller's ends, waits up to wait_s for the ranks to exit, SIGKILLs the rest; the exit
// codes by rank (-1: killed or ended by a signal).
std::vector<int> end_local_ranks(RankProcesses& ranks, double wait_s);

}  // namespace mla
