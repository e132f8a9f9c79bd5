// The suite runner's child processes. Each child runs a body in a forked process that streams
// '\n'-terminated lines to the parent through a pipe, one write per line, so what it sent survives
// a later crash. ChildPool runs several at once, waits on all their pipes with poll(), and kills a
// child that runs past its own deadline (counted from that child's start).
// Hazards: fork() without exec — the parent must be single-threaded when it starts a child (the
// parent of mla-check is: it never initialises CUDA or a thread pool). A child never returns into
// the caller: it _exits after the body (code 4 when the body throws), running no destructors.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace mla {

// In a forked child: SIGKILLed when `parent` dies (Linux); _exit(5) at once when it already has.
void die_with_parent(pid_t parent);

using ChildEmit = std::function<void(const std::string& line)>;
using ChildBody = std::function<void(const ChildEmit& emit)>;

struct ChildOutcome {
  bool ok = false;          // exited with code 0 before its deadline
  std::string output;       // every line it emitted, '\n'-terminated (kept when !ok too)
  std::string error;        // when !ok: signal, exit code, timeout, or pipe()/fork() failure
  double duration_s = 0.0;  // from its start to its end
};

// Up to `capacity` children at once. Destroying the pool SIGKILLs and reaps every child still
// running, so an error unwinding through the caller leaves neither orphans nor zombies; on Linux
// a child is also SIGKILLed when the parent dies.
class ChildPool {
 public:
  struct Finished {
    size_t tag;  // as given to start()
    ChildOutcome outcome;
  };

  explicit ChildPool(size_t capacity);  // capacity 0 counts as 1
  ~ChildPool();
  ChildPool(const ChildPool&) = delete;
  ChildPool& operator=(const ChildPool&) = delete;

  // Whether start() may be called: fewer than `capacity` children are running.
  bool full() const { return children_.size() >= capacity_; }
  bool idle() const { return children_.empty() && failed_.empty(); }

  // Starts `body` in a new child, SIGKILLed when it runs longer than timeout_s. Precondition:
  // !full(). When pipe() or fork() fails nothing runs and the next wait_any() returns the failure.
  void start(size_t tag, const ChildBody& body, double timeout_s);

  // Blocks until at least one child has ended (exited, or killed at its deadline), reaps it and
  // returns every child that has ended, in no particular order. Empty only when idle().
  std::vector<Finished> wait_any();

 private:
  using Clock = std::chrono::steady_clock;
  struct Child {
    size_t tag = 0;
    pid_t pid = -1;
    int fd = -1;      // read end of its pipe; -1 after EOF
    Clock::time_point start, deadline;
    double timeout_s = 0.0;
    std::string output;
  };

  // Reaps `c` (SIGKILLed first when timed_out), reads what is left in its pipe, says how it ended.
  ChildOutcome finish(Child& c, bool timed_out);
  void poll_pipes(Clock::time_point now);

  size_t capacity_;
  std::vector<Child> children_;
  std::vector<Finished> failed_;  // could not start; returned by the next wait_any()
};

// Runs `body` in one child and waits for it (the pool of one).
ChildOutcome run_in_child(const ChildBody& body, double timeout_s);

}  // namespace mla
