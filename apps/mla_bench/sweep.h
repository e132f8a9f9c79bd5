// A benchmark sweep: which shapes mla-bench registers, and how long it measures each. The file
// format is documented in docs/benchmarks.md; the files live in scenarios/sweeps/ and are also
// compiled into the binary as built-in sweeps (named by their file name without ".json").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/status.h"

namespace mla::bench {

struct HostLimits {
  int64_t max_tokens = 65536;               // pack tokens and gather rows above this are not run
  int64_t max_convert_elements = 8 << 20;   // convert rows * topk above this are not run
};

struct Sweep {
  std::string name;
  std::string description;
  std::string source;         // the file it came from, or "built-in"
  uint64_t seed = 1;
  // Defaults of --benchmark_repetitions and --benchmark_min_time (timed seconds per repetition);
  // the flags, given on the command line or in BENCHMARK_* environment variables, win.
  int repetitions = 5;
  double min_time_s = 0.05;
  HostLimits host;

  int32_t pack_block_size = 64;
  std::vector<int64_t> pack_tokens;

  std::vector<int32_t> gather_block_sizes;
  std::vector<bool> gather_seq_starts;  // false: no seq_starts (nullptr); true: nonzero, unaligned
  std::vector<int64_t> gather_rows;

  int32_t convert_block_size = 64;
  std::vector<int32_t> convert_topk;
  std::vector<int64_t> convert_rows;  // shapes are every rows x topk pair
};

// Names of the sweeps compiled into the binary, sorted.
std::vector<std::string> builtin_sweep_names();

// Parses a sweep from JSON text; `source` names it in error messages. Unknown keys are errors.
Status parse_sweep(const std::string& json_text, const std::string& source, Sweep* out);

// NAME_OR_FILE: an existing file is read; otherwise a built-in name.
Status load_sweep(const std::string& name_or_file, Sweep* out);

}  // namespace mla::bench
