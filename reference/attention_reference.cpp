// The independent attention reference (docs/semantics.md §4, 5), in double. See attention_reference.h for
// the contracts. Heads are handled as strided row-major views of the [rows, H, width] containers.
#include "reference/attention_reference.h"

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace mla::ref {
namespace {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using View = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

size_t sz(int64_t v) { return static_cast<size_t>(v); }

// Rows [rows] of width `width` taken every `stride` doubles starting at `base`.
ConstView view(const double* base, int64_t rows, int64_t width, int64_t stride) {
  return ConstView(base, rows, width, Eigen::OuterStride<>(stride));
}
View view(double* base, int64_t rows, int64_t width, int64_t stride) {
  return View(base, rows, width, Eigen::OuterStride<>(stride));
}

// Exact doubles of all 2^16 bf16 patterns (bf16_value is exact; the table only saves time).
const std::vector<double>& bf16_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(1u << 16);
    for (uint32_t b = 0; b < (1u << 16); ++b) t[b] = bf16_value(static_cast<uint16_t>(b));
    return t;
  }();
  return table;
}

// Softmax of s[0, n) in place (s becomes p), returns the lse. n == 0: -inf. Any NaN score or an
// infinite maximum: p and lse are NaN (a stray non-finite value must show).
double softmax_in_place(double* s, int64_t n) {
  if (n == 0) return kNegInf;
  double m = kNegInf;
  bool bad = false;
  for (int64_t j = 0; j < n; ++j) {
    if (std::isnan(s[j])) bad = true;
    else m = std::max(m, s[j]);
  }
  if (bad || !std::isfinite(m)) {
    std::fill(s, s + n, kNaN);
    return kNaN;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - m);
    sum += s[j];
  }
  for (int64_t j = 0; j < n; ++j) s[j] /= sum;  // sum >= 1 (the maximum contributes exp(0))
  return m + std::log(sum);
}

void validate_geometry(const CacheGeometry& geo, size_t cache_size, const std::string& who) {
  require(geo.num_blocks >= 0, who + ": num_blocks < 0");
  require(geo.block_size >= 1, who + ": block_size must be >= 1");
  require(geo.page_stride_bytes >= static_cast<int64_t>(geo.block_size) * kEntryBytes,
          who + ": page_stride_bytes < block_size * 656");
  require(cache_size >= sz(geo.bytes()), who + ": cache smaller than num_blocks * page_stride_bytes");
}

// Whole number of rows of `width` in `size` elements.
int64_t rows_of(size_t size, int64_t width, const std::string& what) {
  require(width > 0 && size % sz(width) == 0,
          what + ": size " + std::to_string(size) + " is not a multiple of " + std::to_string(width));
  return static_cast<int64_t>(size / sz(width));
}

void validate_cu(const std::vector<int32_t>& cu, int64_t total, const std::string& what) {
  require(!cu.empty(), what + ": must have R + 1 >= 1 entries");
  require(cu.front() == 0, what + "[0] must be 0");
  require(std::is_sorted(cu.begin(), cu.end()), what + " must be non-decreasing");
  require(cu.back() == total, what + "[R] must equal the number of rows (" + std::to_string(total) + ")");
}

// LSE as the merges read it: NaN and +inf mean "no key" (-inf).
double merge_lse_value(double lse) { return (std::isnan(lse) || lse == std::numeric_limits<double>::infinity()) ? kNegInf : lse; }

}  // namespace

// --- Helpers ---------------------------------------------------------------------------------

std::vector<double> bf16_to_double(const std::vector<uint16_t>& bits) {
  const auto& table = bf16_table();
  std::vector<double> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = table[bits[i]];
  return out;
}

std::vector<double> dequant_slots(const std::vector<uint8_t>& cache, const CacheGeometry& geo,
                                  const std::vector<int64_t>& slots, ScaleRounding rounding) {
  validate_geometry(geo, cache.size(), "dequant_slots");
  const int64_t capacity = geo.num_blocks * geo.block_size;
  const auto& table = bf16_table();
  std::vector<double> out(slots.size() * sz(kLatent));
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t s = slots[i];
    require(s >= 0 && s < capacity, "dequant_slots: slot " + std::to_string(s) + " outside [0, " +
                                        std::to_string(capacity) + ")");
    const int64_t at = (s / geo.block_size) * geo.page_stride_bytes + (s % geo.block_size) * kEntryBytes;
    const auto row = dequant_entry(&cache[sz(at)], rounding);
    for (int e = 0; e < kLatent; ++e) out[i * kLatent + sz(e)] = table[row[sz(e)]];
  }
  return out;
}

int32_t heads_of_weights(const std::vector<uint16_t>& w, const char* who) {
  const int64_t heads = rows_of(w.size(), kWeightPerHead, std::string(who) + ": weights [H, 128, 512]");
  require(heads >= 1, std::string(who) + ": weights hold no head");
  require(heads <= std::numeric_limits<int32_t>::max(), std::string(who) + ": too many heads");
  return static_cast<int32_t>(heads);
}

// --- Sparse MQA --------------------------------------------------------------------------------

std::vector<double> absorb_q(const std::vector<uint16_t>& q_nope, const std::vector<uint16_t>& q_pe,
                             const std::vector<uint16_t>& w_uk) {
  const int32_t H = heads_of_weights(w_uk, "absorb_q");
  const int64_t T = rows_of(q_nope.size(), static_cast<int64_t>(H) * kHeadNope, "absorb_q: q_nope [T, H, 128]");
  require(q_pe.size() == sz(T * H * kRope), "absorb_q: q_pe must be [T, H, 64] with T, H of q_nope / w_uk");

  const std::vector<double> qn = bf16_to_double(q_nope);
  const std::vector<double> qp = bf16_to_double(q_pe);
  const std::vector<double> w = bf16_to_double(w_uk);
  std::vector<double> q_lat(sz(T * H * kLatent));
  for (int32_t h = 0; h < H; ++h) {
    const auto w_h = view(&w[sz(h * kWeightPerHead)], kHeadNope, kNope, kNope);  // [128, 512]
    const auto qn_h = view(qn.data() + static_cast<int64_t>(h) * kHeadNope, T, kHeadNope,
                           static_cast<int64_t>(H) * kHeadNope);  // [T, 128]
    auto lat_h = view(q_lat.data() + static_cast<int64_t>(h) * kLatent, T, kLatent,
                      static_cast<int64_t>(H) * kLatent);  // [T, 576]
    // Row t: (W_UK[h]^T q_nope[t,h])^T = q_nope[t,h]^T W_UK[h].
    lat_h.leftCols(kNope).noalias() = qn_h * w_h;
    lat_h.rightCols(kRope) = view(qp.data() + static_cast<int64_t>(h) * kRope, T, kRope,
                                  static_cast<int64_t>(H) * kRope);
  }
  return q_lat;
}

AttentionResult sparse_mqa(const std::vector<double>& q_lat, int32_t num_heads, const std::vector<int32_t>& indices,
                           int32_t topk, const std::vector<uint8_t>& cache, const CacheGeometry& geo, double scale,
                           ScaleRounding rounding) {
  require(num_heads >= 1, "sparse_mqa: num_heads must be >= 1");
  require(topk >= 0, "sparse_mqa: topk < 0");
  validate_geometry(geo, cache.size(), "sparse_mqa");
  const int64_t H = num_heads;
  const int64_t T = rows_of(q_lat.size(), H * kLatent, "sparse_mqa: q_lat [T, H, 576]");
  require(indices.size() == sz(T * topk), "sparse_mqa: indices must be [T, topk] with T the rows of q_lat");
  const int64_t capacity = geo.num_blocks * geo.block_size;

  AttentionResult r;
  r.out.assign(sz(T * H * kNope), 0.0);
  r.lse.assign(sz(T * H), kNegInf);
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t) {
    slots.clear();
    for (int32_t j = 0; j < topk; ++j) {
      const int64_t s = indices[sz(t * topk + j)];
      if (s >= 0 && s < capacity) slots.push_back(s);  // duplicates kept: each occurrence counts
    }
    if (slots.empty()) continue;  // out 0, lse -inf
    const int64_t n = static_cast<int64_t>(slots.size());
    const std::vector<double> keys_data = dequant_slots(cache, geo, slots, rounding);
    const auto keys = view(keys_data.data(), n, kLatent, kLatent);              // [n, 576]
    const auto q_t = view(&q_lat[sz(t * H * kLatent)], H, kLatent, kLatent);     // [H, 576]
    Eigen::MatrixXd p = scale * (keys * q_t.transpose());                        // [n, H], column per head
    for (int64_t h = 0; h < H; ++h) r.lse[sz(t * H + h)] = softmax_in_place(p.col(h).data(), n);
    auto out_t = view(&r.out[sz(t * H * kNope)], H, kNope, kNope);              // [H, 512]
    out_t.noalias() = p.transpose() * keys.leftCols(kNope);
  }
  return r;
}

std::vector<double> project_out(const std::vector<double>& out_lat, const std::vector<uint16_t>& w_uv) {
  const int32_t H = heads_of_weights(w_uv, "project_out");
  const int64_t T = rows_of(out_lat.size(), static_cast<int64_t>(H) * kNope, "project_out: out_lat [T, H, 512]");
  const std::vector<double> w = bf16_to_double(w_uv);
  std::vector<double> out(sz(T * H * kHeadValue));
  for (int32_t h = 0; h < H; ++h) {
    const auto w_h = view(&w[sz(h * kWeightPerHead)], kHeadValue, kNope, kNope);  // [128, 512]
    const auto lat_h = view(out_lat.data() + static_cast<int64_t>(h) * kNope, T, kNope,
                            static_cast<int64_t>(H) * kNope);  // [T, 512]
    auto out_h = view(out.data() + static_cast<int64_t>(h) * kHeadValue, T, kHeadValue,
                      static_cast<int64_t>(H) * kHeadValue);  // [T, 128]
    out_h.noalias() = lat_h * w_h.transpose();
  }
  return out;
}

// --- Dense MHA ---------------------------------------------------------------------------------

UpProjected up_project(const std::vector<double>& kv_c, const std::vector<double>& k_pe,
                       const std::vector<uint16_t>& w_uk, const std::vector<uint16_t>& w_uv) {
  const int32_t H = heads_of_weights(w_uk, "up_project");
  require(w_uv.size() == w_uk.size(), "up_project: w_uv must have the shape of w_uk [H, 128, 512]");
  const int64_t N = rows_of(kv_c.size(), kNope, "up_project: kv_c [N, 512]");
  require(k_pe.size() == sz(N * kRope), "up_project: k_pe must be [N, 64] with N the rows of kv_c");
  const std::vector<double> wk = bf16_to_double(w_uk);
  const std::vector<double> wv = bf16_to_double(w_uv);
  const auto kv = view(kv_c.data(), N, kNope, kNope);
  const auto pe = view(k_pe.data(), N, kRope, kRope);

  UpProjected r;
  r.k.resize(sz(N * H * kHeadQk));
  r.v.resize(sz(N * H * kHeadValue));
  for (int32_t h = 0; h < H; ++h) {
    const auto wk_h = view(&wk[sz(h * kWeightPerHead)], kHeadNope, kNope, kNope);
    const auto wv_h = view(&wv[sz(h * kWeightPerHead)], kHeadValue, kNope, kNope);
    auto k_h = view(r.k.data() + static_cast<int64_t>(h) * kHeadQk, N, kHeadQk, static_cast<int64_t>(H) * kHeadQk);
    auto v_h = view(r.v.data() + static_cast<int64_t>(h) * kHeadValue, N, kHeadValue,
                    static_cast<int64_t>(H) * kHeadValue);
    k_h.leftCols(kHeadNope).noalias() = kv * wk_h.transpose();
    k_h.rightCols(kRope) = pe;
    v_h.noalias() = kv * wv_h.transpose();
  }
  return r;
}

AttentionResult dense_mha(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                          int32_t num_heads, const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k,
                          bool causal, double scale) {
  require(num_heads >= 1, "dense_mha: num_heads must be >= 1");
  const int64_t H = num_heads;
  const int64_t Tq = rows_of(q.size(), H * kHeadQk, "dense_mha: q [Tq, H, 192]");
  const int64_t Tk = rows_of(k.size(), H * kHeadQk, "dense_mha: k [Tk, H, 192]");
  require(v.size() == sz(Tk * H * kHeadValue), "dense_mha: v must be [Tk, H, 128] with Tk the rows of k");
  require(cu_q.size() == cu_k.size(), "dense_mha: cu_seqlens_q and cu_seqlens_k must both have R + 1 entries");
  validate_cu(cu_q, Tq, "dense_mha: cu_seqlens_q");
  validate_cu(cu_k, Tk, "dense_mha: cu_seqlens_k");

  AttentionResult r;
  r.out.assign(sz(Tq * H * kHeadValue), 0.0);
  r.lse.assign(sz(Tq * H), kNegInf);
  for (size_t req = 0; req + 1 < cu_q.size(); ++req) {
    const int64_t q0 = cu_q[req], nq = cu_q[req + 1] - q0;
    const int64_t k0 = cu_k[req], nk = cu_k[req + 1] - k0;
    if (nq == 0) continue;
    for (int64_t h = 0; h < H; ++h) {
      const auto q_h = view(&q[sz((q0 * H + h) * kHeadQk)], nq, kHeadQk, H * kHeadQk);
      auto out_h = view(&r.out[sz((q0 * H + h) * kHeadValue)], nq, kHeadValue, H * kHeadValue);
      if (nk == 0) continue;  // nothing visible: 0, -inf
      const auto k_h = view(&k[sz((k0 * H + h) * kHeadQk)], nk, kHeadQk, H * kHeadQk);
      const auto v_h = view(&v[sz((k0 * H + h) * kHeadValue)], nk, kHeadValue, H * kHeadValue);
      RowMat p = scale * (q_h * k_h.transpose());  // [nq, nk]
      for (int64_t i = 0; i < nq; ++i) {
        // Bottom-right causal: key j visible iff j <= i + (nk - nq).
        const int64_t visible = causal ? std::clamp<int64_t>(i + (nk - nq) + 1, 0, nk) : nk;
        double* row = p.row(i).data();
        r.lse[sz((q0 + i) * H + h)] = softmax_in_place(row, visible);
        std::fill(row + visible, row + nk, 0.0);  // masked keys carry no weight
      }
      out_h.noalias() = p * v_h;
    }
  }
  return r;
}

// --- Merges ------------------------------------------------------------------------------------

AttentionResult merge_lse(const std::vector<double>& out_a, const std::vector<double>& lse_a,
                          const std::vector<double>& out_b, const std::vector<double>& lse_b, int32_t width) {
  require(width >= 1, "merge_lse: width must be >= 1");
  const size_t rows = lse_a.size();
  require(lse_b.size() == rows, "merge_lse: lse_a and lse_b differ in rows");
  require(out_a.size() == rows * sz(width) && out_b.size() == rows * sz(width),
          "merge_lse: out_a / out_b must be [rows, width] with rows = lse size");
  AttentionResult r;
  r.out.resize(rows * sz(width));
  r.lse.resize(rows);
  for (size_t i = 0; i < rows; ++i) {
    const double a = merge_lse_value(lse_a[i]);
    const double b = merge_lse_value(lse_b[i]);
    const Eigen::Map<const Eigen::VectorXd> oa(&out_a[i * sz(width)], width);
    const Eigen::Map<const Eigen::VectorXd> ob(&out_b[i * sz(width)], width);
    Eigen::Map<Eigen::VectorXd> o(&r.out[i * sz(width)], width);
    if (a == kNegInf && b == kNegInf) {
      o = oa;
      r.lse[i] = kNegInf;
      continue;
    }
    if (b == kNegInf) {  // only a contributes (weight 1)
      o = oa;
      r.lse[i] = a;
      continue;
    }
    if (a == kNegInf) {
      o = ob;
      r.lse[i] = b;
      continue;
    }
    const double m = std::max(a, b);
    const double wa = std::exp(a - m), wb = std::exp(b - m);
    o = (wa * oa + wb * ob) / (wa + wb);
    r.lse[i] = m + std::log(wa + wb);
  }
  return r;
}

AttentionResult merge_many(const std::vector<AttentionResult>& parts, int32_t width) {
  require(width >= 1, "merge_many: width must be >= 1");
  require(!parts.empty(), "merge_many: needs at least one part");
  const size_t rows = parts.front().lse.size();
  for (const auto& p : parts)
    require(p.lse.size() == rows && p.out.size() == rows * sz(width),
            "merge_many: every part must be out [rows, width], lse [rows] with the same rows");
  AttentionResult r;
  r.out.assign(rows * sz(width), 0.0);
  r.lse.assign(rows, kNegInf);
  for (size_t i = 0; i < rows; ++i) {
    double m = kNegInf;
    for (const auto& p : parts) m = std::max(m, merge_lse_value(p.lse[i]));
    if (m == kNegInf) continue;  // all parts empty: 0, -inf
    double sum = 0.0;
    for (const auto& p : parts) {
      const double l = merge_lse_value(p.lse[i]);
      if (l != kNegInf) sum += std::exp(l - m);
    }
    const double L = m + std::log(sum);
    Eigen::Map<Eigen::VectorXd> o(&r.out[i * sz(width)], width);
    for (const auto& p : parts) {
      const double l = merge_lse_value(p.lse[i]);
      if (l == kNegInf) continue;
      o += std::exp(l - L) * Eigen::Map<const Eigen::VectorXd>(&p.out[i * sz(width)], width);
    }
    r.lse[i] = L;
  }
  return r;
}

// --- DCP ---------------------------------------------------------------------------------------

int32_t dcp_owner(int64_t pos, int32_t world, int32_t interleave) {
  require(world >= 1 && interleave >= 1, "dcp_owner: world and interleave must be >= 1");
  require(pos >= 0, "dcp_owner: position < 0");
  return static_cast<int32_t>((pos / interleave) % world);
}

int64_t dcp_local_position(int64_t pos, int32_t world, int32_t interleave) {
  require(world >= 1 && interleave >= 1, "dcp_local_position: world and interleave must be >= 1");
  require(pos >= 0, "dcp_local_position: position < 0");
  return (pos / (static_cast<int64_t>(world) * interleave)) * interleave + pos % interleave;
}

std::vector<int32_t> dcp_owned_positions(const std::vector<int32_t>& positions, int32_t world, int32_t rank,
                                         int32_t interleave) {
  require(world >= 1 && interleave >= 1, "dcp_owned_positions: world and interleave must be >= 1");
  require(rank >= 0 && rank < world, "dcp_owned_positions: rank outside [0, world)");
  std::vector<int32_t> out(positions.size(), -1);
  for (size_t i = 0; i < positions.size(); ++i)
    if (positions[i] >= 0 && dcp_owner(positions[i], world, interleave) == rank) out[i] = positions[i];
  return out;
}

DcpResult sparse_mqa_dcp(const std::vector<double>& q_lat, int32_t num_heads, const std::vector<int32_t>& req_id,
                         const std::vector<int32_t>& positions, int32_t topk, const std::vector<DcpRankCache>& ranks,
                         int32_t interleave, double scale) {
  require(!ranks.empty(), "sparse_mqa_dcp: needs at least one rank");
  require(interleave >= 1, "sparse_mqa_dcp: interleave must be >= 1");
  const auto world = static_cast<int32_t>(ranks.size());
  DcpResult r;
  for (int32_t rho = 0; rho < world; ++rho) {
    const DcpRankCache& rank = ranks[sz(rho)];
    require(rank.cache != nullptr, "sparse_mqa_dcp: rank " + std::to_string(rho) + " has no cache");
    ConvertInputs ci;
    ci.req_id = req_id;
    ci.indices = positions;
    ci.topk = topk;
    ci.block_table = rank.block_table;
    ci.block_size = rank.geometry.block_size;
    ci.dcp_world_size = world;
    ci.dcp_rank = rho;
    ci.dcp_interleave = interleave;
    const ConvertOutputs slots = convert(ci);  // throws on shape mismatches / bad DCP parameters
    r.per_rank.push_back(sparse_mqa(q_lat, num_heads, slots.out, topk, *rank.cache, rank.geometry, scale));
  }
  r.merged = merge_many(r.per_rank, kNope);
  return r;
}

}  // namespace mla::ref
