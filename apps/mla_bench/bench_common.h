// What every mla-bench benchmark family shares: the timed loop (per iteration, flush L2 untimed
// before the start event, record start, run, record stop, hand the device time to Google
// Benchmark with UseManualTime; a failing operation ends the benchmark with SkipWithError and
// counts as a runtime error) and the registration of a family's shapes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "apps/mla_bench/bench_cache_ops.h"

namespace mla::bench {

// A failed allocation: the shape does not fit this backend (skipped, not a runtime error).
struct CapacityError {
  std::string message;
};
inline void check_alloc(const Status& st) {
  if (!st.ok()) throw CapacityError{st.message()};
}

// Builds a shape's inputs (build) and runs it once, untimed (warm_up: run, synchronize, verify).
// A CapacityError or bad_alloc from build skips the benchmark as "does not fit"; any other failure
// skips it as a runtime error (counted). Returns whether the shape is ready to time.
bool build_and_warm_up(benchmark::State& st, int* runtime_errors, const std::function<Status()>& build,
                       const std::function<Status()>& warm_up);

// Returns the total timed seconds (0 when the benchmark was ended by an error).
double time_iterations(benchmark::State& st, BenchEnv& env, const std::function<Status(Backend&)>& run,
                       int* runtime_errors);

// time_iterations, then (unless that ended the benchmark) the bytes and items processed per
// iteration and the label. Returns the timed seconds (0 when the benchmark was ended by an error).
double time_and_count(benchmark::State& st, BenchEnv& env, const std::function<Status(Backend&)>& run,
                      int* runtime_errors, int64_t bytes_per_iteration, int64_t items_per_iteration,
                      const std::string& label);

// The inputs of the benchmark being run, kept across Google Benchmark's calls of it (one per run
// and repetition) and freed before the next benchmark's are built (device memory is the limit).
template <typename P>
class PreparedCache {
 public:
  // The prepared inputs for `key`: the kept ones, or new ones made by build and run once by
  // warm_up (build_and_warm_up's rules). nullptr when the benchmark was skipped.
  P* get(benchmark::State& st, int* runtime_errors, const std::string& key,
         const std::function<Status(std::unique_ptr<P>*)>& build, const std::function<Status(P&)>& warm_up) {
    if (key_ == key && current_) return current_.get();
    release();
    std::unique_ptr<P> p;
    if (!build_and_warm_up(st, runtime_errors, [&] { return build(&p); }, [&] { return warm_up(*p); })) {
      return nullptr;
    }
    current_ = std::move(p);
    key_ = key;
    return current_.get();
  }
  void release() {
    current_.reset();
    key_.clear();
  }

 private:
  std::string key_;
  std::unique_ptr<P> current_;
};

// What Google Benchmark appends to the name of a benchmark timed with UseManualTime() (as
// register_shapes registers every one): the run_name of its JSON output and --benchmark_list_tests.
inline constexpr const char* kManualTimeSuffix = "/manual_time";

// Registers one benchmark per shape (name(), run(state, shape)); on the host backend, shapes for
// which over_host_caps(shape) holds are left out and listed. Repetitions, aggregates-only and min
// time come from flags (main.cpp sets the sweep's values as defaults), so that names stay the
// same whatever the repetition count.
template <typename Shape, typename OverCaps, typename Run>
RegisterResult register_shapes(const std::vector<Shape>& shapes, bool on_device, bool host_caps, OverCaps over_host_caps,
                               Run run) {
  RegisterResult result;
  for (const Shape& shape : shapes) {
    if (!on_device && host_caps && over_host_caps(shape)) {
      result.left_out.push_back(shape.name());
      continue;
    }
    benchmark::internal::Benchmark* bm = benchmark::RegisterBenchmark(
        shape.name().c_str(), [shape, run](benchmark::State& st) { run(st, shape); });
    bm->UseManualTime()->Unit(benchmark::kMicrosecond);
    ++result.registered;
  }
  return result;
}

}  // namespace mla::bench
