// The drift check (docs/drift.md): the synthetic layer stack of lib/checks/layer_stack.h through
// the dense route and the forced-sparse route of the backend under test (lib/pipeline's
// run_forward) and through the reference (ref::forward in double), each chain fed by its own
// residual stream; every layer's output and stream against the reference chain's, within the
// bounds derived from the per-step tolerances.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lib/checks/attention_check_context.h"
#include "lib/checks/compare.h"
#include "lib/checks/layer_stack.h"
#include "reference/cache_reference.h"
#include "reference/forward_reference.h"

namespace mla {

namespace {

// One route's figures at one layer; the bounds are set once every layer's reference norm is known.
struct RouteLayer {
  Metrics out;          // o_l against the reference chain's
  Metrics stream;       // x_l against the reference chain's
  std::string routing;  // why the run did not route as asked; "" when it did
  int64_t context_chunks = 0;  // LSE merges of the step's context (the dense route's chunks)
  double seconds = 0.0;
};

struct Chain {
  bool sparse = false;
  std::vector<double> x;  // the chain's residual stream
  std::vector<RouteLayer> layers;
};

// Element-wise figures only: the verdict is the cosine against the bounds (docs/drift.md).
Metrics compare_values(const std::vector<double>& ref, const std::vector<double>& got) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  Metrics m = compare_tolerance(ref, got, Tolerance{inf, inf, -1.0});
  m.extra.erase("tol_abs");
  m.extra.erase("tol_rel");
  return m;
}

// The reference step on a layer: its own inputs, its own new tokens packed into the layer's cache.
std::vector<double> reference_step(const AttentionCheckContext& ctx, const StackLayer& layer, const LayerInputs& in) {
  const Batch& b = ctx.batch;
  const AttentionData d = with_inputs(layer.data, in);
  std::vector<uint8_t> cache = d.context_cache;
  ref::pack(in.kv_c, in.k_pe, d.new_slots, reference_geometry(b.layout), cache);
  const ref::ForwardInputs fi = reference_forward_inputs(ctx.scenario, b, with_new_latents(layer.latents, b, in), d,
                                                         /*force_sparse=*/false, ref::NewTokenKv::kBf16,
                                                         reference_dequant(ctx.backend));
  return ref::forward(fi, cache).out;
}

// One route's step on a layer: its inputs from its stream, the step on the backend, the update
// with the reference's scale; figures against the reference's output and stream.
RouteLayer route_step(const AttentionCheckContext& ctx, const StackLayer& layer, Chain& chain, double gamma,
                      const std::vector<double>& ref_out, const std::vector<double>& ref_stream) {
  const auto t0 = std::chrono::steady_clock::now();
  const Batch& b = ctx.batch;
  const int32_t H = ctx.data.heads;
  const AttentionData d = with_inputs(layer.data, layer_inputs(layer, H, chain.x));
  ForwardConfig cfg = forward_config(ctx);
  cfg.force_sparse = chain.sparse;
  BufferSet bufs(ctx.backend);
  const ForwardResult res = run_forward(ctx.backend, bufs, b, d, cfg);
  const std::vector<double> out = widen_bf16(res.out);
  RouteLayer r;
  r.context_chunks = res.context_chunks;
  r.out = compare_values(ref_out, out);
  bufs.audit(r.out);
  if (chain.sparse && res.num_sparse_tokens != b.num_tokens)
    r.routing = "the forced-sparse run sent only " + std::to_string(res.num_sparse_tokens) + " of " +
                std::to_string(b.num_tokens) + " tokens sparse";
  if (!chain.sparse && (!res.prefills_dense || res.num_sparse_tokens != b.num_decode_tokens))
    r.routing = "the dense run did not route the prefills dense (" + std::to_string(res.num_sparse_tokens) +
                " tokens went sparse, " + std::to_string(b.num_decode_tokens) + " decode tokens)";
  add_update(chain.x, layer_update(layer, H, out), gamma);
  r.stream = compare_values(ref_stream, chain.x);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

CheckResult layer_result(bool sparse, int32_t layer, const RouteLayer& rl, const DriftBound& bound) {
  CheckResult r;
  r.id = std::string("drift/") + (sparse ? "sparse" : "dense") + "/layer[" + std::to_string(layer) + "]";
  r.check = "drift";
  r.duration_s = rl.seconds;
  r.metrics = rl.out;
  r.metrics.cos_tolerance = bound.out_cos;
  r.metrics.nonfinite_mismatches += rl.stream.nonfinite_mismatches;
  r.metrics.extra["layer"] = layer;
  r.metrics.extra["stream_elements"] = static_cast<double>(rl.stream.elements);
  r.metrics.extra["stream_max_abs_err"] = rl.stream.max_abs_err;
  r.metrics.extra["stream_max_rel_err"] = rl.stream.max_rel_err;
  r.metrics.extra["stream_cos_diff"] = rl.stream.cos_diff;
  r.metrics.extra["stream_cos_tolerance"] = bound.stream_cos;
  finalize(r);
  std::string issue = rl.routing;
  // A NaN bound (a step tolerance's cosine set negative: not checked) checks nothing, as finalize
  // does for the output.
  if (std::isfinite(bound.stream_cos) && !(rl.stream.cos_diff <= bound.stream_cos))
    issue += (issue.empty() ? "" : "; ") + std::string("stream cosine difference ") + std::to_string(rl.stream.cos_diff) +
             " over bound " + std::to_string(bound.stream_cos);
  if (!issue.empty()) {
    if (r.verdict == Verdict::kPass) {
      r.verdict = Verdict::kFail;
      r.reason = issue;
    } else {
      r.reason += "; " + issue;
    }
  }
  return r;
}

// The fewest keys any decode token sees: a decode's first new token sits at position
// context_len, so it sees min(context_len + 1, topk) keys; 0 when the batch has no decode.
int64_t fewest_decode_keys(const Batch& b, int32_t topk) {
  int64_t fewest = 0;
  for (int32_t r = 0; r < b.num_decodes; ++r) {
    if (b.query_lens[static_cast<size_t>(r)] <= 0) continue;
    const int64_t keys = std::min<int64_t>(int64_t{b.context_lens[static_cast<size_t>(r)]} + 1, topk);
    fewest = fewest == 0 ? keys : std::min(fewest, keys);
  }
  return fewest;
}

}  // namespace

std::vector<CheckResult> run_drift_check(const AttentionCheckContext& ctx) {
  const Batch& b = ctx.batch;
  if (const std::string why = no_dense_route(b, ctx.data.topk); !why.empty()) {
    return {skipped_check("drift", "drift", why)};
  }
  const Scenario& s = ctx.scenario;
  const int32_t L = s.attention.drift_layers, H = ctx.data.heads;
  std::vector<Chain> chains(2);
  std::vector<double> norms;  // the reference stream's norms n_0 .. n_L
  const CheckResult stack = timed_check("drift", "drift", [&] {
    std::vector<double> x_ref = drift_initial_stream(s.seed, b.num_tokens);
    norms.push_back(frobenius_norm(x_ref));
    chains[0].x = chains[1].x = x_ref;
    chains[1].sparse = true;
    for (int32_t l = 1; l <= L; ++l) {
      const auto t0 = std::chrono::steady_clock::now();
      const StackLayer layer = make_stack_layer(s, b, l);
      const std::vector<double> ref_out = reference_step(ctx, layer, layer_inputs(layer, H, x_ref));
      const std::vector<double> update = layer_update(layer, H, ref_out);
      const double gamma = update_scale(x_ref, update);
      add_update(x_ref, update, gamma);
      norms.push_back(frobenius_norm(x_ref));
      const double shared = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (Chain& c : chains) {
        c.layers.push_back(route_step(ctx, layer, c, gamma, ref_out, x_ref));
        c.layers.back().seconds += shared / static_cast<double>(chains.size());
      }
    }
    return CheckResult{};
  });
  if (stack.verdict != Verdict::kPass) return {stack};
  std::vector<CheckResult> results;
  for (const Chain& c : chains) {
    // A layer's own error is its step's forward tolerance, which grows with the step's context
    // merges as the forward check's does (every layer runs the same batch: the most of any layer).
    int64_t merges = 0;
    for (const RouteLayer& rl : c.layers) merges = std::max(merges, rl.context_chunks);
    AttentionTolerances tol = s.attention.tolerances;
    tol.forward = with_merges(tol.forward, merges);
    const std::vector<DriftBound> bounds =
        drift_bounds(drift_own_error(tol, c.sparse), norms, drift_rounding_spacing(fewest_decode_keys(b, ctx.data.topk)));
    for (int32_t l = 1; l <= L; ++l) {
      const size_t i = static_cast<size_t>(l - 1);
      results.push_back(layer_result(c.sparse, l, c.layers[i], bounds[i]));
    }
  }
  return results;
}

}  // namespace mla
