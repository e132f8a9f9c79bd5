#include "apps/mla_bench/bench_common.h"

#include <exception>
#include <new>

namespace mla::bench {

bool build_and_warm_up(benchmark::State& st, int* runtime_errors, const std::function<Status()>& build,
                       const std::function<Status()>& warm_up) {
  Status status;
  try {
    status = build();
  } catch (const CapacityError& e) {
    st.SkipWithError(("does not fit: " + e.message).c_str());
    return false;
  } catch (const std::bad_alloc&) {
    st.SkipWithError("does not fit: host memory for the inputs");
    return false;
  } catch (const std::exception& e) {
    status = Status::error(e.what());
  }
  if (status.ok()) status = warm_up();
  if (status.ok()) return true;
  // A backend without the operation, or an adapter that declares the shape unsupported, is a
  // skip with its reason, not a runtime error.
  if (status.is_unsupported()) {
    st.SkipWithError(("unsupported: " + status.message()).c_str());
    return false;
  }
  ++*runtime_errors;
  st.SkipWithError(("setup or first run failed: " + status.message()).c_str());
  return false;
}

double time_iterations(benchmark::State& st, BenchEnv& env, const std::function<Status(Backend&)>& run,
                       int* runtime_errors) {
  double timed = 0.0;
  int64_t started_early = 0;
  for (auto _ : st) {
    Status status = env.flusher->flush();  // untimed: issued before the start event
    if (status.ok()) status = env.timer->start();
    if (status.ok()) status = run(*env.backend);
    double seconds = 0.0;
    if (status.ok()) status = env.timer->stop(&seconds);
    if (!status.ok()) {
      ++*runtime_errors;
      st.SkipWithError(status.message().c_str());
      return 0.0;
    }
    st.SetIterationTime(seconds);
    timed += seconds;
    if (env.timer->last_started_early()) ++started_early;
  }
  // On the GPU: iterations whose timed region began while the call was still being queued
  // (docs/benchmarks.md, the lead); 0 means every launch was queued inside the lead and the flush.
  if (env.timer->on_device()) st.counters["late_queue_calls"] = static_cast<double>(started_early);
  return timed;
}

double time_and_count(benchmark::State& st, BenchEnv& env, const std::function<Status(Backend&)>& run,
                      int* runtime_errors, int64_t bytes_per_iteration, int64_t items_per_iteration,
                      const std::string& label) {
  const double timed = time_iterations(st, env, run, runtime_errors);
  if (st.error_occurred()) return 0.0;
  const auto iters = static_cast<int64_t>(st.iterations());
  st.SetBytesProcessed(iters * bytes_per_iteration);
  st.SetItemsProcessed(iters * items_per_iteration);
  st.SetLabel(label);
  return timed;
}

}  // namespace mla::bench
