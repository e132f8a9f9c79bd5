#include "lib/dcp/local_launch.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/dcp/launch_env.h"
#include "lib/run/suite_runner_children.h"

namespace mla {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

[[noreturn]] void child_main(const LocalLaunchOptions& opt, const RankFdBody& body, int rank, int fd, pid_t parent,
                             const std::map<std::string, std::string>& base) {
  die_with_parent(parent);
  std::map<std::string, std::string> overrides = opt.extra_env;
  overrides["RANK"] = std::to_string(rank);
  overrides["WORLD_SIZE"] = std::to_string(opt.world);
  overrides["LOCAL_RANK"] = std::to_string(rank);
  overrides["LOCAL_WORLD_SIZE"] = std::to_string(opt.world);
  if (!opt.devices.empty()) overrides["CUDA_VISIBLE_DEVICES"] = opt.devices[static_cast<size_t>(rank)];
  replace_environment(child_environment(base, overrides));
  int code = 0;
  try {
    code = body(rank, opt.world, fd);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    code = 4;
  } catch (...) {
    std::fprintf(stderr, "rank %d: unknown exception\n", rank);
    code = 4;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

std::string how_it_ended(int rank, int status) {
  if (WIFSIGNALED(status))
    return "rank " + std::to_string(rank) + " killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "rank " + std::to_string(rank) + " exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int LocalLaunchOutcome::run_exit_code() const {
  const int rank0 = exit_codes.empty() ? -1 : exit_codes.front();
  if (error.empty()) return rank0;
  return rank0 == 1 ? 1 : 3;  // a failed check outranks a runtime error, as in mla-check
}

RankProcesses start_local_ranks(const LocalLaunchOptions& opt, const RankFdBody& body) {
  RankProcesses out;
  const int n = opt.world;
  if (n < 1) {
    out.error = "a run needs at least one rank";
    return out;
  }
  if (!opt.devices.empty() && static_cast<int>(opt.devices.size()) < n) {
    out.error = std::to_string(n) + " ranks but " + std::to_string(opt.devices.size()) + " devices";
    return out;
  }
  const std::map<std::string, std::string> base = current_environment();
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  for (int r = 0; r < n && out.error.empty(); ++r) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      out.error = std::string("socketpair() failed: ") + std::strerror(errno);
      break;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      out.error = std::string("fork() failed: ") + std::strerror(errno);
      ::close(sv[0]);
      ::close(sv[1]);
      break;
    }
    if (pid == 0) {
      for (int fd : out.fds) ::close(fd);
      ::close(sv[0]);
      child_main(opt, body, r, sv[1], parent, base);
    }
    ::close(sv[1]);
    out.fds.push_back(sv[0]);
    out.pids.push_back(pid);
  }
  if (!out.error.empty()) {
    for (int pid : out.pids) ::kill(pid, SIGKILL);
    end_local_ranks(out, 0.0);
  }
  return out;
}

std::vector<int> end_local_ranks(RankProcesses& ranks, double wait_s) {
  for (int fd : ranks.fds) ::close(fd);
  ranks.fds.clear();
  std::vector<int> codes(ranks.pids.size(), -1);
  const auto deadline = Clock::now() + seconds(wait_s);
  std::vector<bool> done(ranks.pids.size(), false);
  for (;;) {
    bool all = true;
    for (size_t r = 0; r < ranks.pids.size(); ++r) {
      if (done[r]) continue;
      int status = 0;
      if (::waitpid(ranks.pids[r], &status, WNOHANG) == ranks.pids[r]) {
        done[r] = true;
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      } else {
        all = false;
      }
    }
    if (all) break;
    if (Clock::now() >= deadline) {
      for (size_t r = 0; r < ranks.pids.size(); ++r)
        if (!done[r]) ::kill(ranks.pids[r], SIGKILL);
      for (size_t r = 0; r < ranks.pids.size(); ++r) {
        if (done[r]) continue;
        int status = 0;
        while (::waitpid(ranks.pids[r], &status, 0) < 0 && errno == EINTR) {
        }
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      break;
    }
    ::usleep(2000);
  }
  ranks.pids.clear();
  return codes;
}

LocalLaunchOutcome launch_local_ranks(const LocalLaunchOptions& opt, const RankBody& body) {
  LocalLaunchOutcome out;
  const int n = opt.world;
  out.exit_codes.assign(static_cast<size_t>(std::max(n, 0)), -1);
  RankProcesses started = start_local_ranks(opt, [&](int rank, int world, int fd) {
    auto exchange = hub_client(fd, rank, world);
    return body(rank, world, *exchange);
  });
  if (!started.error.empty()) {
    out.error = started.error;
    return out;
  }
  const std::vector<int>& fds = started.fds;
  const std::vector<int>& pids = started.pids;
  std::vector<bool> running(static_cast<size_t>(n), true), open(static_cast<size_t>(n), true);
  const auto kill_running = [&] {
    for (int r = 0; r < n; ++r)
      if (running[static_cast<size_t>(r)]) ::kill(pids[static_cast<size_t>(r)], SIGKILL);
  };
  std::string errors;
  const auto note = [&](const std::string& e) { errors += (errors.empty() ? "" : "; ") + e; };
  const auto start = Clock::now();
  const auto deadline = start + seconds(opt.timeout_s);
  std::optional<Clock::time_point> kill_at;
  bool killed = false;

  HubRelay relay(fds);
  auto any_running = [&] {
    for (bool b : running)
      if (b) return true;
    return false;
  };
  while (any_running()) {
    for (int r = 0; r < n; ++r) {
      if (!running[static_cast<size_t>(r)]) continue;
      int status = 0;
      const pid_t w = ::waitpid(pids[static_cast<size_t>(r)], &status, WNOHANG);
      if (w != pids[static_cast<size_t>(r)]) continue;
      running[static_cast<size_t>(r)] = false;
      const bool exited = WIFEXITED(status);
      out.exit_codes[static_cast<size_t>(r)] = exited ? WEXITSTATUS(status) : -1;
      const bool abnormal = !exited || (r != 0 && WEXITSTATUS(status) != 0) || (r == 0 && WEXITSTATUS(status) > 3);
      if (abnormal) note(how_it_ended(r, status));
      if ((abnormal || r == 0) && !kill_at) kill_at = Clock::now() + seconds(opt.grace_s);
    }
    if (!any_running()) break;
    const auto now = Clock::now();
    if (!killed && now >= deadline) {
      note("the ranks ran past " + std::to_string(static_cast<int64_t>(opt.timeout_s)) + " s and were killed");
      kill_running();
      killed = true;
    } else if (!killed && kill_at && now >= *kill_at) {
      std::string left;
      for (int r = 0; r < n; ++r)
        if (running[static_cast<size_t>(r)]) left += (left.empty() ? "" : ", ") + std::to_string(r);
      note("ranks " + left + " still running " + std::to_string(static_cast<int64_t>(opt.grace_s)) +
           " s after another rank ended; killed");
      kill_running();
      killed = true;
    }
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r)
      if (open[static_cast<size_t>(r)]) {
        pfds.push_back({fds[static_cast<size_t>(r)], POLLIN, 0});
        who.push_back(r);
      }
    const int ready = ::poll(pfds.data(), pfds.size(), 50);
    if (ready <= 0) continue;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      if (!relay.on_readable(who[i])) open[static_cast<size_t>(who[i])] = false;
    }
    const Status s = relay.flush();
    if (!s.ok() && !kill_at) {
      note("relaying between the ranks failed: " + s.message());
      kill_at = Clock::now() + seconds(opt.grace_s);
    }
  }
  for (int fd : fds) ::close(fd);
  out.error = errors;
  return out;
}

}  // namespace mla
