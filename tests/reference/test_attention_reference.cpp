// Tests of the attention reference (reference/attention_reference.h, reference/forward_reference.h).
// Expected values are worked by hand in the comments, or come from an identity that holds in exact
// arithmetic between two different computations (docs/semantics.md §4.3: absorbed sparse MQA == up-projected dense
// MHA; LSE merge of a partition == attention over the union; DCP merge == single rank). Nothing is
// taken from the code under test. Test data is bf16 by construction (truncated float bits) and
// decoded in the tests with the CPU's own float conversion.
#include "reference/attention_reference.h"
#include "reference/cache_reference.h"
#include "reference/forward_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace mla::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kEntry = 656;
constexpr int kDc = 512, kDr = 64, kDl = 576, kDn = 128, kDv = 128, kDqk = 192;

// bf16 bits of a float that is exactly a bf16 value (checked).
uint16_t bf16_of(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  EXPECT_EQ(bits & 0xFFFFu, 0u) << f << " is not a bf16 value";
  return static_cast<uint16_t>(bits >> 16);
}
// The value of bf16 bits, through the CPU's float (independent of ref::bf16_value).
double value_of(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// A random bf16 (truncated float bits: a bf16 value by construction).
uint16_t trunc_bf16(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}
std::vector<uint16_t> uniform_bf16(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = trunc_bf16(d(rng));
  return v;
}
std::vector<uint16_t> normal_bf16(size_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = trunc_bf16(d(rng));
  return v;
}
std::vector<double> values_of(const std::vector<uint16_t>& bits) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = value_of(bits[i]);
  return v;
}

// |a - b| <= tol * max(1, max |b|) element-wise; infinities must match exactly, NaN nowhere.
void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 1.0;
  for (double x : b)
    if (std::isfinite(x)) scale = std::max(scale, std::fabs(x));
  size_t bad = 0;
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      ++bad;
      worst_at = i;
      continue;
    }
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) ++bad, worst_at = i;
      continue;
    }
    const double e = std::fabs(a[i] - b[i]);
    if (e > worst) worst = e, worst_at = i;
    if (e > tol * scale) ++bad;
  }
  EXPECT_EQ(bad, 0u) << what << ": worst abs error " << worst << " at " << worst_at << " (" << a[worst_at] << " vs "
                     << b[worst_at] << "), tolerance " << tol * scale;
}

// --- Hand-built cache entries ------------------------------------------------------------------
struct HandEntry {
  std::map<int, uint8_t> codes;  // element -> e4m3 code (others 0)
  std::array<float, 4> scales{1.0f, 1.0f, 1.0f, 1.0f};
  std::map<int, uint16_t> rope;  // rope element -> bf16 bits (others 0)
};
void write_entry(std::vector<uint8_t>& cache, const CacheGeometry& geo, int64_t slot, const HandEntry& e) {
  uint8_t* p = &cache[static_cast<size_t>((slot / geo.block_size) * geo.page_stride_bytes +
                                          (slot % geo.block_size) * kEntry)];
  std::fill(p, p + kEntry, 0);
  for (const auto& [i, c] : e.codes) p[i] = c;
  for (int t = 0; t < 4; ++t) {
    uint32_t bits = 0;
    std::memcpy(&bits, &e.scales[static_cast<size_t>(t)], 4);
    for (int b = 0; b < 4; ++b) p[512 + 4 * t + b] = static_cast<uint8_t>(bits >> (8 * b));
  }
  for (const auto& [i, bits] : e.rope) {
    p[528 + 2 * i] = static_cast<uint8_t>(bits & 0xFF);
    p[528 + 2 * i + 1] = static_cast<uint8_t>(bits >> 8);
  }
}

// Geometry of the hand tests: 2 blocks of 4 slots, pages padded by 32 bytes; unused bytes 0xFF.
CacheGeometry small_geometry() {
  CacheGeometry g;
  g.num_blocks = 2;
  g.block_size = 4;
  g.page_stride_bytes = 4 * kEntry + 32;
  return g;
}

// Two keys. Slot 5 (A): NoPE e0 = 1 (0x38), e1 = 0.5 (0x30), e200 = 2 (0x40) * tile-1 scale 0.5 = 1;
// RoPE r0 = 1. Slot 2 (B): e0 = 2 (0x40), e1 = -1 (0xB8); RoPE 0.
std::vector<uint8_t> two_key_cache(const CacheGeometry& g) {
  std::vector<uint8_t> cache(static_cast<size_t>(g.bytes()), 0xFF);
  HandEntry a;
  a.codes = {{0, 0x38}, {1, 0x30}, {200, 0x40}};
  a.scales = {1.0f, 0.5f, 1.0f, 1.0f};
  a.rope = {{0, 0x3F80}};
  write_entry(cache, g, 5, a);
  HandEntry b;
  b.codes = {{0, 0x40}, {1, 0xB8}};
  write_entry(cache, g, 2, b);
  return cache;
}

// ================================ Helpers =======================================================

TEST(DequantSlots, HandEntryAndRangeCheck) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  const auto rows = dequant_slots(cache, g, {5, 2});
  ASSERT_EQ(rows.size(), 2u * kDl);
  EXPECT_EQ(rows[0], 1.0);
  EXPECT_EQ(rows[1], 0.5);
  EXPECT_EQ(rows[200], 1.0);
  EXPECT_EQ(rows[512], 1.0);
  EXPECT_EQ(rows[kDl + 0], 2.0);
  EXPECT_EQ(rows[kDl + 1], -1.0);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 0.0), static_cast<long>(2 * kDl - 6));
  EXPECT_TRUE(std::isnan(dequant_slots(cache, g, {0})[0]));  // unused slot: 0xFF bytes
  EXPECT_THROW(dequant_slots(cache, g, {8}), std::invalid_argument);
  EXPECT_THROW(dequant_slots(cache, g, {-1}), std::invalid_argument);
}

TEST(Bf16ToDouble, ExactValues) {
  const auto v = bf16_to_double({0x3F80, 0xBFC0, 0x0001, 0x7F80, 0x0000, 0x8000});
  EXPECT_EQ(v[0], 1.0);
  EXPECT_EQ(v[1], -1.5);
  EXPECT_EQ(v[2], std::ldexp(1.0, -133));  // smallest subnormal: 2^-126 * 2^-7
  EXPECT_EQ(v[3], kInf);
  EXPECT_EQ(v[4], 0.0);
  EXPECT_TRUE(std::signbit(v[5]));
}

// ================================ Projections ===================================================

TEST(AbsorbQ, HandComputedTwoHeadsTwoTokens) {
  const int H = 2, T = 2;
  std::vector<uint16_t> w(static_cast<size_t>(H) * kDn * kDc, 0);
  auto W = [&](int h, int d, int c) -> uint16_t& { return w[(static_cast<size_t>(h) * kDn + d) * kDc + c]; };
  W(0, 0, 3) = bf16_of(2.0f);
  W(0, 1, 3) = bf16_of(0.5f);
  W(0, 0, 0) = bf16_of(1.0f);
  W(1, 2, 511) = bf16_of(-1.0f);
  std::vector<uint16_t> qn(static_cast<size_t>(T) * H * kDn, 0), qp(static_cast<size_t>(T) * H * kDr, 0);
  // Token 1 only (token 0 stays zero, so a token-stride error shows).
  qn[(1 * H + 0) * kDn + 0] = bf16_of(1.0f);
  qn[(1 * H + 0) * kDn + 1] = bf16_of(4.0f);
  qn[(1 * H + 1) * kDn + 2] = bf16_of(3.0f);
  qp[(1 * H + 0) * kDr + 0] = bf16_of(1.5f);
  qp[(1 * H + 1) * kDr + 63] = bf16_of(-2.0f);

  const auto lat = absorb_q(qn, qp, w);
  ASSERT_EQ(lat.size(), static_cast<size_t>(T) * H * kDl);
  std::vector<double> expected(lat.size(), 0.0);
  auto E = [&](int t, int h, int c) -> double& { return expected[(static_cast<size_t>(t) * H + h) * kDl + c]; };
  E(1, 0, 0) = 1.0;              // W[0][0][0] * q[0] = 1 * 1
  E(1, 0, 3) = 2.0 * 1 + 0.5 * 4;  // = 4: component c sums over d of W[d][c] q[d] (W^T q)
  E(1, 0, 512) = 1.5;
  E(1, 1, 511) = -1.0 * 3;
  E(1, 1, 575) = -2.0;
  EXPECT_EQ(lat, expected);
}

TEST(AbsorbQ, RejectsMismatchedShapes) {
  std::vector<uint16_t> w(static_cast<size_t>(kDn) * kDc, 0);
  EXPECT_THROW(absorb_q(std::vector<uint16_t>(kDn, 0), std::vector<uint16_t>(kDr + 1, 0), w), std::invalid_argument);
  EXPECT_THROW(absorb_q(std::vector<uint16_t>(kDn + 3, 0), std::vector<uint16_t>(kDr, 0), w), std::invalid_argument);
  EXPECT_THROW(absorb_q(std::vector<uint16_t>(kDn, 0), std::vector<uint16_t>(kDr, 0), std::vector<uint16_t>(100, 0)),
               std::invalid_argument);
}

TEST(ProjectOut, HandComputed) {
  const int H = 2, T = 2;
  std::vector<uint16_t> w(static_cast<size_t>(H) * kDv * kDc, 0);
  w[(1 * kDv + 5) * kDc + 7] = bf16_of(3.0f);  // W_UV[1][5][7]
  w[(1 * kDv + 5) * kDc + 8] = bf16_of(1.0f);
  w[(0 * kDv + 0) * kDc + 7] = bf16_of(-1.0f);  // head 0 reads the same latent component
  std::vector<double> lat(static_cast<size_t>(T) * H * kDc, 0.0);
  lat[(1 * H + 1) * kDc + 7] = 0.5;
  lat[(1 * H + 1) * kDc + 8] = 2.0;
  lat[(0 * H + 0) * kDc + 7] = 0.25;
  const auto out = project_out(lat, w);
  std::vector<double> expected(static_cast<size_t>(T) * H * kDv, 0.0);
  expected[(1 * H + 1) * kDv + 5] = 3.0 * 0.5 + 1.0 * 2.0;  // out[d] = sum_c W[d][c] lat[c]
  expected[(0 * H + 0) * kDv + 0] = -0.25;
  EXPECT_EQ(out, expected);
}

TEST(UpProject, HandComputed) {
  const int H = 2, N = 2;
  std::vector<uint16_t> wk(static_cast<size_t>(H) * kDn * kDc, 0), wv(wk.size(), 0);
  wk[(0 * kDn + 1) * kDc + 2] = bf16_of(2.0f);   // W_UK[0][1][2]
  wv[(1 * kDv + 0) * kDc + 2] = bf16_of(-1.0f);  // W_UV[1][0][2]
  wv[(0 * kDv + 127) * kDc + 511] = bf16_of(0.5f);
  std::vector<double> kv(static_cast<size_t>(N) * kDc, 0.0), pe(static_cast<size_t>(N) * kDr, 0.0);
  kv[1 * kDc + 2] = 3.0;
  kv[0 * kDc + 511] = 4.0;
  pe[1 * kDr + 0] = 7.0;
  pe[0 * kDr + 63] = -0.5;
  const auto r = up_project(kv, pe, wk, wv);
  std::vector<double> k(static_cast<size_t>(N) * H * kDqk, 0.0), v(static_cast<size_t>(N) * H * kDv, 0.0);
  k[(1 * H + 0) * kDqk + 1] = 6.0;  // k_nope[d] = sum_c W_UK[d][c] kv[c]
  for (int h = 0; h < H; ++h) {     // RoPE part shared by all heads
    k[(1 * H + h) * kDqk + 128] = 7.0;
    k[(0 * H + h) * kDqk + 191] = -0.5;
  }
  v[(1 * H + 1) * kDv + 0] = -3.0;
  v[(0 * H + 0) * kDv + 127] = 2.0;
  EXPECT_EQ(r.k, k);
  EXPECT_EQ(r.v, v);
}

// ================================ Sparse MQA ====================================================

// q (1 head) = e0 + 2 e512, scale 0.5: q.A = 1 + 2 * 1 = 3 -> s_A = 1.5; q.B = 2 -> s_B = 1.
TEST(SparseMqa, TwoKeysByHand) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  std::vector<double> q(2 * kDl, 0.0);  // two tokens
  q[0] = 1.0;
  q[512] = 2.0;
  q[kDl + 0] = 1.0;
  // Row 0: -1 padding and a slot past the pool (8 slots) are skipped. Row 1: nothing valid.
  const std::vector<int32_t> idx = {5, -1, 2, 99, -1, 8, -7, -1};
  const auto r = sparse_mqa(q, 1, idx, 4, cache, g, 0.5);
  const double ea = std::exp(1.5), eb = std::exp(1.0);
  const double pa = ea / (ea + eb), pb = eb / (ea + eb);
  ASSERT_EQ(r.out.size(), 2u * kDc);
  ASSERT_EQ(r.lse.size(), 2u);
  EXPECT_NEAR(r.out[0], pa * 1.0 + pb * 2.0, 1e-15);
  EXPECT_NEAR(r.out[1], pa * 0.5 + pb * -1.0, 1e-15);
  EXPECT_NEAR(r.out[200], pa * 1.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(ea + eb), 1e-15);
  int nonzero = 0;
  for (int c = 0; c < kDc; ++c) nonzero += r.out[static_cast<size_t>(c)] != 0.0;
  EXPECT_EQ(nonzero, 3);  // values are the NoPE part only
  for (int c = 0; c < kDc; ++c) EXPECT_EQ(r.out[static_cast<size_t>(kDc + c)], 0.0);
  EXPECT_EQ(r.lse[1], -kInf);
}

// The dequantization rule reaches keys and values. One key (slot 3): e0 = 1.5 (0x3C), tile scale
// 1 + 2^-8 + 2^-10. kF32: 1.5078125; kBf16: 1.5 * 1.0078125 = 1.51171875, a tie between bf16 steps
// 1.5078125 and 1.515625, to even: 1.515625 (docs/semantics.md §1.2, §4.1). One key: out = v, lse = s.
TEST(SparseMqa, DequantRuleReachesKeysAndValues) {
  const CacheGeometry g = small_geometry();
  std::vector<uint8_t> cache(static_cast<size_t>(g.bytes()), 0xFF);
  HandEntry e;
  e.codes = {{0, 0x3C}};
  e.scales = {1.0048828125f, 1.0f, 1.0f, 1.0f};
  write_entry(cache, g, 3, e);
  std::vector<double> q(kDl, 0.0);
  q[0] = 1.0;
  const std::vector<int32_t> idx = {3, -1};
  const auto f32 = sparse_mqa(q, 1, idx, 2, cache, g, 0.5);
  const auto bf16 = sparse_mqa(q, 1, idx, 2, cache, g, 0.5, ScaleRounding::kBf16);
  EXPECT_EQ(f32.out[0], 1.5078125);
  EXPECT_EQ(f32.lse[0], 0.5 * 1.5078125);
  EXPECT_EQ(bf16.out[0], 1.515625);
  EXPECT_EQ(bf16.lse[0], 0.5 * 1.515625);
  EXPECT_EQ(dequant_slots(cache, g, {3}, ScaleRounding::kBf16)[0], 1.515625);
}

TEST(SparseMqa, HeadsAreIndependent) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  std::vector<double> q(2 * kDl, 0.0);  // one token, two heads; head 1 has q = 0
  q[0] = 1.0;
  q[512] = 2.0;
  const auto r = sparse_mqa(q, 2, {2, 5}, 2, cache, g, 0.5);
  const double ea = std::exp(1.5), eb = std::exp(1.0);
  EXPECT_NEAR(r.out[0], (ea * 1.0 + eb * 2.0) / (ea + eb), 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(ea + eb), 1e-15);
  // Head 1: equal scores 0 -> p = 1/2 each, lse = ln 2.
  EXPECT_NEAR(r.out[kDc + 0], 1.5, 1e-15);
  EXPECT_NEAR(r.out[kDc + 1], -0.25, 1e-15);
  EXPECT_NEAR(r.out[kDc + 200], 0.5, 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(2.0), 1e-15);
}

TEST(SparseMqa, DuplicatedIndicesCountEachTime) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  std::vector<double> q(kDl, 0.0);
  q[0] = 1.0;
  q[512] = 2.0;
  const auto r = sparse_mqa(q, 1, {5, 5, 2}, 3, cache, g, 0.5);
  const double ea = std::exp(1.5), eb = std::exp(1.0);
  EXPECT_NEAR(r.out[0], (2 * ea * 1.0 + eb * 2.0) / (2 * ea + eb), 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(2 * ea + eb), 1e-15);
}

TEST(SparseMqa, StableForLargeScores) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  std::vector<double> q(kDl, 0.0);
  q[0] = 1000.0;  // s_A = 1000, s_B = 2000: exp() of either overflows without max subtraction
  const auto r = sparse_mqa(q, 1, {5, 2}, 2, cache, g, 1.0);
  // p_A = e^-1000 / (1 + e^-1000) ~ 0, p_B ~ 1: out ~ value of B, lse = 2000 + ln(1 + e^-1000) = 2000.
  EXPECT_DOUBLE_EQ(r.out[0], 2.0);
  EXPECT_DOUBLE_EQ(r.out[1], -1.0);
  EXPECT_DOUBLE_EQ(r.lse[0], 2000.0);
}

TEST(SparseMqa, StrayReadOfAnUnusedSlotShowsAsNaN) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  std::vector<double> q(kDl, 0.0);
  q[0] = 1.0;
  const auto r = sparse_mqa(q, 1, {5, 3}, 2, cache, g, 1.0);  // slot 3 is 0xFF bytes (NaN)
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_TRUE(std::isnan(r.lse[0]));
}

TEST(SparseMqa, RejectsBadShapes) {
  const CacheGeometry g = small_geometry();
  const auto cache = two_key_cache(g);
  std::vector<double> q(kDl, 0.0);
  EXPECT_THROW(sparse_mqa(q, 1, {5, 2, 1}, 2, cache, g, 1.0), std::invalid_argument);
  EXPECT_THROW(sparse_mqa(q, 2, {5, 2}, 2, cache, g, 1.0), std::invalid_argument);  // 576 is not [T, 2, 576]
  EXPECT_THROW(sparse_mqa(q, 1, {5, 2}, 2, std::vector<uint8_t>(100), g, 1.0), std::invalid_argument);
}

// ================================ Dense MHA =====================================================

// One query, two keys. q = e0 + e128 (RoPE part), k0 = 2 e0, k1 = 3 e128, scale 1: s = (2, 3).
TEST(DenseMha, TwoKeysByHandIncludingTheRopePart) {
  std::vector<double> q(kDqk, 0.0), k(2 * kDqk, 0.0), v(2 * kDv, 0.0);
  q[0] = 1.0;
  q[128] = 1.0;
  k[0] = 2.0;
  k[kDqk + 128] = 3.0;
  v[0] = 1.0;
  v[kDv + 1] = 1.0;
  const auto r = dense_mha(q, k, v, 1, {0, 1}, {0, 2}, false, 1.0);
  const double e2 = std::exp(2.0), e3 = std::exp(3.0);
  EXPECT_NEAR(r.out[0], e2 / (e2 + e3), 1e-15);
  EXPECT_NEAR(r.out[1], e3 / (e2 + e3), 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(e2 + e3), 1e-15);
}

// Uniform scores (q = 0) and one-hot values v_j = e_j: out[i] is 1/n on exactly the visible keys,
// lse = ln n, so the visible set can be read off the output.
struct MaskCase {
  std::vector<int32_t> cu_q, cu_k;
};
void expect_visible(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k, bool causal, int H) {
  const int Tq = cu_q.back(), Tk = cu_k.back();
  std::vector<double> q(static_cast<size_t>(Tq) * H * kDqk, 0.0), k(static_cast<size_t>(Tk) * H * kDqk, 0.0),
      v(static_cast<size_t>(Tk) * H * kDv, 0.0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> d(-1, 1);
  for (auto& x : k) x = d(rng);  // keys are irrelevant when q = 0
  for (size_t r = 0; r + 1 < cu_k.size(); ++r)
    for (int j = 0; j < cu_k[r + 1] - cu_k[r]; ++j)
      for (int h = 0; h < H; ++h) v[(static_cast<size_t>(cu_k[r] + j) * H + h) * kDv + static_cast<size_t>(j)] = 1.0;
  const auto res = dense_mha(q, k, v, H, cu_q, cu_k, causal, 0.3);
  for (size_t r = 0; r + 1 < cu_q.size(); ++r) {
    const int nq = cu_q[r + 1] - cu_q[r], nk = cu_k[r + 1] - cu_k[r];
    for (int i = 0; i < nq; ++i) {
      // Hand rule: bottom-right causal sees j <= i + nk - nq, i.e. the first i + nk - nq + 1 keys.
      const int n = causal ? std::max(0, std::min(nk, i + nk - nq + 1)) : nk;
      for (int h = 0; h < H; ++h) {
        const size_t row = static_cast<size_t>(cu_q[r] + i) * H + static_cast<size_t>(h);
        SCOPED_TRACE("request " + std::to_string(r) + " query " + std::to_string(i) + " head " + std::to_string(h));
        if (n == 0) {
          EXPECT_EQ(res.lse[row], -kInf);
        } else {
          EXPECT_NEAR(res.lse[row], std::log(static_cast<double>(n)), 1e-15);
        }
        for (int c = 0; c < kDv; ++c)
          EXPECT_NEAR(res.out[row * kDv + static_cast<size_t>(c)], c < n ? 1.0 / n : 0.0, 1e-15) << "component " << c;
      }
    }
  }
}

TEST(DenseMha, BottomRightCausalMaskBoundaries) {
  // r0: context 3 + 2 new (query i sees 3 + i + 1 keys); r1: pure prefill 3/3 (i sees i + 1);
  // r2: nq = 3 > nk = 1 (queries 0, 1 see nothing, query 2 sees key 0); r3: no query; r4: no key;
  // r5: one decode query over 6 keys (sees all).
  expect_visible({0, 2, 5, 8, 8, 10, 11}, {0, 5, 8, 9, 11, 11, 17}, true, 2);
}

TEST(DenseMha, UnmaskedSeesEveryKey) { expect_visible({0, 2, 5, 8, 8, 10}, {0, 5, 8, 9, 11, 11}, false, 1); }

TEST(DenseMha, RejectsBadSeqlens) {
  std::vector<double> q(kDqk, 0.0), k(2 * kDqk, 0.0), v(2 * kDv, 0.0);
  EXPECT_THROW(dense_mha(q, k, v, 1, {0, 1}, {0, 3}, true, 1.0), std::invalid_argument);     // cu_k[R] != Tk
  EXPECT_THROW(dense_mha(q, k, v, 1, {1, 1}, {0, 2}, true, 1.0), std::invalid_argument);     // cu_q[0] != 0
  EXPECT_THROW(dense_mha(q, k, v, 1, {0, 1, 1}, {0, 2}, true, 1.0), std::invalid_argument);  // R differs
  EXPECT_THROW(dense_mha(q, k, v, 1, {0, 1, 1}, {0, 2, 1}, true, 1.0), std::invalid_argument);  // decreasing
  EXPECT_THROW(dense_mha(q, k, std::vector<double>(kDv, 0.0), 1, {0, 1}, {0, 2}, true, 1.0), std::invalid_argument);
}

// ================================ LSE merges ====================================================

TEST(MergeLse, HandComputed) {
  // lse_a = 0, lse_b = ln 3: weights 1 : 3. out = (1 * [1, 2] + 3 * [4, -2]) / 4, lse = ln 4.
  const auto r = merge_lse({1, 2}, {0.0}, {4, -2}, {std::log(3.0)}, 2);
  EXPECT_NEAR(r.out[0], 13.0 / 4, 1e-15);
  EXPECT_NEAR(r.out[1], -1.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(4.0), 1e-15);
  // The same shifted by 800: e^800 overflows a double, a max-subtracted merge does not.
  const auto s = merge_lse({1, 2}, {800.0}, {4, -2}, {800.0 + std::log(3.0)}, 2);
  // (800 + ln 3 itself carries a representation error of ~1e-13.)
  EXPECT_NEAR(s.out[0], 13.0 / 4, 1e-12);
  EXPECT_NEAR(s.out[1], -1.0, 1e-12);
  EXPECT_NEAR(s.lse[0], 800.0 + std::log(4.0), 1e-12);
}

TEST(MergeLse, NoKeyMarkersOnEitherSide) {
  const double nan = kNaN;
  // Rows: (a finite, b -inf), (a -inf, b finite), (both -inf), (a NaN, b finite), (a finite, b +inf),
  // (both NaN), (a +inf, b NaN). The no-key side is poisoned with NaN and must not leak.
  const std::vector<double> lse_a = {0.5, -kInf, -kInf, nan, 0.25, nan, kInf};
  const std::vector<double> lse_b = {-kInf, 1.5, -kInf, 1.5, kInf, nan, nan};
  const std::vector<double> out_a = {1, nan, 7, nan, 2, 9, 10};
  const std::vector<double> out_b = {nan, 3, 8, 3, nan, 11, 12};
  const auto r = merge_lse(out_a, lse_a, out_b, lse_b, 1);
  EXPECT_EQ(r.out[0], 1.0);
  EXPECT_EQ(r.lse[0], 0.5);
  EXPECT_EQ(r.out[1], 3.0);
  EXPECT_EQ(r.lse[1], 1.5);
  EXPECT_EQ(r.out[2], 7.0);  // both empty: out_a as is
  EXPECT_EQ(r.lse[2], -kInf);
  EXPECT_EQ(r.out[3], 3.0);
  EXPECT_EQ(r.lse[3], 1.5);
  EXPECT_EQ(r.out[4], 2.0);
  EXPECT_EQ(r.lse[4], 0.25);
  EXPECT_EQ(r.out[5], 9.0);
  EXPECT_EQ(r.lse[5], -kInf);
  EXPECT_EQ(r.out[6], 10.0);
  EXPECT_EQ(r.lse[6], -kInf);
}

TEST(MergeLse, RejectsMismatchedShapes) {
  EXPECT_THROW(merge_lse({1, 2}, {0.0}, {1}, {0.0}, 2), std::invalid_argument);
  EXPECT_THROW(merge_lse({1, 2}, {0.0}, {1, 2}, {0.0, 1.0}, 2), std::invalid_argument);
  EXPECT_THROW(merge_lse({1, 2}, {0.0}, {1, 2}, {0.0}, 0), std::invalid_argument);
}

TEST(MergeMany, HandComputed) {
  // lse {0, ln 2, -inf (poisoned out)} -> L = ln 3, out = 1/3 * 1 + 2/3 * 4 = 3.
  // Row 2: every part empty (-inf, NaN, +inf) -> 0, -inf.
  const std::vector<AttentionResult> parts = {
      {{1.0, 5.0}, {0.0, -kInf}}, {{4.0, 6.0}, {std::log(2.0), kNaN}}, {{kNaN, 7.0}, {-kInf, kInf}}};
  const auto r = merge_many(parts, 1);
  EXPECT_NEAR(r.out[0], 3.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-15);
  EXPECT_EQ(r.out[1], 0.0);
  EXPECT_EQ(r.lse[1], -kInf);
  // One part: itself.
  const auto one = merge_many({{{2.0, 3.0}, {0.7}}}, 2);
  EXPECT_EQ(one.out, (std::vector<double>{2.0, 3.0}));
  EXPECT_EQ(one.lse, (std::vector<double>{0.7}));
  EXPECT_THROW(merge_many({}, 1), std::invalid_argument);
  EXPECT_THROW(merge_many({{{1.0}, {0.0}}, {{1.0, 2.0}, {0.0}}}, 1), std::invalid_argument);
}

// ================================ Random data for the identities ================================

// A request's cache: seq positions packed with ref::pack into shuffled physical blocks of a pool
// with spare (unused, 0xFF) blocks; block table width one more than needed, stride two more.
struct PackedRequests {
  CacheGeometry geo;
  BlockTable bt;
  std::vector<uint8_t> cache;
  std::vector<uint16_t> kv_c, k_pe;  // [sum seq, 512], [sum seq, 64]
  std::vector<int64_t> row0;         // first row of request r
};
PackedRequests pack_requests(const std::vector<int32_t>& seq, int32_t B, std::mt19937& rng) {
  PackedRequests p;
  int32_t width = 0, blocks = 0;
  int64_t rows = 0;
  for (int32_t s : seq) {
    p.row0.push_back(rows);
    rows += s;
    width = std::max(width, (s + B - 1) / B);
    blocks += (s + B - 1) / B;
  }
  p.geo.num_blocks = blocks + 3;
  p.geo.block_size = B;
  p.geo.page_stride_bytes = static_cast<int64_t>(B) * kEntry + 48;
  p.cache.assign(static_cast<size_t>(p.geo.bytes()), 0xFF);
  std::vector<int32_t> phys(static_cast<size_t>(p.geo.num_blocks));
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  p.bt.num_reqs = static_cast<int32_t>(seq.size());
  p.bt.width = width + 1;
  p.bt.stride = width + 3;
  p.bt.data.assign(static_cast<size_t>(p.bt.num_reqs * p.bt.stride), -1);
  size_t next = 0;
  for (size_t r = 0; r < seq.size(); ++r)
    for (int32_t b = 0; b < (seq[r] + B - 1) / B; ++b) p.bt.data[r * static_cast<size_t>(p.bt.stride) + b] = phys[next++];
  p.kv_c = normal_bf16(static_cast<size_t>(rows) * kDc, 0.1f, rng);
  p.k_pe = uniform_bf16(static_cast<size_t>(rows) * kDr, -1.0f, 1.0f, rng);
  std::vector<int64_t> slots;
  for (size_t r = 0; r < seq.size(); ++r)
    for (int32_t pos = 0; pos < seq[r]; ++pos)
      slots.push_back(static_cast<int64_t>(p.bt.at(static_cast<int32_t>(r), pos / B)) * B + pos % B);
  pack(p.kv_c, p.k_pe, slots, p.geo, p.cache);
  return p;
}

// Global slots of request-local positions (by hand from the block table).
std::vector<int32_t> slots_of(const PackedRequests& p, int32_t r, const std::vector<int32_t>& pos) {
  std::vector<int32_t> out;
  for (int32_t x : pos) out.push_back(x < 0 ? -1 : p.bt.at(r, x / p.geo.block_size) * p.geo.block_size + x % p.geo.block_size);
  return out;
}

// Keys of request r positions [0, n) as doubles, through ref::gather (the cache-path reference).
std::vector<double> gathered_rows(const PackedRequests& p, int32_t r, int32_t n) {
  BlockTable one = p.bt;
  one.num_reqs = 1;
  one.data.assign(p.bt.data.begin() + static_cast<std::ptrdiff_t>(r * p.bt.stride),
                  p.bt.data.begin() + static_cast<std::ptrdiff_t>((r + 1) * p.bt.stride));
  return values_of(gather(p.cache, p.geo, one, {0}, std::nullopt, n));
}

void split_latent(const std::vector<double>& rows, std::vector<double>& kv, std::vector<double>& pe) {
  const size_t n = rows.size() / kDl;
  kv.resize(n * kDc);
  pe.resize(n * kDr);
  for (size_t i = 0; i < n; ++i) {
    std::copy_n(&rows[i * kDl], kDc, &kv[i * kDc]);
    std::copy_n(&rows[i * kDl + kDc], kDr, &pe[i * kDr]);
  }
}

// q = [q_nope, q_pe] per (token, head), as doubles.
std::vector<double> concat_q(const std::vector<uint16_t>& qn, const std::vector<uint16_t>& qp, size_t rows) {
  std::vector<double> q(rows * kDqk);
  for (size_t i = 0; i < rows; ++i) {
    for (int d = 0; d < kDn; ++d) q[i * kDqk + d] = value_of(qn[i * kDn + d]);
    for (int d = 0; d < kDr; ++d) q[i * kDqk + kDn + d] = value_of(qp[i * kDr + d]);
  }
  return q;
}

// One request: context 9, 4 new tokens (positions 9..12), H = 3, B = 4.
struct IdentityCase {
  int H = 3, context = 9, nq = 4, seq = 13, K = 16;
  double scale = 1.0 / std::sqrt(192.0);
  PackedRequests p;
  std::vector<uint16_t> qn, qp, wk, wv;
  std::vector<int32_t> positions;  // [nq, K]: every visible position, shuffled, -1 padded
  explicit IdentityCase(uint32_t seed) {
    std::mt19937 rng(seed);
    p = pack_requests({seq}, 4, rng);
    qn = uniform_bf16(static_cast<size_t>(nq) * H * kDn, -1, 1, rng);
    qp = uniform_bf16(static_cast<size_t>(nq) * H * kDr, -1, 1, rng);
    wk = uniform_bf16(static_cast<size_t>(H) * kDn * kDc, -0.3f, 0.3f, rng);
    wv = uniform_bf16(static_cast<size_t>(H) * kDv * kDc, -0.3f, 0.3f, rng);
    for (int i = 0; i < nq; ++i) {
      std::vector<int32_t> row(static_cast<size_t>(context + i + 1));
      std::iota(row.begin(), row.end(), 0);
      std::shuffle(row.begin(), row.end(), rng);
      row.resize(static_cast<size_t>(K), -1);
      std::shuffle(row.begin(), row.end(), rng);  // padding anywhere in the row
      positions.insert(positions.end(), row.begin(), row.end());
    }
  }
  std::vector<int32_t> slots() const { return slots_of(p, 0, positions); }
};

// docs/semantics.md §4.3: with every visible position selected and every key from the cache, the absorbed sparse
// route and the up-projected dense route compute the same function.
TEST(Identity, SparseMqaOverAllVisibleEqualsDenseMhaOnUpProjectedKv) {
  const IdentityCase c(11);
  const auto lat = sparse_mqa(absorb_q(c.qn, c.qp, c.wk), c.H, c.slots(), c.K, c.p.cache, c.p.geo, c.scale);
  const auto sparse_out = project_out(lat.out, c.wv);

  std::vector<double> kv, pe;
  split_latent(gathered_rows(c.p, 0, c.seq), kv, pe);
  const auto up = up_project(kv, pe, c.wk, c.wv);
  const auto dense = dense_mha(concat_q(c.qn, c.qp, static_cast<size_t>(c.nq * c.H)), up.k, up.v, c.H, {0, c.nq},
                               {0, c.seq}, true, c.scale);
  expect_close(sparse_out, dense.out, 1e-12, "out");
  expect_close(lat.lse, dense.lse, 1e-12, "lse");
  // Not trivially equal: a sparse pick that drops one visible key changes the answer.
  std::vector<int32_t> fewer = c.slots();
  *std::find_if(fewer.begin(), fewer.end(), [](int32_t s) { return s >= 0; }) = -1;
  const auto lat2 = sparse_mqa(absorb_q(c.qn, c.qp, c.wk), c.H, fewer, c.K, c.p.cache, c.p.geo, c.scale);
  EXPECT_GT(std::fabs(lat2.lse[0] - dense.lse[0]), 1e-6);
}

// Merge of a partition of the selected keys == attention over the union (sparse, latent space).
TEST(Identity, MergeOfTwoHalvesEqualsUnion) {
  const IdentityCase c(12);
  const auto q_lat = absorb_q(c.qn, c.qp, c.wk);
  const auto all = c.slots();
  std::vector<int32_t> a(all.size(), -1), b(all.size(), -1);
  std::mt19937 rng(3);
  for (size_t i = 0; i < all.size(); ++i) (rng() % 2 ? a : b)[i] = all[i];
  // Token 1 gets everything on side a (side b empty: -inf must merge as the identity).
  for (int j = 0; j < c.K; ++j) {
    const size_t i = static_cast<size_t>(c.K + j);
    a[i] = all[i];
    b[i] = -1;
  }
  const auto whole = sparse_mqa(q_lat, c.H, all, c.K, c.p.cache, c.p.geo, c.scale);
  const auto ra = sparse_mqa(q_lat, c.H, a, c.K, c.p.cache, c.p.geo, c.scale);
  const auto rb = sparse_mqa(q_lat, c.H, b, c.K, c.p.cache, c.p.geo, c.scale);
  for (int h = 0; h < c.H; ++h) EXPECT_EQ(rb.lse[static_cast<size_t>(c.H + h)], -kInf);
  const auto m = merge_lse(ra.out, ra.lse, rb.out, rb.lse, kDc);
  expect_close(m.out, whole.out, 1e-12, "merged out");
  expect_close(m.lse, whole.lse, 1e-12, "merged lse");
  const auto m2 = merge_lse(rb.out, rb.lse, ra.out, ra.lse, kDc);  // order does not matter
  expect_close(m2.out, whole.out, 1e-12, "merged out (b, a)");
}

TEST(Identity, MergeManyOverAPartitionEqualsWhole) {
  const IdentityCase c(13);
  const auto q_lat = absorb_q(c.qn, c.qp, c.wk);
  const auto all = c.slots();
  std::vector<std::vector<int32_t>> parts(4, std::vector<int32_t>(all.size(), -1));
  std::mt19937 rng(5);
  for (size_t i = 0; i < all.size(); ++i) parts[rng() % 3][i] = all[i];  // part 3 stays empty
  std::vector<AttentionResult> results;
  for (const auto& part : parts) results.push_back(sparse_mqa(q_lat, c.H, part, c.K, c.p.cache, c.p.geo, c.scale));
  const auto whole = sparse_mqa(q_lat, c.H, all, c.K, c.p.cache, c.p.geo, c.scale);
  const auto m = merge_many(results, kDc);
  expect_close(m.out, whole.out, 1e-12, "out");
  expect_close(m.lse, whole.lse, 1e-12, "lse");
}

// docs/semantics.md §4.2 backend decomposition: context part (unmasked) + new part (bottom-right causal among the
// new tokens), merged by LSE == one causal softmax over context + new.
TEST(Identity, DenseContextPlusCausalNewMergedEqualsCausalUnion) {
  const IdentityCase c(14);
  std::vector<double> kv, pe;
  split_latent(gathered_rows(c.p, 0, c.seq), kv, pe);
  const auto up = up_project(kv, pe, c.wk, c.wv);
  const auto q = concat_q(c.qn, c.qp, static_cast<size_t>(c.nq * c.H));
  const size_t ctx_k = static_cast<size_t>(c.context) * c.H * kDqk, ctx_v = static_cast<size_t>(c.context) * c.H * kDv;
  const std::vector<double> k_ctx(up.k.begin(), up.k.begin() + static_cast<std::ptrdiff_t>(ctx_k));
  const std::vector<double> v_ctx(up.v.begin(), up.v.begin() + static_cast<std::ptrdiff_t>(ctx_v));
  const std::vector<double> k_new(up.k.begin() + static_cast<std::ptrdiff_t>(ctx_k), up.k.end());
  const std::vector<double> v_new(up.v.begin() + static_cast<std::ptrdiff_t>(ctx_v), up.v.end());
  const auto ctx = dense_mha(q, k_ctx, v_ctx, c.H, {0, c.nq}, {0, c.context}, false, c.scale);
  const auto fresh = dense_mha(q, k_new, v_new, c.H, {0, c.nq}, {0, c.nq}, true, c.scale);
  const auto merged = merge_lse(ctx.out, ctx.lse, fresh.out, fresh.lse, kDv);
  const auto whole = dense_mha(q, up.k, up.v, c.H, {0, c.nq}, {0, c.seq}, true, c.scale);
  expect_close(merged.out, whole.out, 1e-12, "out");
  expect_close(merged.lse, whole.lse, 1e-12, "lse");
}

// ================================ DCP ===========================================================

TEST(Dcp, OwnerAndLocalPositionByHand) {
  // W = 2, I = 2: positions 0,1 -> rank 0; 2,3 -> rank 1; 4,5 -> rank 0 (local 2, 3); 6 -> rank 1 (local 2).
  const int32_t owners[] = {0, 0, 1, 1, 0, 0, 1, 1, 0};
  const int64_t local[] = {0, 1, 0, 1, 2, 3, 2, 3, 4};
  for (int p = 0; p < 9; ++p) {
    EXPECT_EQ(dcp_owner(p, 2, 2), owners[p]) << p;
    EXPECT_EQ(dcp_local_position(p, 2, 2), local[p]) << p;
  }
  // W = 3, I = 1: round robin; position 7 -> rank 1, local 2.
  EXPECT_EQ(dcp_owner(7, 3, 1), 1);
  EXPECT_EQ(dcp_local_position(7, 3, 1), 2);
  EXPECT_EQ(dcp_owned_positions({0, 2, -1, 5, 6, 3}, 2, 1, 2), (std::vector<int32_t>{-1, 2, -1, -1, 6, 3}));
  EXPECT_EQ(dcp_owned_positions({0, 2, -1, 5, 6, 3}, 2, 0, 2), (std::vector<int32_t>{0, -1, -1, 5, -1, -1}));
}

TEST(Dcp, MergedRanksEqualSingleRank) {
  const int W = 2, I = 2, B = 4, H = 2, K = 10, T = 3, seq = 24;
  const double scale = 0.2;
  std::mt19937 rng(21);
  const PackedRequests global = pack_requests({seq}, B, rng);
  // Rank caches: rank rho holds its owned positions at their local positions (by hand:
  // owner (p / I) % W, local (p / (W I)) I + p % I), in its own pool with shuffled blocks.
  std::vector<std::vector<uint8_t>> pools(W);
  std::vector<DcpRankCache> ranks(W);
  for (int rho = 0; rho < W; ++rho) {
    const int local_len = seq / W;  // 12: seq is a multiple of W * I
    DcpRankCache& rc = ranks[static_cast<size_t>(rho)];
    rc.geometry.block_size = B;
    rc.geometry.num_blocks = local_len / B + 1;
    rc.geometry.page_stride_bytes = B * kEntry;
    pools[static_cast<size_t>(rho)].assign(static_cast<size_t>(rc.geometry.bytes()), 0xFF);
    std::vector<int32_t> phys(static_cast<size_t>(rc.geometry.num_blocks));
    std::iota(phys.begin(), phys.end(), 0);
    std::shuffle(phys.begin(), phys.end(), rng);
    rc.block_table.num_reqs = 1;
    rc.block_table.width = local_len / B;
    rc.block_table.stride = local_len / B;
    rc.block_table.data.assign(phys.begin(), phys.begin() + local_len / B);
    std::vector<uint16_t> kv, pe;
    std::vector<int64_t> slots;
    for (int p = 0; p < seq; ++p) {
      if ((p / I) % W != rho) continue;
      const int lp = (p / (W * I)) * I + p % I;
      slots.push_back(static_cast<int64_t>(rc.block_table.data[static_cast<size_t>(lp / B)]) * B + lp % B);
      kv.insert(kv.end(), global.kv_c.begin() + p * kDc, global.kv_c.begin() + (p + 1) * kDc);
      pe.insert(pe.end(), global.k_pe.begin() + p * kDr, global.k_pe.begin() + (p + 1) * kDr);
    }
    pack(kv, pe, slots, rc.geometry, pools[static_cast<size_t>(rho)]);
    rc.cache = &pools[static_cast<size_t>(rho)];
  }
  // Token 0: a random pick; token 1: only positions of rank 0 (0, 1, 4, 5, 8, 9, ...); token 2: a
  // pick with a duplicate and a position past the sequence's blocks (invalid everywhere).
  std::vector<int32_t> pos(static_cast<size_t>(T * K), -1);
  std::vector<int32_t> all(seq);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::copy_n(all.begin(), 8, pos.begin());
  const int32_t rank0[] = {0, 1, 4, 5, 8, 9, 12, 13, 16, 17};
  std::copy_n(rank0, K, pos.begin() + K);
  const int32_t mixed[] = {3, 3, 22, 7, 100, -1, 10, 15, 0, 19};
  std::copy_n(mixed, K, pos.begin() + 2 * K);
  const std::vector<int32_t> req_id(T, 0);

  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> q_lat(static_cast<size_t>(T) * H * kDl);
  for (auto& x : q_lat) x = d(rng);

  const auto dcp = sparse_mqa_dcp(q_lat, H, req_id, pos, K, ranks, I, scale);
  ASSERT_EQ(dcp.per_rank.size(), 2u);
  // Single rank: global slots by hand from the global block table (position 100 is past it).
  std::vector<int32_t> gslots(pos.size(), -1);
  for (size_t i = 0; i < pos.size(); ++i)
    if (pos[i] >= 0 && pos[i] < seq) gslots[i] = slots_of(global, 0, {pos[i]})[0];
  const auto single = sparse_mqa(q_lat, H, gslots, K, global.cache, global.geo, scale);
  expect_close(dcp.merged.out, single.out, 1e-12, "merged out");
  expect_close(dcp.merged.lse, single.lse, 1e-12, "merged lse");
  for (int h = 0; h < H; ++h) {  // rank 1 owns nothing of token 1: 0, -inf
    EXPECT_EQ(dcp.per_rank[1].lse[static_cast<size_t>(H + h)], -kInf);
    for (int c = 0; c < kDc; ++c) EXPECT_EQ(dcp.per_rank[1].out[(static_cast<size_t>(H + h)) * kDc + c], 0.0);
  }
  // Each rank alone is not the answer (the merge matters).
  EXPECT_GT(std::fabs(dcp.per_rank[0].lse[0] - single.lse[0]), 1e-6);
}

// ================================ Forward (routing, docs/semantics.md §4.3, 4.4) ==============================

TEST(Forward, PrefillsGoDenseRule) {
  EXPECT_TRUE(prefills_go_dense({100, 16, 16}, 1, 16, false));   // the decode's length does not count
  EXPECT_FALSE(prefills_go_dense({100, 16, 17}, 1, 16, false));  // one prefill over K: all sparse
  EXPECT_FALSE(prefills_go_dense({100, 16, 16}, 1, 16, true));   // forced
  EXPECT_TRUE(prefills_go_dense({100, 200}, 2, 16, false));      // no prefills
  EXPECT_FALSE(prefills_go_dense({100, 16}, 0, 16, false));      // the first request is a prefill here
  EXPECT_THROW(prefills_go_dense({1, 2}, 3, 16, false), std::invalid_argument);
}

// Batch: r0 decode (seq 10, 1 new), r1 prefill with context (seq 12, 4 new: context 8), r2 pure
// prefill (seq 6, 6 new). H = 2, B = 4. Each token's top-k: all visible positions (shuffled,
// -1 padded) truncated to K.
struct ForwardCase {
  ForwardInputs in;
  std::vector<uint8_t> cache;
  PackedRequests p;
  ForwardCase(int32_t K, uint32_t seed) {
    std::mt19937 rng(seed);
    in.seq_len = {10, 12, 6};
    in.query_len = {1, 4, 6};
    in.num_decodes = 1;
    in.num_heads = 2;
    in.topk = K;
    in.scale = 1.0 / std::sqrt(192.0);
    p = pack_requests(in.seq_len, 4, rng);  // every position packed (new tokens too: docs/semantics.md §4.4)
    cache = p.cache;
    in.geometry = p.geo;
    in.block_table = p.bt;
    in.kv_c = p.kv_c;
    in.k_pe = p.k_pe;
    for (int32_t r = 0; r < 3; ++r)
      for (int32_t i = 0; i < in.query_len[static_cast<size_t>(r)]; ++i) {
        const int32_t pos = in.seq_len[static_cast<size_t>(r)] - in.query_len[static_cast<size_t>(r)] + i;
        in.req_id.push_back(r);
        in.position.push_back(pos);
        std::vector<int32_t> row(static_cast<size_t>(pos + 1));
        std::iota(row.begin(), row.end(), 0);
        std::shuffle(row.begin(), row.end(), rng);
        row.resize(static_cast<size_t>(K), -1);
        in.topk_positions.insert(in.topk_positions.end(), row.begin(), row.end());
      }
    const size_t T = in.req_id.size();
    in.q_nope = uniform_bf16(T * 2 * kDn, -1, 1, rng);
    in.q_pe = uniform_bf16(T * 2 * kDr, -1, 1, rng);
    in.w_uk = uniform_bf16(2u * kDn * kDc, -0.3f, 0.3f, rng);
    in.w_uv = uniform_bf16(2u * kDv * kDc, -0.3f, 0.3f, rng);
  }
};

// Rows [t0, t1) of a [T, H, w] container.
std::vector<double> token_rows(const std::vector<double>& v, int t0, int t1, int per_token) {
  return {v.begin() + t0 * per_token, v.begin() + t1 * per_token};
}

TEST(Forward, RoutesPerSpec) {
  ForwardCase c(16, 31);
  auto out = forward(c.in, c.cache);  // prefills 12, 6 <= 16: dense
  EXPECT_TRUE(out.prefills_dense);
  ASSERT_EQ(out.route.size(), 11u);
  EXPECT_EQ(out.route[0], Route::kSparse);  // the decode
  for (size_t t = 1; t < 11; ++t) EXPECT_EQ(out.route[t], Route::kDense) << t;

  c.in.force_sparse = true;
  out = forward(c.in, c.cache);
  EXPECT_FALSE(out.prefills_dense);
  for (size_t t = 0; t < 11; ++t) EXPECT_EQ(out.route[t], Route::kSparse) << t;

  ForwardCase small(11, 31);  // seq 12 > 11: everything sparse
  out = forward(small.in, small.cache);
  EXPECT_FALSE(out.prefills_dense);
  for (size_t t = 0; t < 11; ++t) EXPECT_EQ(out.route[t], Route::kSparse) << t;
}

// docs/semantics.md §4.3 end to end: with new tokens read from the cache and top-k covering every visible
// position, the dense and the sparse routes agree to double rounding.
TEST(Forward, DenseFromCacheEqualsForcedSparse) {
  ForwardCase c(16, 32);
  c.in.new_token_kv = NewTokenKv::kFromCache;
  const auto dense = forward(c.in, c.cache);
  c.in.force_sparse = true;
  const auto sparse = forward(c.in, c.cache);
  ASSERT_TRUE(dense.prefills_dense);
  expect_close(dense.out, sparse.out, 1e-12, "out");
  expect_close(dense.lse, sparse.lse, 1e-12, "lse");
}

// The sparse route is absorb -> sparse MQA over the converted top-k -> W_UV, for the top-k given
// (here K = 11 < visible for the last tokens of r1, so the pick matters).
TEST(Forward, SparseRouteUsesTheGivenTopK) {
  ForwardCase c(11, 33);
  const auto fwd = forward(c.in, c.cache);
  const int H = 2;
  const auto q_lat = absorb_q(c.in.q_nope, c.in.q_pe, c.in.w_uk);
  std::vector<int32_t> slots;
  for (size_t t = 0; t < c.in.req_id.size(); ++t) {
    const std::vector<int32_t> row(c.in.topk_positions.begin() + static_cast<std::ptrdiff_t>(t * 11),
                                   c.in.topk_positions.begin() + static_cast<std::ptrdiff_t>((t + 1) * 11));
    const auto s = slots_of(c.p, c.in.req_id[t], row);
    slots.insert(slots.end(), s.begin(), s.end());
  }
  const auto lat = sparse_mqa(q_lat, H, slots, 11, c.cache, c.in.geometry, c.in.scale);
  expect_close(fwd.out, project_out(lat.out, c.in.w_uv), 1e-13, "out");
  expect_close(fwd.lse, lat.lse, 1e-13, "lse");
}

// ForwardInputs::sparse_dequant reaches the sparse route's sparse_mqa only: the decode (token 0,
// sparse) follows it, the dense prefills (tokens 1..10) keep docs/semantics.md §1.2.
TEST(Forward, SparseDequantReachesTheSparseRouteOnly) {
  ForwardCase c(16, 34);
  const auto f32 = forward(c.in, c.cache);
  c.in.sparse_dequant = ScaleRounding::kBf16;
  const auto bf16 = forward(c.in, c.cache);
  ASSERT_TRUE(bf16.prefills_dense);
  const int H = 2, T = static_cast<int>(c.in.req_id.size());
  // Token 0 by hand: sparse MQA over its top-k with the kBf16 rule, then W_UV.
  const auto q_lat = token_rows(absorb_q(c.in.q_nope, c.in.q_pe, c.in.w_uk), 0, 1, H * kDl);
  const std::vector<int32_t> row(c.in.topk_positions.begin(), c.in.topk_positions.begin() + 16);
  const auto lat = sparse_mqa(q_lat, H, slots_of(c.p, 0, row), 16, c.cache, c.in.geometry, c.in.scale,
                              ScaleRounding::kBf16);
  expect_close(token_rows(bf16.out, 0, 1, H * kDv), project_out(lat.out, c.in.w_uv), 1e-13, "decode out");
  expect_close(token_rows(bf16.lse, 0, 1, H), lat.lse, 1e-13, "decode lse");
  EXPECT_NE(token_rows(bf16.out, 0, 1, H * kDv), token_rows(f32.out, 0, 1, H * kDv));  // the rules differ here
  EXPECT_EQ(token_rows(bf16.out, 1, T, H * kDv), token_rows(f32.out, 1, T, H * kDv));  // dense: §1.2 either way
  EXPECT_EQ(token_rows(bf16.lse, 1, T, H), token_rows(f32.lse, 1, T, H));
}

// kBf16: the dense route equals the backend's decomposition computed here by hand: context K/V
// from the cache (ref::gather), unmasked, merged by LSE with the new tokens' K/V from bf16 kv_c,
// causal. It differs from kFromCache by FP8 quantization of the new tokens only.
TEST(Forward, DenseBf16NewTokensIsContextFromCacheMergedWithBf16New) {
  ForwardCase c(16, 34);
  const auto fwd = forward(c.in, c.cache);
  ASSERT_TRUE(fwd.prefills_dense);
  const int H = 2;
  int t0 = 1;  // first prefill token
  for (int32_t r = 1; r < 3; ++r) {
    const int nq = c.in.query_len[static_cast<size_t>(r)], seq = c.in.seq_len[static_cast<size_t>(r)];
    const int context = seq - nq;
    const std::vector<uint16_t> qn(c.in.q_nope.begin() + t0 * H * kDn, c.in.q_nope.begin() + (t0 + nq) * H * kDn);
    const std::vector<uint16_t> qp(c.in.q_pe.begin() + t0 * H * kDr, c.in.q_pe.begin() + (t0 + nq) * H * kDr);
    const auto q = concat_q(qn, qp, static_cast<size_t>(nq * H));
    // New tokens' K/V from bf16.
    const int64_t row0 = c.p.row0[static_cast<size_t>(r)];
    const std::vector<uint16_t> kvb(c.in.kv_c.begin() + (row0 + context) * kDc, c.in.kv_c.begin() + (row0 + seq) * kDc);
    const std::vector<uint16_t> peb(c.in.k_pe.begin() + (row0 + context) * kDr, c.in.k_pe.begin() + (row0 + seq) * kDr);
    const auto up_new = up_project(values_of(kvb), values_of(peb), c.in.w_uk, c.in.w_uv);
    const auto fresh = dense_mha(q, up_new.k, up_new.v, H, {0, nq}, {0, nq}, true, c.in.scale);
    AttentionResult expected = fresh;
    if (context > 0) {
      std::vector<double> kv, pe;
      split_latent(gathered_rows(c.p, r, context), kv, pe);
      const auto up_ctx = up_project(kv, pe, c.in.w_uk, c.in.w_uv);
      const auto ctx = dense_mha(q, up_ctx.k, up_ctx.v, H, {0, nq}, {0, context}, false, c.in.scale);
      expected = merge_lse(ctx.out, ctx.lse, fresh.out, fresh.lse, kDv);
    }
    SCOPED_TRACE("request " + std::to_string(r));
    expect_close(token_rows(fwd.out, t0, t0 + nq, H * kDv), expected.out, 1e-12, "out");
    expect_close(token_rows(fwd.lse, t0, t0 + nq, H), expected.lse, 1e-12, "lse");
    t0 += nq;
  }
  // Against kFromCache: different (FP8 of the new tokens), but only at quantization level.
  c.in.new_token_kv = NewTokenKv::kFromCache;
  const auto from_cache = forward(c.in, c.cache);
  double max_diff = 0.0, max_ref = 0.0;
  for (size_t i = 0; i < fwd.out.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(fwd.out[i] - from_cache.out[i]));
    max_ref = std::max(max_ref, std::fabs(from_cache.out[i]));
  }
  EXPECT_GT(max_diff, 1e-6 * max_ref);
  EXPECT_LT(max_diff, 0.1 * max_ref);
  // The decode token does not depend on where the new tokens' K/V come from (it is sparse either way;
  // only the batching of its products differs, so equal to rounding).
  expect_close(token_rows(fwd.out, 0, 1, H * kDv), token_rows(from_cache.out, 0, 1, H * kDv), 1e-14, "decode");
}

TEST(Forward, RejectsBrokenBatches) {
  {
    ForwardCase c(16, 35);
    std::swap(c.in.req_id[1], c.in.req_id[6]);  // tokens of r1 and r2 interleaved
    EXPECT_THROW(forward(c.in, c.cache), std::invalid_argument);
  }
  {
    ForwardCase c(16, 35);
    c.in.position[2] += 1;  // not context_len + i
    EXPECT_THROW(forward(c.in, c.cache), std::invalid_argument);
  }
  {
    ForwardCase c(16, 35);
    c.in.q_pe.pop_back();
    EXPECT_THROW(forward(c.in, c.cache), std::invalid_argument);
  }
  {
    ForwardCase c(16, 35);  // the dense route needs position 0 of r1, now unmapped
    c.in.block_table.data[static_cast<size_t>(1 * c.in.block_table.stride)] = -1;
    EXPECT_THROW(forward(c.in, c.cache), std::invalid_argument);
    c.in.force_sparse = true;  // the sparse route skips it instead (convert's rule)
    EXPECT_NO_THROW(forward(c.in, c.cache));
  }
}

}  // namespace
}  // namespace mla::ref
