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
#include "apps/mla_bench/harness_backend.h"
#include "apps/mla_bench/l2_flush.h"
#include "apps/mla_bench/roofline.h"
#include "apps/mla_bench/sweep.h"
#include "kernels/backend.h"
#include "kernels/kernel_policy.h"

namespace mla::bench {

struct BenchEnv {
  Backend* backend = nullptr;
  DeviceTimer* timer = nullptr;
  L2Flusher* flusher = nullptr;
  Roofline roofline;
  Sweep sweep;
  // The harness's own backend of the device: prepares the inputs (the entry pools) and measures
  // the GEMM ceiling when `backend` is an adapter that lacks pack or gemm.
  HarnessBackend harness;
};

struct RegisterOptions {
  bool host_caps = true;  // host backend: leave out shapes above the sweep's host limits
};

struct RegisterResult {
  int registered = 0;
  std::vector<std::string> left_out;  // names not registered (host caps), for a note
};

enum class CacheOp { kPack, kGather, kConvert };

// One cache-path benchmark: its name, byte and item models (the counters' bytes_per_second and
// items_per_second per call) and label. mla-bench --list-shapes reports the same.
struct CacheShape {
  CacheOp op = CacheOp::kPack;
  int64_t size = 0;          // tokens (pack), rows (gather, convert)
  int32_t block_size = 0;
  bool seq_starts = false;   // gather
  int32_t topk = 0;          // convert

  int64_t bytes() const;
  int64_t items() const;     // tokens (pack), rows (gather), indices (convert)
  const char* op_name() const;
  std::string name() const;
  std::string label() const;
  bool over_host_caps(const HostLimits& caps) const;  // left out on the host backend by default
};

// The sweep's cache-path shapes, in registration order.
std::vector<CacheShape> cache_shapes(const Sweep& sweep);

// `env` must outlive benchmark::RunSpecifiedBenchmarks().
RegisterResult register_cache_benchmarks(BenchEnv* env, const RegisterOptions& options);

// Runtime errors seen by the benchmarks (not "does not fit" skips); for the exit code.
int benchmark_runtime_errors();

// Releases the inputs of the last benchmark (call before the backend goes away).
void release_benchmark_state();

// Small conversions get pct_of_empty_launch when they move at most this many bytes.
inline constexpr int64_t kLatencyCounterMaxBytes = int64_t{16} << 20;

}  // namespace mla::bench
