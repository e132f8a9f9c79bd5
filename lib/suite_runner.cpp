#include "lib/suite_runner.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace mla {

namespace {

// Runs `body` in a forked child that sends lines to the parent through a pipe as it goes (emit
// writes one line at once, so what was sent survives a later crash); returns what it sent, or an
// error saying how the child ended (signal, exit code, timeout).
struct ChildOutcome {
  bool ok = false;
  std::string output;  // the lines the child emitted, '\n'-terminated
  std::string error;
};

using Emit = std::function<void(const std::string& line)>;

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t w = ::write(fd, s.data() + off, s.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    off += static_cast<size_t>(w);
  }
}

ChildOutcome run_in_child(const std::function<void(const Emit&)>& body, double timeout_s) {
  int fds[2];
  if (::pipe(fds) != 0) return {false, "", std::string("pipe() failed: ") + std::strerror(errno)};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {false, "", std::string("fork() failed: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      body([&](const std::string& line) { write_all(fds[1], line + "\n"); });
    } catch (const std::exception& e) {
      write_all(STDERR_FILENO, std::string("mla-check: child process: ") + e.what() + "\n");
      code = 4;
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  ChildOutcome res;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[65536];
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int pr = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      res.output.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EOF
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    res.error = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s (process killed)";
  } else if (WIFSIGNALED(status)) {
    res.error = "scenario process killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                strsignal(WTERMSIG(status)) + ")";
  } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    res.error = "scenario process exited with code " + std::to_string(WEXITSTATUS(status));
  } else {
    res.ok = true;
  }
  return res;
}

std::string info_to_json(const BackendInfo& i) {
  return nlohmann::json{{"name", i.name}, {"device", i.device}, {"runtime", i.runtime}}.dump();
}

BackendProbe probe_in_process(BackendChoice choice) {
  BackendProbe p;
  std::string why;
  std::string name = "host";
  if (choice == BackendChoice::kCuda || choice == BackendChoice::kAuto) {
    if (cuda_backend_available(&why)) {
      name = "cuda";
    } else if (choice == BackendChoice::kCuda) {
      p.error = "--backend cuda: no usable CUDA device: " + why;
      return p;
    }
  }
  auto b = make_backend(name, &p.error);
  if (!b) return p;
  p.info = b->info();
  p.ok = true;
  return p;
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& name, std::string* error) {
  if (name == "host") return make_host_backend();
  if (name == "cuda") return make_cuda_backend(error);
  if (error) *error = "unknown backend '" + name + "'";
  return nullptr;
}

BackendProbe probe_backend(BackendChoice choice, bool isolate) {
  if (!isolate) return probe_in_process(choice);
  const ChildOutcome c = run_in_child(
      [&](const Emit& emit) {
        const BackendProbe p = probe_in_process(choice);
        emit(nlohmann::json{{"ok", p.ok}, {"error", p.error}, {"info", nlohmann::json::parse(info_to_json(p.info))}}
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      },
      120.0);
  BackendProbe p;
  if (!c.ok) {
    p.error = "probing the backend failed: " + c.error;
    return p;
  }
  try {
    const auto j = nlohmann::json::parse(c.output);
    p.ok = j.at("ok").get<bool>();
    p.error = j.at("error").get<std::string>();
    p.info.name = j.at("info").at("name").get<std::string>();
    p.info.device = j.at("info").at("device").get<std::string>();
    p.info.runtime = j.at("info").at("runtime").get<std::string>();
  } catch (const std::exception& e) {
    p.ok = false;
    p.error = std::string("probing the backend failed: unreadable answer: ") + e.what();
  }
  return p;
}

std::vector<ScenarioResult> run_suite(const SuiteOptions& opt) {
  std::vector<ScenarioResult> out;
  const size_t n = opt.scenarios.size();
  for (size_t i = 0; i < n; ++i) {
    const Scenario& s = opt.scenarios[i];
    if (opt.on_start) opt.on_start(i, n, s);
    auto run_here = [&](const std::function<void(const CheckResult&)>& on_check) -> ScenarioResult {
      std::string err;
      auto backend = make_backend(opt.backend, &err);
      if (!backend) {
        ScenarioResult r;
        r.name = s.name;
        r.file = s.file;
        r.error = "cannot create the " + opt.backend + " backend: " + err;
        r.verdict = Verdict::kError;
        return r;
      }
      // Test hooks (isolated runs only): crash or hang the scenario right after its first check,
      // to prove that neither its finished checks nor the other scenarios' results are lost.
      const char* crash = std::getenv("MLA_CHECK_TEST_CRASH");
      const char* hang = std::getenv("MLA_CHECK_TEST_HANG");
      const bool crash_here = opt.isolate && crash && s.name == crash;
      const bool hang_here = opt.isolate && hang && s.name == hang;
      if (!crash_here && !hang_here) return run_scenario(s, *backend, opt.injection, on_check);
      return run_scenario(s, *backend, opt.injection, [&](const CheckResult& c) {
        if (on_check) on_check(c);
        if (crash_here) std::raise(SIGSEGV);
        for (;;) ::pause();
      });
    };
    ScenarioResult r;
    if (opt.isolate) {
      const auto t0 = std::chrono::steady_clock::now();
      // The child streams "check JSON" lines as checks finish and one "result JSON" line at the end.
      const ChildOutcome c = run_in_child(
          [&](const Emit& emit) {
            ScenarioResult result;
            try {
              result = run_here([&](const CheckResult& check) { emit("check " + check_result_to_json(check)); });
            } catch (const std::exception& e) {
              // An exception escaping the scenario becomes its ERROR with the message.
              result.name = s.name;
              result.file = s.file;
              result.error = std::string("scenario process: ") + e.what();
              result.verdict = Verdict::kError;
            }
            emit("result " + scenario_result_to_json(result));
          },
          opt.timeout_s);
      std::vector<CheckResult> streamed;
      std::optional<ScenarioResult> final_result;
      std::string parse_error;
      std::istringstream lines(c.output);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("check ", 0) == 0) {
          if (auto cr = check_result_from_json(line.substr(6), &parse_error)) streamed.push_back(std::move(*cr));
        } else if (line.rfind("result ", 0) == 0) {
          final_result = scenario_result_from_json(line.substr(7), &parse_error);
        }
      }
      if (c.ok && final_result) {
        r = std::move(*final_result);
      } else {
        // Crash, hang or garbled output: keep every check that finished before it.
        r.name = s.name;
        r.file = s.file;
        r.checks = std::move(streamed);
        r.error = !c.ok ? c.error : "unreadable result from the scenario process: " + parse_error;
        r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.verdict = scenario_verdict(r);
      }
    } else {
      r = run_here({});
    }
    r.repro = opt.repro_prefix + " --scenario " + s.file;
    out.push_back(std::move(r));
    if (opt.on_result) opt.on_result(i, n, out.back());
  }
  return out;
}

}  // namespace mla
