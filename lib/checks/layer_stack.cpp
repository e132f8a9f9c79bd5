#include "lib/checks/layer_stack.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/common/bf16.h"
#include "kernels/common/mla_dims.h"
#include "lib/batch/rng.h"

namespace mla {

namespace {

// The stack's stream of the scenario's seed; fork(0) draws x_0, fork(l) layer l's seed. A
// layer's projections come from the same stream number of the layer's own seed.
constexpr uint64_t kStreamDrift = 41;
constexpr int32_t kQkDims = kDn + kDr;  // 192 query values per head

std::vector<double> normal_matrix(Rng& rng, size_t count, double sigma) {
  std::vector<double> m(count);
  for (auto& v : m) v = rng.normal(0.0, sigma);
  return m;
}

// y[r] = sum_j m[r * cols + j] x[j] for r < rows.
void mat_vec(const std::vector<double>& m, int64_t rows, int64_t cols, const double* x, double* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &m[static_cast<size_t>(r * cols)];
    double acc = 0.0;
    for (int64_t j = 0; j < cols; ++j) acc += row[j] * x[j];
    y[r] = acc;
  }
}

uint16_t to_bf16(double v) { return f32_to_bf16_rne(static_cast<float>(v)); }

}  // namespace

uint64_t drift_layer_seed(uint64_t seed, int32_t layer) {
  if (layer < 1) throw std::invalid_argument("drift_layer_seed: layers count from 1");
  return Rng(seed).fork(kStreamDrift).fork(static_cast<uint64_t>(layer)).next_u64();
}

std::vector<double> drift_initial_stream(uint64_t seed, int64_t tokens) {
  Rng rng = Rng(seed).fork(kStreamDrift).fork(0);
  return normal_matrix(rng, static_cast<size_t>(tokens) * kDriftWidth, 1.0);
}

StackLayer make_stack_layer(const Scenario& s, const Batch& b, int32_t layer) {
  StackLayer l;
  l.seed = drift_layer_seed(s.seed, layer);
  Scenario own = s;
  own.seed = l.seed;
  l.latents = make_cache_data(own, b, /*large_tiles=*/false);
  l.data = make_attention_data(own, b, l.latents);
  const size_t H = static_cast<size_t>(s.model.heads), D = kDriftWidth;
  Rng rng = Rng(l.seed).fork(kStreamDrift);
  l.p_q = normal_matrix(rng, H * kQkDims * D, std::sqrt(1.0 / (3.0 * D)));
  l.p_c = normal_matrix(rng, size_t{kDc} * D, std::sqrt(0.01 / D));
  l.p_r = normal_matrix(rng, size_t{kDr} * D, std::sqrt(0.25 / D));
  l.w_o = normal_matrix(rng, D * H * kDv, std::sqrt(1.0 / (static_cast<double>(kDv) * H)));
  return l;
}

LayerInputs layer_inputs(const StackLayer& layer, int32_t heads, const std::vector<double>& x) {
  const int64_t D = kDriftWidth, H = heads;
  if (x.size() % static_cast<size_t>(D) != 0) throw std::invalid_argument("layer_inputs: x is not [T, D]");
  const int64_t T = static_cast<int64_t>(x.size()) / D;
  LayerInputs in;
  in.q_nope.resize(static_cast<size_t>(T * H * kDn));
  in.q_pe.resize(static_cast<size_t>(T * H * kDr));
  in.kv_c.resize(static_cast<size_t>(T * kDc));
  in.k_pe.resize(static_cast<size_t>(T * kDr));
  std::vector<double> n(static_cast<size_t>(D)), q(static_cast<size_t>(H * kQkDims)), c(kDc), r(kDr);
  for (int64_t t = 0; t < T; ++t) {
    const double* row = &x[static_cast<size_t>(t * D)];
    double sq = 0.0;
    for (int64_t j = 0; j < D; ++j) sq += row[j] * row[j];
    const double rms = std::sqrt(sq / static_cast<double>(D));
    for (int64_t j = 0; j < D; ++j) n[static_cast<size_t>(j)] = rms > 0.0 ? row[j] / rms : 0.0;
    mat_vec(layer.p_q, H * kQkDims, D, n.data(), q.data());
    mat_vec(layer.p_c, kDc, D, n.data(), c.data());
    mat_vec(layer.p_r, kDr, D, n.data(), r.data());
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < kDn; ++i)
        in.q_nope[static_cast<size_t>((t * H + h) * kDn + i)] = to_bf16(q[static_cast<size_t>(h * kQkDims + i)]);
      for (int64_t i = 0; i < kDr; ++i)
        in.q_pe[static_cast<size_t>((t * H + h) * kDr + i)] = to_bf16(q[static_cast<size_t>(h * kQkDims + kDn + i)]);
    }
    for (int64_t i = 0; i < kDc; ++i) in.kv_c[static_cast<size_t>(t * kDc + i)] = to_bf16(c[static_cast<size_t>(i)]);
    for (int64_t i = 0; i < kDr; ++i) in.k_pe[static_cast<size_t>(t * kDr + i)] = to_bf16(r[static_cast<size_t>(i)]);
  }
  return in;
}

AttentionData with_inputs(const AttentionData& data, const LayerInputs& in) {
  AttentionData d = data;
  if (in.q_nope.size() != d.q_nope.size() || in.q_pe.size() != d.q_pe.size() || in.kv_c.size() != d.new_kv_c.size() ||
      in.k_pe.size() != d.new_k_pe.size())
    throw std::invalid_argument("with_inputs: the inputs are not the batch's shape");
  d.q_nope = in.q_nope;
  d.q_pe = in.q_pe;
  d.new_kv_c = in.kv_c;
  d.new_k_pe = in.k_pe;
  return d;
}

CacheData with_new_latents(const CacheData& latents, const Batch& b, const LayerInputs& in) {
  CacheData c;
  c.kv_c = latents.kv_c;
  c.k_pe = latents.k_pe;
  for (int64_t t = 0; t < b.num_tokens; ++t) {
    const int64_t row = cached_row(b, b.req_id_per_token[static_cast<size_t>(t)], b.token_pos[static_cast<size_t>(t)]);
    std::copy_n(&in.kv_c[static_cast<size_t>(t * kDc)], kDc, &c.kv_c[static_cast<size_t>(row * kDc)]);
    std::copy_n(&in.k_pe[static_cast<size_t>(t * kDr)], kDr, &c.k_pe[static_cast<size_t>(row * kDr)]);
  }
  return c;
}

std::vector<double> layer_update(const StackLayer& layer, int32_t heads, const std::vector<double>& o) {
  const int64_t D = kDriftWidth, width = int64_t{heads} * kDv;
  if (o.size() % static_cast<size_t>(width) != 0) throw std::invalid_argument("layer_update: o is not [T, H * 128]");
  const int64_t T = static_cast<int64_t>(o.size()) / width;
  std::vector<double> u(static_cast<size_t>(T * D));
  for (int64_t t = 0; t < T; ++t)
    mat_vec(layer.w_o, D, width, &o[static_cast<size_t>(t * width)], &u[static_cast<size_t>(t * D)]);
  return u;
}

double frobenius_norm(const std::vector<double>& v) {
  double sq = 0.0;
  for (double x : v) sq += x * x;
  return std::sqrt(sq);
}

double update_scale(const std::vector<double>& x, const std::vector<double>& update) {
  const double n = frobenius_norm(update);
  return n > 0.0 && std::isfinite(n) ? kDriftUpdateRatio * frobenius_norm(x) / n : 0.0;
}

void add_update(std::vector<double>& x, const std::vector<double>& update, double gamma) {
  if (x.size() != update.size()) throw std::invalid_argument("add_update: shapes differ");
  for (size_t i = 0; i < x.size(); ++i) x[i] += gamma * update[i];
}

double drift_own_error(const AttentionTolerances& tol, bool sparse) {
  const double dense = std::sqrt(2.0 * tol.forward.cos);
  return sparse ? dense + std::sqrt(2.0 * tol.equivalence_bf16.cos) : dense;
}

double drift_rounding_spacing(int64_t fewest_decode_keys) {
  const int64_t n = fewest_decode_keys <= 0 ? 16 : std::min<int64_t>(fewest_decode_keys, 16);
  return std::ldexp(1.0, -7) + std::ldexp(1.0, -3) / static_cast<double>(n);
}

std::vector<DriftBound> drift_bounds(double rho, const std::vector<double>& norms, double spacing) {
  std::vector<DriftBound> bounds;
  const double u = kDriftUpdateRatio, G = kDriftGain, m = kDriftMargin;
  double e2 = 0.0;  // E_{l-1}^2: the expected squared error norm of the stream
  for (size_t l = 1; l < norms.size(); ++l) {
    const double n_prev = norms[l - 1], n = norms[l];
    const double eps = n_prev > 0.0 ? std::sqrt(e2) / n_prev : 0.0;
    const double eta2 = eps * eps + spacing * eps;
    const double omega2 = rho * rho + G * G * eta2;
    e2 += u * u * n_prev * n_prev * omega2;
    DriftBound b;
    b.out_cos = (rho * rho + m * m * G * G * eta2) / 2.0;
    b.stream_cos = n > 0.0 ? m * m * e2 / (2.0 * n * n) : 0.0;
    bounds.push_back(b);
  }
  return bounds;
}

}  // namespace mla
