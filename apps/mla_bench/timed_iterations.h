// The timed loop every mla-bench benchmark shares: per iteration, flush L2 (untimed, issued
// before the start event), record start, run, record stop, and hand the device time to Google
// Benchmark (UseManualTime). A failing operation ends the benchmark with SkipWithError and counts
// as a runtime error.
#pragma once

#include <functional>

#include <benchmark/benchmark.h>

#include "apps/mla_bench/bench_cache_ops.h"

namespace mla::bench {

// Returns the total timed seconds (0 when the benchmark was ended by an error).
double time_iterations(benchmark::State& st, BenchEnv& env, const std::function<Status(Backend&)>& run,
                       int* runtime_errors);

}  // namespace mla::bench
