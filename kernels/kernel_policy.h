// The implementation policy of the CUDA backend: which sparse MQA and dense MHA implementation its
// launchers run, how the dense `wgmma` kernel schedules its work, whether it writes a debug
// product, and whether the backend waits after every operation. Passed to make_cuda_backend()
// (kernels/backend.h) and fixed for the backend's lifetime; the launchers receive it from the
// backend and read nothing else. The apps build it once from the MLA_* environment variables
// (lib/kernel_policy_env.h); tests set it directly. describe() is the text recorded in the
// report's provenance and mla-bench's context. CUDA-free, host-only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/common/status.h"

namespace mla {

// The requested implementation; a launcher falls back (crossover ->) wgmma -> tc -> simple where
// the build, the device, the operands' alignment or (crossover) the head count rule the requested
// one out (sparse_mqa_launcher.h, dense_mha_launcher.h say when). `simple` is the fp32 CUDA-core
// correctness baseline, `tc` tensor cores through mma.sync, `wgmma` Hopper warpgroup MMA (sm_90a
// builds only), `crossover` the `wgmma` products with each key dequantized once per pair of
// 64-head CTAs (a 2-CTA cluster sharing the bf16 keys through distributed shared memory).
// `auto` (sparse MQA's default) requests, per launch, whichever of crossover and wgmma measured
// faster for its shape (sparse_mqa_launcher.h's rule), then falls back like the one it requests.
enum class SparseMqaImpl { kAuto, kCrossover, kWgmma, kTc, kSimple };
enum class DenseMhaImpl { kWgmma, kTc, kSimple };

// How the dense `wgmma` kernel's CTAs take work items: a persistent grid of min(items, SMs) CTAs
// taking the next unclaimed item, or one CTA per item.
enum class DenseWgmmaSchedule { kPersistent, kGrid };

// kNone ("off"): the attention. kScores / kValues: the dense `wgmma` kernel writes one isolated
// product instead (kernels/cuda/dense_mha/dense_mha_impls.h); an unsupported error where that
// kernel does not run.
enum class DenseWgmmaDebug { kNone, kScores, kValues };

struct KernelPolicy {
  SparseMqaImpl sparse_mqa = SparseMqaImpl::kAuto;
  DenseMhaImpl dense_mha = DenseMhaImpl::kWgmma;
  DenseWgmmaSchedule dense_wgmma_schedule = DenseWgmmaSchedule::kPersistent;
  DenseWgmmaDebug dense_wgmma_debug = DenseWgmmaDebug::kNone;
  // At most this many CTAs for the dense `wgmma` kernel under either schedule (0: no cap); a
  // test hook that makes the loop over items run on small problems.
  int64_t dense_wgmma_max_ctas = 0;
  // Wait for the stream after every operation, so that a kernel fault names its own operation.
  bool sync_each = false;

  bool operator==(const KernelPolicy& o) const {
    return sparse_mqa == o.sparse_mqa && dense_mha == o.dense_mha && dense_wgmma_schedule == o.dense_wgmma_schedule &&
           dense_wgmma_debug == o.dense_wgmma_debug && dense_wgmma_max_ctas == o.dense_wgmma_max_ctas &&
           sync_each == o.sync_each;
  }
  bool operator!=(const KernelPolicy& o) const { return !(*this == o); }
};

// Names: "auto" | "crossover" | "wgmma" | "tc" | "simple" (sparse MQA), "wgmma" | "tc" | "simple" (dense
// MHA), "persistent" | "grid", "off" | "scores" | "values".
const char* to_string(SparseMqaImpl v);
const char* to_string(DenseMhaImpl v);
const char* to_string(DenseWgmmaSchedule v);
const char* to_string(DenseWgmmaDebug v);

// The value named by `text` (exactly one of the names above); else an error that quotes the text
// and lists the names, e.g. "unknown sparse MQA implementation 'fastest' (expected 'auto',
// 'crossover', 'wgmma', 'tc' or 'simple')".
Status parse(std::string_view text, SparseMqaImpl* out);
Status parse(std::string_view text, DenseMhaImpl* out);
Status parse(std::string_view text, DenseWgmmaSchedule* out);
Status parse(std::string_view text, DenseWgmmaDebug* out);

// Space-separated key=value pairs, every field in this order:
//   "sparse_mqa=auto dense_mha=wgmma dense_wgmma_schedule=persistent dense_wgmma_debug=off
//    dense_wgmma_max_ctas=none sync_each=0"
// (max_ctas: the number, or none for 0; sync_each: 1 or 0).
std::string describe(const KernelPolicy& policy);

// What a backend records (BackendInfo::kernels): describe() of `policy` with sparse_mqa /
// dense_mha replaced by the implementations that run (`sparse_runs`, `dense_runs`), then
// " sparse_mqa_requested=<policy's>" / " dense_mha_requested=<policy's>" for each one that differs.
std::string describe(const KernelPolicy& policy, SparseMqaImpl sparse_runs, DenseMhaImpl dense_runs);

}  // namespace mla
