// The drift check's synthetic layer stack (docs/drift.md): L layers, each with its own cache
// contents, weights, top-k picks and projections drawn from a seed of its own; the residual
// stream that feeds each layer's queries and new latents and receives its output; and the bounds
// of each layer's error, derived from the per-step tolerances. Everything here is a pure function
// of the scenario, its seed and the values passed in.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/batch/attention_data.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "lib/scenario/scenario.h"

namespace mla {

// The stack's constants (docs/drift.md, "The layer stack" and "The bounds, derived").
inline constexpr int32_t kDriftWidth = 256;             // D: width of the residual stream
inline constexpr double kDriftUpdateRatio = 0.1;        // u: ||update|| / ||stream|| in the reference
inline constexpr double kDriftGain = 1.5;               // G: output error per input error of one step
inline constexpr double kDriftRoundingSpacing = 1.0 / 64;  // Δ: bf16 inputs 2^-7 + a decode's own FP8 entry 2^-7
                                                         //    (a decode that sees >= 16 keys; drift_rounding_spacing)
inline constexpr double kDriftMargin = 2.0;             // m: on the propagated part of the error

// Layer `layer`'s seed (layers count from 1), drawn from the scenario's seed.
uint64_t drift_layer_seed(uint64_t seed, int32_t layer);

// x_0: [tokens, D], entries N(0, 1) from the scenario's seed.
std::vector<double> drift_initial_stream(uint64_t seed, int64_t tokens);

// One layer. `latents` and `data` are what an attention scenario with the layer's seed generates
// (make_cache_data, make_attention_data): the latents of every cached position, the weights, the
// indexer's picks, the new tokens' slots and the cache with the context packed. The new tokens'
// latents and the queries they hold are replaced by each chain's own (layer_inputs).
struct StackLayer {
  uint64_t seed = 0;
  CacheData latents;
  AttentionData data;
  std::vector<double> p_q;  // [H * 192, D]   N(0, 1 / (3 D)): head h's q_nope rows 192h.., q_pe rows 192h+128..
  std::vector<double> p_c;  // [512, D]       N(0, 0.01 / D): the new tokens' kv_c
  std::vector<double> p_r;  // [64, D]        N(0, 0.25 / D): the new tokens' k_pe
  std::vector<double> w_o;  // [D, H * 128]   N(0, 1 / (128 H)): the update from the attention output
};
StackLayer make_stack_layer(const Scenario& s, const Batch& b, int32_t layer);

// A layer's inputs from a stream x [T, D]: each token's row divided by its root mean square, then
// projected and rounded to bf16.
struct LayerInputs {
  std::vector<uint16_t> q_nope;  // [T, H, 128]
  std::vector<uint16_t> q_pe;    // [T, H, 64]
  std::vector<uint16_t> kv_c;    // [T, 512]
  std::vector<uint16_t> k_pe;    // [T, 64]
};
LayerInputs layer_inputs(const StackLayer& layer, int32_t heads, const std::vector<double>& x);

// `data` with the queries and the new tokens' latents of `in`.
AttentionData with_inputs(const AttentionData& data, const LayerInputs& in);
// The latents of every cached position with the new tokens' rows taken from `in` (the
// reference's kv_c / k_pe rows, Batch::all_slots order).
CacheData with_new_latents(const CacheData& latents, const Batch& b, const LayerInputs& in);

// W_O o for every token: [T, D] from o [T, H * 128].
std::vector<double> layer_update(const StackLayer& layer, int32_t heads, const std::vector<double>& o);

// γ = u ||x|| / ||update|| (Frobenius norms); 0 when the update is 0.
double update_scale(const std::vector<double>& x, const std::vector<double>& update);

// x += gamma * update.
void add_update(std::vector<double>& x, const std::vector<double>& update, double gamma);

double frobenius_norm(const std::vector<double>& v);

// A route's own error per layer, as a relative root mean square, from the per-step tolerances:
// dense sqrt(2 c_forward); sparse (against the dense reference) that plus sqrt(2 c_equivalence_bf16).
double drift_own_error(const AttentionTolerances& tol, bool sparse);

// The bounds of layer l = 1..L (index l - 1) for a route of own error rho, given the reference
// stream's norms n_0 .. n_L (docs/drift.md, "Recursion" and "Bounds"): cosine differences.
struct DriftBound {
  double out_cos = 0.0;
  double stream_cos = 0.0;
};
std::vector<DriftBound> drift_bounds(double rho, const std::vector<double>& norms,
                                     double spacing = kDriftRoundingSpacing);

// Δ of a batch (docs/drift.md, "Into the next layer"): 2^-7 for the bf16 inputs plus 2^-3 / n for
// a decode's own new entry, read back from the FP8 cache and weighing 1/n of an output over n keys,
// n the fewest keys any decode token sees (min(its position + 1, top-k)), capped at 16: a batch
// whose decodes all see 16 keys or more, or that has no decode (`fewest_decode_keys` <= 0), gets
// kDriftRoundingSpacing.
double drift_rounding_spacing(int64_t fewest_decode_keys);

}  // namespace mla
