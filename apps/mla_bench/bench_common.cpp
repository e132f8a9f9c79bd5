#include "apps/mla_bench/bench_common.h"

namespace mla::bench {

double time_iterations(benchmark::State& st, BenchEnv& env, const std::function<Status(Backend&)>& run,
                       int* runtime_errors) {
  double timed = 0.0;
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
  }
  return timed;
}

}  // namespace mla::bench
