// Registration of the attention benchmarks (docs/semantics.md §4) with Google Benchmark, through the Backend
// interface, for any backend that has the attention operations:
//   sparse_mqa/batch:B/q:Q/H:H/K:K/seq:L  one Backend::sparse_mqa call over T = B x Q query tokens,
//                                         with its work partition from plan_sparse_mqa (lib/);
//   dense_mha/H:H/reqs:R/tokens:N[/keys:K][/mask:none]
//                                         one Backend::dense_mha call, varlen, 192/128, N query
//                                         tokens in R requests, each attending to K keys of its
//                                         own (absent: as many as its queries), bottom-right
//                                         causal (mask:none: unmasked); dense_mha_name;
//   forward/NAME/H:H/K:K                  the whole step of lib/forward_pipeline.h run_forward
//                                         (pack, routing, dense prefills, sparse decodes, the
//                                         projections) on a generated batch;
//   route/ROUTE/H:H/K:K/prefill:P         the same step on the routes sweep's batch (decodes and
//                                         prefills of P new tokens), ROUTE dense (production
//                                         routing, P <= K only) or sparse (every token sparse).
// Timing as the cache benchmarks (bench_cache_ops.h): L2 flush (untimed), CUDA events on the
// backend stream around the call, ->UseManualTime(), medians over repetitions.
//
// The forward step is recorded once: run_forward runs through a recording Backend that forwards
// every call and keeps a copy of each kernel launch's params; each timed iteration replays the
// recorded launches, in order, on the real backend between the two events. The timed region is
// therefore every kernel of the step and the host's issue gaps between them, without the
// allocations, uploads and the final download that run_forward does around them.
//
// Counters: flops_per_second (the FLOP model / device time), pct_of_gemm_rate (against the bf16
// GEMM measured at startup, measure_gemm_ceiling), bytes_per_second (the byte model),
// pct_of_copy_bw, flop_per_byte, pct_of_roofline (100 x max(FLOP / GEMM rate, bytes / copy rate) /
// time). The models are documented in docs/benchmarks.md and below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/mla_bench/bench_cache_ops.h"
#include "apps/mla_bench/bench_inputs.h"
#include "apps/mla_bench/device_timer.h"
#include "apps/mla_bench/harness_backend.h"
#include "apps/mla_bench/sweep.h"
#include "kernels/backend.h"
#include "kernels/kernel_policy.h"
#include "lib/batch/rng.h"

namespace mla::bench {

// FLOP models (docs/semantics.md §4). Sparse MQA: per query token, head and top-k slot (every one of the K
// slots, valid or not), a 576-wide score dot product and a 512-wide P.V update. Dense MHA: per
// attended (query, key) pair and head, a 192-wide score and a 128-wide P.V update.
inline constexpr int64_t kSparseFlopsPerSlot = 2 * (576 + 512);   // x heads
inline constexpr int64_t kDenseFlopsPerPair = 2 * (192 + 128);    // x heads

// Byte models: each input read once, each output written once.
// Sparse MQA per query token: q_nope_lat + q_pe (576 bf16) and out_lat (512 bf16) + lse (fp32)
// per head; the cache adds 656 bytes per *distinct* slot read by the launch (query tokens of one
// request share many of their top-k entries). Index reads (4 K per token), the work items and
// the split partials are not counted.
inline constexpr int64_t kSparseQBytesPerHead = 576 * 2;
inline constexpr int64_t kSparseOutBytesPerHead = 512 * 2 + 4;
// Dense MHA per query token and head: q 192 bf16, out 128 bf16, lse fp32; per key token: k_nope
// and v (128 + 128 bf16) per head plus k_pe (64 bf16, shared by the heads).
inline constexpr int64_t kDenseQBytesPerHead = 192 * 2 + 128 * 2 + 4;
inline constexpr int64_t kDenseKvBytesPerHead = 256 * 2;
inline constexpr int64_t kDenseKpeBytes = 64 * 2;

// Causal (bottom-right) pairs of a request with nq queries and nk keys: query i sees keys
// j <= i + nk - nq.
int64_t causal_pairs(int64_t nq, int64_t nk);
// `total` split into `parts` lengths that differ by at most one (the longer ones first).
std::vector<int64_t> equal_split(int64_t total, int64_t parts);

// A call's cost under these models: FLOPs and bytes (and, dense, the attended pairs).
struct AttentionCost {
  double flops = 0.0;
  double bytes = 0.0;
  double pairs = 0.0;  // dense_mha: attended (query, key) pairs over every request
};
// Sparse MQA over `tokens` query tokens reading `distinct_entries` distinct cache entries.
AttentionCost sparse_mqa_cost(int64_t tokens, int32_t heads, int32_t topk, int64_t distinct_entries);
// One sparse MQA launch's params over queries packed [T, H, 576] (each head's latent part, then its
// RoPE part: the params' two parts are views of it), top-k slots [T, K] into `cache`, outputs
// [T, H, 512] and LSEs [T, H], the model's softmax scale 1/sqrt(192). The work partition is the
// caller's (attach_plan).
SparseMqaParams packed_sparse_mqa_params(const bf16_t* q, int64_t tokens, int32_t heads, const int32_t* slots,
                                         int32_t topk, const PagedCacheView& cache, bf16_t* out_lat, float* lse);
// Dense MHA of num_reqs requests with cumulative query / key lengths cu_q, cu_k (host arrays of
// num_reqs + 1): attended pairs causal_pairs per request, or nq x nk unmasked.
AttentionCost dense_mha_cost(const int32_t* cu_q, const int32_t* cu_k, int32_t num_reqs, int32_t heads, bool causal);
double sparse_mqa_flops(const SparseMqaShape& s);  // the model without its byte part

// The top-k slots of a sparse shape as the benchmark draws them: requests of seq_len tokens in
// shuffled pages; token i of a request's query_tokens new ones sits at seq_len - query_tokens + i
// and picks topk distinct visible positions (-1 when fewer are visible). `rng`: sparse_mqa_rng's
// stream, which the benchmark goes on drawing its queries from.
struct SparseMqaIndices {
  PagedLayout layout;
  std::vector<int32_t> slots;  // [batch x query_tokens, topk] global slots
  int64_t distinct = 0;        // distinct valid slots: the cache entries the byte model counts
};
Rng sparse_mqa_rng(uint64_t seed, const SparseMqaShape& sh);

// The multiprocessors the sparse plan's cost model fills (plan_sparse_mqa_on_device,
// lib/pipeline/sparse_mqa_plan.h): the device's; off the GPU, an H100's 132, so that the host runs
// the same partition.
int32_t plan_multiprocessors(Backend& backend);
SparseMqaIndices make_sparse_mqa_indices(const SparseMqaShape& sh, int32_t block_size, Rng& rng);

// Dense MHA: the benchmark's name (/keys:K whenever keys_per_request is given, /mask:none when
// unmasked: causal self-attention keeps the name it always had), its requests' cumulative query
// and key lengths (equal_split of the tokens; each request's keys: keys_per_request, or as many
// as its queries), and its cost over them.
std::string dense_mha_name(const DenseMhaShape& s);
struct DenseMhaSeqlens {
  std::vector<int32_t> cu_q, cu_k;  // [requests + 1]
};
DenseMhaSeqlens dense_mha_seqlens(const DenseMhaShape& s);
AttentionCost dense_mha_cost(const DenseMhaShape& s);

// The forward step's FLOP model, from the batch alone: the routing rule of docs/semantics.md §4.4
// (count_decodes, prefills_fit_topk; every token sparse with force_sparse) and, per route,
//   sparse tokens: 2 H K 1088 (attention) + 2 H 128 512 (absorption, W_UK^T q_nope)
//                  + 2 H 512 128 (W_UV out_lat);
//   dense prefill tokens (new + cached context rows): 2 x 2 H 512 128 (K and V up-projection of
//                  every key row) + 2 H 320 per attended pair (causal among the new tokens,
//                  every context row for every new token of the request).
// Pack, gather, convert and merge count no FLOPs. The benchmark reports the FLOPs of the launches
// it recorded and says in its label when they differ from this model.
struct ForwardFlops {
  double sparse_attention = 0.0;
  double dense_attention = 0.0;
  double gemm = 0.0;
  int64_t sparse_tokens = 0;
  int64_t dense_tokens = 0;
  double total() const { return sparse_attention + dense_attention + gemm; }
};
ForwardFlops forward_flops_model(const ForwardBatch& b);

// The GEMM ceiling measured in the same run: C = A B, bf16 in and out, fp32 accumulation, through
// Backend::gemm (cuBLAS on CUDA), m = n = k = kGemmCeilingSizeDevice on a GPU
// (kGemmCeilingSizeHost on the host), 2 m n k / median time of several timed calls after warm-up.
// It is a property of the device: when `backend` has no gemm (a Python adapter without one), the
// harness's own backend of the same device (`harness`) measures it, and `backend` names that one.
inline constexpr int64_t kGemmCeilingSizeDevice = 8192;
inline constexpr int64_t kGemmCeilingSizeHost = 384;
struct GemmCeiling {
  double flops_per_second = 0.0;  // 0: not measured (no attention shapes in the sweep)
  int64_t size = 0;
  int samples = 0;
  std::string method;             // one line: how it was measured
  std::string backend;            // the backend whose gemm measured it (BackendInfo::name)
};
Status measure_gemm_ceiling(Backend& backend, DeviceTimer& timer, HarnessBackend& harness, GemmCeiling* out);

enum class AttentionOp { kSparse, kDense, kForward, kRoute };

// A route benchmark's name: route/dense|sparse/H:H/K:K/prefill:P (the pair differs in the route only).
std::string route_name(bool sparse, const RouteShape& r);

// One attention benchmark: its name and FLOP model (the sparse and dense byte models need the
// shape's inputs: make_sparse_mqa_indices, dense_mha_cost). mla-bench --list-shapes reports the
// same.
struct AttentionShape {
  AttentionOp op = AttentionOp::kSparse;
  SparseMqaShape sparse;
  DenseMhaShape dense;
  ForwardBatch forward;
  RouteShape route;

  const char* op_name() const;
  std::string name() const;
  double model_flops() const;
  bool over_host_caps(const HostLimits& caps) const;  // FLOP model above host.max_attention_flops
};

// The sweep's attention shapes, in registration order.
std::vector<AttentionShape> attention_shapes(const Sweep& sweep);

// `env` and `gemm` must outlive benchmark::RunSpecifiedBenchmarks(). Host caps: shapes whose FLOP
// model exceeds env->sweep.host.max_attention_flops are left out on the host backend.
RegisterResult register_attention_benchmarks(BenchEnv* env, const GemmCeiling* gemm, const RegisterOptions& options);

// Runtime errors seen by the attention benchmarks (not "does not fit" skips); for the exit code.
int attention_runtime_errors();

// Releases the inputs of the last attention benchmark (call before the backend goes away).
void release_attention_state();

}  // namespace mla::bench
