// Registration of the cache-path benchmarks (pack, gather + upconvert, top-k conversion) with
// Google Benchmark, through the Backend interface, for any backend. Each benchmark:
//   - prepares its inputs once (bench_inputs.h), uploads them, and runs the operation once
//     untimed (warm-up, and a first check that the call succeeds);
//   - per iteration: L2 flush (untimed), timer start, the operation, timer stop; the time is
//     reported with SetIterationTime (->UseManualTime());
//   - reports bytes_per_second (byte model in the label), items_per_second, pct_of_copy_bw and,
//     for small conversions on a GPU, pct_of_empty_launch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/mla_bench/device_timer.h"
#include "apps/mla_bench/l2_flush.h"
#include "apps/mla_bench/roofline.h"
#include "apps/mla_bench/sweep.h"
#include "kernels/backend.h"

namespace mla::bench {

struct BenchEnv {
  Backend* backend = nullptr;
  DeviceTimer* timer = nullptr;
  L2Flusher* flusher = nullptr;
  Roofline roofline;
  Sweep sweep;
};

struct RegisterOptions {
  bool host_caps = true;  // host backend: leave out shapes above the sweep's host limits
};

struct RegisterResult {
  int registered = 0;
  std::vector<std::string> left_out;  // names not registered (host caps), for a note
};

// `env` must outlive benchmark::RunSpecifiedBenchmarks().
RegisterResult register_cache_benchmarks(BenchEnv* env, const RegisterOptions& options);

// Runtime errors seen by the benchmarks (not "does not fit" skips); for the exit code.
int benchmark_runtime_errors();

// Releases the inputs of the last benchmark (call before the backend goes away).
void release_benchmark_state();

// Small conversions get pct_of_empty_launch when they move at most this many bytes.
inline constexpr int64_t kLatencyCounterMaxBytes = int64_t{16} << 20;

}  // namespace mla::bench
