// lib/checks/layer_stack: the drift check's synthetic layers (determinism, the statistics the
// construction promises, the update's size, the new tokens' rows) and the bounds of docs/drift.md,
// against values worked out by hand from the formulas there.
#include "lib/checks/layer_stack.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/common/bf16.h"
#include "kernels/common/mla_dims.h"
#include "lib/batch/batch.h"
#include "lib/batch/rng.h"

namespace mla {
namespace {

Scenario small_scenario() {
  Scenario s;
  s.name = "stack";
  s.seed = 11;
  s.model.heads = 4;
  s.model.topk = 64;
  s.model.block_size = 16;
  s.batch.seq_lens = {24, 40, 30};
  s.batch.query_lens = {1, 1, 12};
  s.checks = {CheckKind::kDrift};
  return s;
}

double rms_of(const std::vector<uint16_t>& bf16) {
  double sq = 0.0;
  for (uint16_t v : bf16) sq += static_cast<double>(bf16_to_f32(v)) * bf16_to_f32(v);
  return std::sqrt(sq / static_cast<double>(bf16.size()));
}

TEST(LayerStack, LayersAreDeterministicAndDistinct) {
  const Scenario s = small_scenario();
  const Batch b = materialise(s);
  const StackLayer a = make_stack_layer(s, b, 3), again = make_stack_layer(s, b, 3), other = make_stack_layer(s, b, 4);
  EXPECT_EQ(a.seed, again.seed);
  EXPECT_EQ(a.p_q, again.p_q);
  EXPECT_EQ(a.p_c, again.p_c);
  EXPECT_EQ(a.p_r, again.p_r);
  EXPECT_EQ(a.w_o, again.w_o);
  EXPECT_EQ(a.data.w_uk, again.data.w_uk);
  EXPECT_EQ(a.data.topk_pos, again.data.topk_pos);
  EXPECT_EQ(a.data.context_cache, again.data.context_cache);
  // Each layer its own seed, weights, cache contents and picks.
  EXPECT_NE(a.seed, other.seed);
  EXPECT_NE(a.p_q, other.p_q);
  EXPECT_NE(a.data.w_uk, other.data.w_uk);
  EXPECT_NE(a.data.context_cache, other.data.context_cache);
  EXPECT_NE(a.data.topk_pos, other.data.topk_pos);
  std::set<uint64_t> seeds;
  for (int32_t l = 1; l <= 61; ++l) seeds.insert(drift_layer_seed(s.seed, l));
  EXPECT_EQ(seeds.size(), 61u);
  EXPECT_THROW(drift_layer_seed(s.seed, 0), std::invalid_argument);
  // Shapes.
  EXPECT_EQ(a.p_q.size(), size_t{4} * 192 * kDriftWidth);
  EXPECT_EQ(a.p_c.size(), size_t{512} * kDriftWidth);
  EXPECT_EQ(a.p_r.size(), size_t{64} * kDriftWidth);
  EXPECT_EQ(a.w_o.size(), size_t{kDriftWidth} * 4 * 128);
  EXPECT_EQ(drift_initial_stream(s.seed, 5), drift_initial_stream(s.seed, 5));
  EXPECT_NE(drift_initial_stream(s.seed, 5), drift_initial_stream(s.seed + 1, 5));
}

TEST(LayerStack, InputsHaveTheAttentionChecksSpread) {
  Scenario s = small_scenario();
  s.model.heads = 8;
  const Batch b = materialise(s);
  const StackLayer layer = make_stack_layer(s, b, 1);
  // A stream far from unit scale: the inputs are normalised per token, so the scale drops out.
  std::vector<double> x = drift_initial_stream(s.seed, 64);
  for (double& v : x) v *= 7.0;
  const LayerInputs in = layer_inputs(layer, 8, x);
  ASSERT_EQ(in.q_nope.size(), size_t{64} * 8 * 128);
  ASSERT_EQ(in.q_pe.size(), size_t{64} * 8 * 64);
  ASSERT_EQ(in.kv_c.size(), size_t{64} * 512);
  ASSERT_EQ(in.k_pe.size(), size_t{64} * 64);
  // Queries: uniform in [-1, 1] has rms 1/sqrt(3); latents 0.1, RoPE keys 0.5 (docs/drift.md).
  EXPECT_NEAR(rms_of(in.q_nope), 1.0 / std::sqrt(3.0), 0.03);
  EXPECT_NEAR(rms_of(in.q_pe), 1.0 / std::sqrt(3.0), 0.03);
  EXPECT_NEAR(rms_of(in.kv_c), 0.1, 0.006);
  EXPECT_NEAR(rms_of(in.k_pe), 0.5, 0.05);
}

TEST(LayerStack, UpdateHasTheStatedSizeAndInputsReplaceTheNewRows) {
  const Scenario s = small_scenario();
  const Batch b = materialise(s);
  const StackLayer layer = make_stack_layer(s, b, 2);
  std::vector<double> x = drift_initial_stream(s.seed, b.num_tokens);
  std::vector<double> o(static_cast<size_t>(b.num_tokens) * 4 * 128);
  Rng rng(5);
  for (double& v : o) v = rng.normal(0.0, 0.02);
  const std::vector<double> update = layer_update(layer, 4, o);
  ASSERT_EQ(update.size(), x.size());
  const double gamma = update_scale(x, update);
  std::vector<double> scaled(update.size());
  for (size_t i = 0; i < update.size(); ++i) scaled[i] = gamma * update[i];
  EXPECT_NEAR(frobenius_norm(scaled), kDriftUpdateRatio * frobenius_norm(x), 1e-12 * frobenius_norm(x));
  const std::vector<double> before = x;
  add_update(x, update, gamma);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], before[i] + gamma * update[i]);
  EXPECT_EQ(update_scale(x, std::vector<double>(x.size(), 0.0)), 0.0);

  // The new tokens' rows (and only those) take the inputs' latents; queries likewise.
  const LayerInputs in = layer_inputs(layer, 4, x);
  const CacheData latents = with_new_latents(layer.latents, b, in);
  std::vector<bool> is_new(layer.latents.kv_c.size() / kDc, false);
  for (int64_t t = 0; t < b.num_tokens; ++t) {
    const int64_t row = cached_row(b, b.req_id_per_token[static_cast<size_t>(t)], b.token_pos[static_cast<size_t>(t)]);
    is_new[static_cast<size_t>(row)] = true;
    for (int i = 0; i < kDc; ++i)
      ASSERT_EQ(latents.kv_c[static_cast<size_t>(row * kDc + i)], in.kv_c[static_cast<size_t>(t * kDc + i)]);
    for (int i = 0; i < kDr; ++i)
      ASSERT_EQ(latents.k_pe[static_cast<size_t>(row * kDr + i)], in.k_pe[static_cast<size_t>(t * kDr + i)]);
  }
  for (size_t row = 0; row < is_new.size(); ++row) {
    if (is_new[row]) continue;
    for (int i = 0; i < kDc; ++i) ASSERT_EQ(latents.kv_c[row * kDc + i], layer.latents.kv_c[row * kDc + i]);
  }
  const AttentionData d = with_inputs(layer.data, in);
  EXPECT_EQ(d.q_nope, in.q_nope);
  EXPECT_EQ(d.new_kv_c, in.kv_c);
  EXPECT_EQ(d.w_uk, layer.data.w_uk);
  EXPECT_EQ(d.topk_pos, layer.data.topk_pos);
}

TEST(DriftBounds, OwnErrorFromTheStepTolerances) {
  const AttentionTolerances tol;  // forward cos 2e-5, equivalence_bf16 cos 2e-3
  EXPECT_NEAR(drift_own_error(tol, false), std::sqrt(4e-5), 1e-15);
  EXPECT_NEAR(drift_own_error(tol, true), std::sqrt(4e-5) + std::sqrt(4e-3), 1e-15);
}

TEST(DriftBounds, TwoLayersWorkedByHand) {
  // rho 0.01, constant stream norm 2 (u = 0.1, G = 1.5, Δ = 1/64, m = 2):
  // layer 1: eps 0, eta² 0: out rho²/2 = 5e-5; E² = (0.1 * 2 * 0.01)² = 4e-6; stream 4 * 4e-6 / (2 * 4) = 2e-6.
  // layer 2: eps = 2e-3 / 2 = 1e-3; eta² = 1e-6 + 1e-3/64 = 1.6625e-5;
  //   out (1e-4 + 4 * 2.25 * 1.6625e-5) / 2 = 1.248125e-4;
  //   omega² = 1e-4 + 2.25 * 1.6625e-5 = 1.3740625e-4; E² = 4e-6 + 0.04 * 1.3740625e-4 = 9.49625e-6;
  //   stream 4 * 9.49625e-6 / 8 = 4.748125e-6.
  const std::vector<DriftBound> b = drift_bounds(0.01, {2.0, 2.0, 2.0});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_NEAR(b[0].out_cos, 5e-5, 1e-18);
  EXPECT_NEAR(b[0].stream_cos, 2e-6, 1e-18);
  EXPECT_NEAR(b[1].out_cos, 1.248125e-4, 1e-15);
  EXPECT_NEAR(b[1].stream_cos, 4.748125e-6, 1e-17);
}

TEST(DriftBounds, RoundingSpacingCountsADecodesOwnFp8EntryOverItsKeys) {
  // docs/drift.md: Δ = 2^-7 + 2^-3 / min(n, 16), n the fewest keys a decode token sees.
  EXPECT_DOUBLE_EQ(drift_rounding_spacing(0), 1.0 / 64);    // no decode: 2^-7 + 2^-7
  EXPECT_DOUBLE_EQ(drift_rounding_spacing(16), 1.0 / 64);
  EXPECT_DOUBLE_EQ(drift_rounding_spacing(512), 1.0 / 64);  // capped at 16
  EXPECT_DOUBLE_EQ(drift_rounding_spacing(4), 1.0 / 128 + 1.0 / 32);
  EXPECT_DOUBLE_EQ(drift_rounding_spacing(1), 1.0 / 128 + 1.0 / 8);  // a one-token request's decode
  // A larger spacing loosens only what the stream carries forward: layer 1 is the step's own error.
  const std::vector<double> norms{2.0, 2.0, 2.0};
  const std::vector<DriftBound> wide = drift_bounds(0.01, norms, drift_rounding_spacing(1));
  const std::vector<DriftBound> narrow = drift_bounds(0.01, norms);
  EXPECT_DOUBLE_EQ(wide[0].out_cos, narrow[0].out_cos);
  EXPECT_GT(wide[1].out_cos, narrow[1].out_cos);
}

TEST(DriftBounds, TheTableOfDocsDrift) {
  // docs/drift.md's table: default tolerances, n_l² = (1 + u²)^l.
  const AttentionTolerances tol;
  std::vector<double> norms;
  for (int l = 0; l <= 61; ++l) norms.push_back(std::pow(1.0 + kDriftUpdateRatio * kDriftUpdateRatio, l / 2.0));
  const std::vector<DriftBound> dense = drift_bounds(drift_own_error(tol, false), norms);
  const std::vector<DriftBound> sparse = drift_bounds(drift_own_error(tol, true), norms);
  struct Row {
    int layer;
    double dense_out, dense_stream, sparse_out, sparse_stream;
  };
  const Row rows[] = {{1, 2.00e-5, 7.92e-7, 2.42e-3, 9.58e-5},  {8, 2.19e-4, 1.46e-5, 5.47e-3, 8.70e-4},
                      {16, 4.18e-4, 4.34e-5, 8.49e-3, 1.91e-3}, {61, 2.27e-3, 5.21e-4, 3.21e-2, 1.12e-2}};
  for (const Row& r : rows) {
    SCOPED_TRACE(r.layer);
    const size_t i = static_cast<size_t>(r.layer - 1);
    EXPECT_NEAR(dense[i].out_cos, r.dense_out, 0.005 * r.dense_out);
    EXPECT_NEAR(dense[i].stream_cos, r.dense_stream, 0.005 * r.dense_stream);
    EXPECT_NEAR(sparse[i].out_cos, r.sparse_out, 0.005 * r.sparse_out);
    EXPECT_NEAR(sparse[i].stream_cos, r.sparse_stream, 0.005 * r.sparse_stream);
  }
  // Layer 1 sees no propagated error: its output bound is the step's tolerance itself.
  EXPECT_NEAR(dense[0].out_cos, tol.forward.cos, 1e-18);
  for (size_t i = 1; i < dense.size(); ++i) {
    EXPECT_GT(dense[i].out_cos, dense[i - 1].out_cos);
    EXPECT_GT(dense[i].stream_cos, dense[i - 1].stream_cos);
  }
}

}  // namespace
}  // namespace mla
