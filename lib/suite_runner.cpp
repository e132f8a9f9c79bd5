#include "lib/suite_runner.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace mla {

namespace {

// Runs `body` in a forked child whose stdout-equivalent is a pipe; returns what it wrote, or an
// error saying how the child ended (signal, exit code, timeout).
struct ChildOutcome {
  bool ok = false;
  std::string output;
  std::string error;
};

ChildOutcome run_in_child(const std::function<std::string()>& body, double timeout_s) {
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
    std::string out;
    int code = 0;
    try {
      out = body();
    } catch (const std::exception& e) {
      out.clear();
      code = 4;
      (void)e;
    }
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t w = ::write(fds[1], out.data() + off, out.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
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
      [&] {
        const BackendProbe p = probe_in_process(choice);
        return nlohmann::json{{"ok", p.ok}, {"error", p.error}, {"info", nlohmann::json::parse(info_to_json(p.info))}}
            .dump();
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
    auto run_here = [&]() -> ScenarioResult {
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
      // Test hooks: prove that a crashing or hanging scenario loses no other scenario's result.
      if (const char* crash = std::getenv("MLA_CHECK_TEST_CRASH"); crash && opt.isolate && s.name == crash)
        std::raise(SIGSEGV);
      if (const char* hang = std::getenv("MLA_CHECK_TEST_HANG"); hang && opt.isolate && s.name == hang)
        for (;;) ::pause();
      return run_scenario(s, *backend, opt.injection);
    };
    ScenarioResult r;
    if (opt.isolate) {
      const auto t0 = std::chrono::steady_clock::now();
      const ChildOutcome c = run_in_child(
          [&] {
            // An exception escaping the scenario becomes its ERROR with the message, not a bare
            // exit code.
            try {
              return scenario_result_to_json(run_here());
            } catch (const std::exception& e) {
              ScenarioResult r;
              r.name = s.name;
              r.file = s.file;
              r.error = std::string("scenario process: ") + e.what();
              r.verdict = Verdict::kError;
              return scenario_result_to_json(r);
            }
          },
          opt.timeout_s);
      std::string parse_error;
      std::optional<ScenarioResult> parsed;
      if (c.ok) parsed = scenario_result_from_json(c.output, &parse_error);
      if (parsed) {
        r = std::move(*parsed);
      } else {
        r.name = s.name;
        r.file = s.file;
        r.error = c.ok ? "unreadable result from the scenario process: " + parse_error : c.error;
        r.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        r.verdict = Verdict::kError;
      }
    } else {
      r = run_here();
    }
    r.repro = opt.repro_prefix + " --scenario " + s.file;
    out.push_back(std::move(r));
    if (opt.on_result) opt.on_result(i, n, out.back());
  }
  return out;
}

}  // namespace mla
