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
  // Attention shapes (sparse_mqa, dense_mha, forward) whose FLOP model exceeds this per call are
  // not run on the host backend (its attention runs at a few GFLOP/s).
  int64_t max_attention_flops = int64_t{2} << 30;
};

// One sparse-MQA launch: `batch` requests of `seq_len` tokens each, the last `query_tokens` of
// each new this step (T = batch x query_tokens rows of q), `heads` heads, `topk` indices per token.
struct SparseMqaShape {
  int32_t batch = 1;
  int32_t query_tokens = 1;
  int32_t heads = 128;
  int32_t topk = 2048;
  int64_t seq_len = 4096;
  int32_t splits = 0;  // column splits per token forced on the plan (attention sweeps only); 0: the plan's choice
};

// One dense-MHA launch (varlen): `tokens` query tokens split into `requests` requests of (nearly)
// equal length, `heads` heads, head dims 192 (q/k) and 128 (v). Each request attends to its own
// keys: as many as its queries (self-attention, keys_per_request 0) or keys_per_request of them,
// the same for every request (a cached context before the new tokens). Causal is bottom-right
// (query i of nq sees keys j <= i + nk - nq; needs nq <= nk); unmasked sees every key.
struct DenseMhaShape {
  int32_t heads = 128;
  int64_t tokens = 1024;
  int32_t requests = 1;
  int64_t keys_per_request = 0;  // 0: keys = the request's queries
  bool causal = true;
};

// One forward step (lib/forward_pipeline.h run_forward) on an explicit batch: decodes first.
struct ForwardBatch {
  std::string name;
  std::vector<int32_t> seq_lens;
  std::vector<int32_t> query_lens;
  int32_t decode_threshold = 1;
  int32_t heads = 128;
  int32_t topk = 2048;
  bool force_sparse = false;  // every token through sparse MQA (ForwardConfig::force_sparse)
};

// One route of the route comparison (docs/benchmarks.md, "Routes"): the sweep's decodes followed
// by `prefills` prefills of `prefill_len` new tokens each (no cached context), as one forward
// step, with the production routing (dense; only registered when every prefill fits top-k, so
// that the prefills do go dense) or with every token sparse (sparse).
struct RouteShape {
  int32_t prefill_len = 0;
  int32_t prefills = 1;
  ForwardBatch batch;  // the whole batch; batch.force_sparse says the route
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

  std::vector<int32_t> pack_block_sizes = {64};  // "block_size": B or "block_sizes": [B, ...]
  std::vector<int64_t> pack_tokens;

  std::vector<int32_t> gather_block_sizes;
  std::vector<bool> gather_seq_starts;  // false: no seq_starts (nullptr); true: nonzero, unaligned
  std::vector<int64_t> gather_rows;

  int32_t convert_block_size = 64;
  std::vector<int32_t> convert_topk;
  std::vector<int64_t> convert_rows;  // shapes are every rows x topk pair

  // "attention": the shape lists are the union of each group's cartesian product, duplicates
  // removed, in file order.
  int32_t sparse_block_size = 64;
  std::vector<SparseMqaShape> sparse_shapes;
  std::vector<DenseMhaShape> dense_shapes;
  int32_t forward_block_size = 64;
  std::vector<ForwardBatch> forward_batches;  // one entry per (batch, heads, topk)
  // "attention.routes": per topk, heads and prefill length (ascending), dense (where the prefills
  // fit top-k) then sparse.
  int32_t routes_block_size = 64;
  std::vector<RouteShape> route_shapes;

  // "dcp": the decode-context-parallel step over 1..N GPUs, one process per GPU (apps/mla_bench/
  // bench_dcp.h): each shape at each rank count. A sweep with a dcp section holds nothing else.
  int32_t dcp_block_size = 64;
  int32_t dcp_interleave = 1;
  std::vector<int32_t> dcp_ranks;         // ascending, distinct
  std::vector<SparseMqaShape> dcp_shapes;
  bool has_dcp() const { return !dcp_shapes.empty() && !dcp_ranks.empty(); }

  bool has_attention() const {
    return !sparse_shapes.empty() || !dense_shapes.empty() || !forward_batches.empty() || !route_shapes.empty();
  }
};

// Names of the sweeps compiled into the binary, sorted.
std::vector<std::string> builtin_sweep_names();

// Parses a sweep from JSON text; `source` names it in error messages. Unknown keys are errors.
Status parse_sweep(const std::string& json_text, const std::string& source, Sweep* out);

// NAME_OR_FILE: an existing file is read; otherwise a built-in name.
Status load_sweep(const std::string& name_or_file, Sweep* out);

}  // namespace mla::bench
