#include "lib/run/suite_runner_children.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace mla {

void die_with_parent(pid_t parent) {
#ifdef __linux__
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(5);  // it died before prctl()
#else
  (void)parent;
#endif
}

namespace {

// A child that has closed its pipe but not yet exited (e.g. while the driver tears down its CUDA
// context) is looked at again after this long; no other wait in the pool is a timed retry.
constexpr int kExitRecheckMs = 2;
// poll() takes an int of milliseconds; longer waits are split (a deadline may be days away).
constexpr int64_t kMaxPollMs = 60'000;

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

// The child side: never returns.
[[noreturn]] void child_main(const ChildBody& body, int write_fd, pid_t parent) {
  // A killed mla-check must not leave scenarios running.
  die_with_parent(parent);
  int code = 0;
  try {
    body([&](const std::string& line) { write_all(write_fd, line + "\n"); });
  } catch (const std::exception& e) {
    write_all(STDERR_FILENO, std::string("mla-check: child process: ") + e.what() + "\n");
    code = 4;
  } catch (...) {
    write_all(STDERR_FILENO, "mla-check: child process: unknown exception\n");
    code = 4;
  }
  ::close(write_fd);
  ::_exit(code);
}

// Whether `pid` has exited, without reaping it.
bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

void reap(pid_t pid, int* status) {
  while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
}

// Reads whatever `fd` has into `out`; returns false at EOF or on an error other than EINTR.
bool read_some(int fd, std::string* out) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status))
    return "scenario process killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return "scenario process exited with code " + std::to_string(WEXITSTATUS(status));
  return "";
}

}  // namespace

ChildPool::ChildPool(size_t capacity) : capacity_(std::max<size_t>(1, capacity)) {}

ChildPool::~ChildPool() {
  for (Child& c : children_) {
    ::kill(c.pid, SIGKILL);
    if (c.fd >= 0) ::close(c.fd);
    int status = 0;
    reap(c.pid, &status);
  }
}

void ChildPool::start(size_t tag, const ChildBody& body, double timeout_s) {
  const auto fail = [&](const char* what) {
    failed_.push_back({tag, {false, "", std::string(what) + " failed: " + std::strerror(errno), 0.0}});
  };
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return fail("pipe2()");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    fail("fork()");
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    // The other children's pipes are not this child's business.
    for (const Child& c : children_)
      if (c.fd >= 0) ::close(c.fd);
    ::close(fds[0]);
    child_main(body, fds[1], parent);
  }
  ::close(fds[1]);
  Child c;
  c.tag = tag;
  c.pid = pid;
  c.fd = fds[0];
  c.start = Clock::now();
  c.deadline = c.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  c.timeout_s = timeout_s;
  children_.push_back(std::move(c));
}

std::vector<ChildPool::Finished> ChildPool::wait_any() {
  std::vector<Finished> done = std::move(failed_);
  failed_.clear();
  while (done.empty() && !children_.empty()) {
    const auto now = Clock::now();
    for (auto it = children_.begin(); it != children_.end();) {
      // An exit seen at the deadline counts as an exit: its status says more than "timed out".
      const bool exited = it->fd < 0 && has_exited(it->pid);
      const bool timed_out = !exited && now >= it->deadline;
      if (exited || timed_out) {
        done.push_back({it->tag, finish(*it, timed_out)});
        it = children_.erase(it);
      } else {
        ++it;
      }
    }
    if (done.empty()) poll_pipes(now);
  }
  return done;
}

void ChildPool::poll_pipes(Clock::time_point now) {
  int64_t wait_ms = kMaxPollMs;
  std::vector<pollfd> fds;
  for (const Child& c : children_) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(c.deadline - now).count();
    wait_ms = std::min<int64_t>(wait_ms, std::max<int64_t>(left, 0));
    if (c.fd >= 0)
      fds.push_back({c.fd, POLLIN, 0});
    else
      wait_ms = std::min<int64_t>(wait_ms, kExitRecheckMs);
  }
  const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(wait_ms));
  if (ready <= 0) return;  // timeout, or EINTR: the caller looks at deadlines and exits again
  for (const pollfd& p : fds) {
    if (p.revents == 0) continue;
    for (Child& c : children_) {
      if (c.fd != p.fd) continue;
      if (!read_some(c.fd, &c.output)) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
  }
}

ChildOutcome ChildPool::finish(Child& c, bool timed_out) {
  if (timed_out) ::kill(c.pid, SIGKILL);
  int status = 0;
  reap(c.pid, &status);
  if (c.fd >= 0) {
    // Every write end is closed now: this reads what is left and stops at EOF.
    while (read_some(c.fd, &c.output)) {
    }
    ::close(c.fd);
    c.fd = -1;
  }
  ChildOutcome res;
  res.output = std::move(c.output);
  res.duration_s = std::chrono::duration<double>(Clock::now() - c.start).count();
  res.error = timed_out ? "timed out after " + std::to_string(static_cast<int>(c.timeout_s)) + " s (process killed)"
                        : how_it_ended(status);
  res.ok = res.error.empty();
  return res;
}

ChildOutcome run_in_child(const ChildBody& body, double timeout_s) {
  ChildPool pool(1);
  pool.start(0, body, timeout_s);
  return std::move(pool.wait_any().front().outcome);
}

}  // namespace mla
