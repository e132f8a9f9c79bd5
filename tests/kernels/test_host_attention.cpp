// The host backend's attention operations (GEMM, sparse MQA, dense MHA, LSE merge) and the
// validate() of their params. Expected values are computed here, in double, from the formulas of
// docs/semantics.md with this file's own bf16 / E4M3 decoding and rounding: nothing of kernels/
// is used to build an expectation (one exception: DenseSoftmaxStepsBothMatchDoubleReference checks
// that the backend runs host::dense_mha's default step; the model dimensions come from
// kernels/common/mla_dims.h, whose static_asserts pin them). Tolerances follow docs/semantics.md
// §8: outputs abs 1e-3 OR rel 2e-2, LSE abs 1e-4.
// Every buffer an operation writes has poisoned guard elements on both sides, and the cache
// memory around (and inside) the pool is 0xFF (NaN in every field) so a stray read shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/mla_dims.h"
#include "kernels/host/host_kernels.h"

namespace {

using mla::bf16_t;
using mla::SparseMqaWorkItem;

using mla::kDc;
using mla::kDl;
using mla::kDn;
using mla::kDqk;
using mla::kDr;
using mla::kDv;
constexpr int kEntryBytes = mla::DsMlaEntry::kBytes;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

// ---- this file's own number formats ------------------------------------------------------------

float float_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
double bf16_value(bf16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// Nearest bf16 by distance, ties to the even code (finite x).
bf16_t round_bf16(float x) {
  if (std::isnan(x)) return 0x7FC0;
  const bf16_t toward_zero = static_cast<bf16_t>(bits_of(x) >> 16);
  const bf16_t away = static_cast<bf16_t>(toward_zero + 1);
  const double d_low = std::fabs(static_cast<double>(x) - bf16_value(toward_zero));
  const double d_high = std::fabs(bf16_value(away) - static_cast<double>(x));
  if (d_low < d_high) return toward_zero;
  if (d_high < d_low) return away;
  return (toward_zero & 1) ? away : toward_zero;
}
bf16_t to_bf16(double x) { return round_bf16(static_cast<float>(x)); }

// E4M3 "fn": 1 sign, 4 exponent (bias 7), 3 mantissa bits; S.1111.111 is NaN.
double e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const double sign = (b & 0x80) ? -1.0 : 1.0;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return sign * (m / 8.0) * std::ldexp(1.0, -6);
  return sign * (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
}

// n payload elements with kSlack guard elements on each side, all poisoned.
template <typename T>
class Guarded {
 public:
  static constexpr size_t kSlack = 600;
  Guarded(size_t n, T poison) : v_(n + 2 * kSlack, poison), n_(n), poison_(poison) {}
  T* data() { return v_.data() + kSlack; }
  T& operator[](size_t i) { return v_[kSlack + i]; }
  size_t size() const { return n_; }
  bool guards_intact() const {
    for (size_t i = 0; i < kSlack; ++i) {
      if (std::memcmp(&v_[i], &poison_, sizeof(T)) != 0) return false;
      if (std::memcmp(&v_[kSlack + n_ + i], &poison_, sizeof(T)) != 0) return false;
    }
    return true;
  }

 private:
  std::vector<T> v_;
  size_t n_;
  T poison_;
};

constexpr bf16_t kPoisonBf16 = 0x5A5A;
const float kPoisonF32 = float_from_bits(0x5A5A5A5Au);

// docs/semantics.md §8 style: abs 1e-3 OR rel 2e-2 for outputs.
::testing::AssertionResult out_close(double actual, double expected) {
  const double err = std::fabs(actual - expected);
  if (err <= 1e-3 || err <= 2e-2 * std::fabs(expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "actual " << actual << " expected " << expected << " (abs err " << err << ")";
}
::testing::AssertionResult lse_close(double actual, double expected) {
  if (std::isinf(expected) || std::isinf(actual)) {
    if (actual == expected) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "actual " << actual << " expected " << expected;
  }
  if (std::fabs(actual - expected) <= 1e-4) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "actual " << actual << " expected " << expected;
}

// ---- the paged cache ---------------------------------------------------------------------------

// A pool of num_blocks pages inside a larger 0xFF allocation (kPadPages NaN pages before and
// after), so an index just outside [0, num_slots) would read NaN rather than crash. Entries
// that were never set are NaN as well.
class TestCache {
 public:
  static constexpr int kPadPages = 2;
  TestCache(int64_t num_blocks, int32_t block_size, int64_t page_stride)
      : num_blocks_(num_blocks), block_size_(block_size), page_stride_(page_stride),
        mem_(static_cast<size_t>((num_blocks + 2 * kPadPages) * page_stride), 0xFF),
        keys_(static_cast<size_t>(num_blocks * block_size)) {}

  mla::PagedCacheView view() { return {data(), num_blocks_, block_size_, page_stride_}; }
  int64_t num_slots() const { return num_blocks_ * block_size_; }
  uint8_t* data() { return mem_.data() + kPadPages * page_stride_; }
  const std::vector<uint8_t>& memory() const { return mem_; }
  // The dequantized key of a slot (docs/semantics.md §1.2), empty when the entry was never set.
  const std::vector<double>& key(int64_t slot) const { return keys_[static_cast<size_t>(slot)]; }

  void set(int64_t slot, const uint8_t* codes, const float* scales, const bf16_t* rope) {
    uint8_t* e = data() + (slot / block_size_) * page_stride_ + (slot % block_size_) * kEntryBytes;
    std::memcpy(e, codes, 512);
    for (int t = 0; t < 4; ++t) {
      const uint32_t u = bits_of(scales[t]);
      for (int i = 0; i < 4; ++i) e[512 + 4 * t + i] = static_cast<uint8_t>(u >> (8 * i));
    }
    for (int i = 0; i < 64; ++i) {
      e[528 + 2 * i] = static_cast<uint8_t>(rope[i]);
      e[529 + 2 * i] = static_cast<uint8_t>(rope[i] >> 8);
    }
    std::vector<double>& k = keys_[static_cast<size_t>(slot)];
    k.assign(kDl, 0.0);
    for (int i = 0; i < 512; ++i) {
      const float product = static_cast<float>(e4m3_value(codes[i])) * scales[i / 128];  // one fp32 multiply
      k[static_cast<size_t>(i)] = bf16_value(round_bf16(product));
    }
    for (int i = 0; i < 64; ++i) k[static_cast<size_t>(512 + i)] = bf16_value(rope[i]);
  }

  void set_random(int64_t slot, std::mt19937& rng) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.0005f, 0.002f);
    std::normal_distribution<double> rope_value(0.0, 0.3);
    uint8_t codes[512];
    for (uint8_t& c : codes) {
      do c = static_cast<uint8_t>(byte(rng));
      while ((c & 0x7F) == 0x7F);
    }
    float scales[4];
    for (float& s : scales) s = scale(rng);
    bf16_t rope[64];
    for (bf16_t& r : rope) r = to_bf16(rope_value(rng));
    set(slot, codes, scales, rope);
  }

 private:
  int64_t num_blocks_;
  int32_t block_size_;
  int64_t page_stride_;
  std::vector<uint8_t> mem_;
  std::vector<std::vector<double>> keys_;
};

// ---- sparse MQA --------------------------------------------------------------------------------

struct Plan {
  std::vector<SparseMqaWorkItem> items;
  std::vector<int32_t> offsets;
  int32_t num_tokens = 0;
  int32_t num_partials = 0;
};

// Token t gets items [cuts[i], cuts[i+1]); one item writes directly, several write partials.
Plan make_plan(int32_t num_tokens, const std::vector<int32_t>& cuts) {
  Plan p;
  p.num_tokens = num_tokens;
  p.offsets.assign(static_cast<size_t>(num_tokens) + 1, 0);
  const int32_t n = static_cast<int32_t>(cuts.size()) - 1;
  for (int32_t t = 0; t < num_tokens; ++t) {
    p.offsets[static_cast<size_t>(t)] = p.num_partials;
    for (int32_t s = 0; s < n; ++s) {
      p.items.push_back({t, cuts[static_cast<size_t>(s)], cuts[static_cast<size_t>(s) + 1], n > 1 ? p.num_partials + s : -1});
    }
    if (n > 1) p.num_partials += n;
  }
  p.offsets[static_cast<size_t>(num_tokens)] = p.num_partials;
  return p;
}

struct SparseCase {
  int32_t T = 0, H = 0, topk = 0;
  int64_t qn_ts = 0, qn_hs = 0, qp_ts = 0, qp_hs = 0, idx_stride = 0;
  float scale = 1.0f;
  std::vector<bf16_t> q_nope, q_pe;  // strided, padding NaN
  std::vector<int32_t> indices;      // [T, idx_stride], padding garbage
  std::vector<double> qd;            // [T, H, 576] the bf16 values as double

  void init(int32_t t, int32_t h, int32_t k, int64_t qn_head_pad, int64_t qn_token_pad, int64_t qp_head_pad,
            int64_t qp_token_pad, int64_t idx_pad) {
    T = t;
    H = h;
    topk = k;
    qn_hs = kDc + qn_head_pad;
    qn_ts = H * qn_hs + qn_token_pad;
    qp_hs = kDr + qp_head_pad;
    qp_ts = H * qp_hs + qp_token_pad;
    idx_stride = topk + idx_pad;
    q_nope.assign(static_cast<size_t>(T * qn_ts), 0x7FC0);
    q_pe.assign(static_cast<size_t>(T * qp_ts), 0x7FC0);
    indices.assign(static_cast<size_t>(T * idx_stride), 0x7EEEEEEE);
    qd.assign(static_cast<size_t>(T) * H * kDl, 0.0);
  }
  void set_q(int32_t t, int32_t h, int e, double value) {
    const bf16_t b = to_bf16(value);
    if (e < kDc) {
      q_nope[static_cast<size_t>(t * qn_ts + h * qn_hs + e)] = b;
    } else {
      q_pe[static_cast<size_t>(t * qp_ts + h * qp_hs + (e - kDc))] = b;
    }
    qd[(static_cast<size_t>(t) * H + h) * kDl + e] = bf16_value(b);
  }
  int32_t& index(int32_t t, int32_t j) { return indices[static_cast<size_t>(t * idx_stride + j)]; }
};

struct Expected {
  std::vector<double> out;  // [T, H, width]
  std::vector<double> lse;  // [T, H]
};

// docs/semantics.md §4.1 in double over the dequantized cache.
Expected sparse_reference(SparseCase& c, const TestCache& cache) {
  Expected x;
  x.out.assign(static_cast<size_t>(c.T) * c.H * kDc, 0.0);
  x.lse.assign(static_cast<size_t>(c.T) * c.H, -kInf);
  for (int32_t t = 0; t < c.T; ++t) {
    std::vector<const std::vector<double>*> keys;
    for (int32_t j = 0; j < c.topk; ++j) {
      const int64_t slot = c.index(t, j);
      if (slot >= 0 && slot < cache.num_slots()) keys.push_back(&cache.key(slot));
    }
    for (int32_t h = 0; h < c.H; ++h) {
      if (keys.empty()) continue;
      const double* q = &c.qd[(static_cast<size_t>(t) * c.H + h) * kDl];
      std::vector<double> s(keys.size());
      double m = -kInf;
      for (size_t j = 0; j < keys.size(); ++j) {
        double dot = 0.0;
        for (int e = 0; e < kDl; ++e) dot += q[e] * (*keys[j])[static_cast<size_t>(e)];
        s[j] = c.scale * dot;
        m = std::max(m, s[j]);
      }
      double l = 0.0;
      for (double v : s) l += std::exp(v - m);
      double* out = &x.out[(static_cast<size_t>(t) * c.H + h) * kDc];
      for (size_t j = 0; j < keys.size(); ++j) {
        const double p = std::exp(s[j] - m) / l;
        for (int e = 0; e < kDc; ++e) out[e] += p * (*keys[j])[static_cast<size_t>(e)];
      }
      x.lse[static_cast<size_t>(t) * c.H + h] = m + std::log(l);
    }
  }
  return x;
}

struct SparseRun {
  Guarded<bf16_t> out;
  Guarded<float> lse;
  Guarded<float> partial_out;
  Guarded<float> partial_lse;
  mla::Status status;
  SparseRun(const SparseCase& c, const Plan& plan)
      : out(static_cast<size_t>(c.T) * c.H * kDc, kPoisonBf16),
        lse(static_cast<size_t>(c.T) * c.H, kPoisonF32),
        partial_out(static_cast<size_t>(std::max(plan.num_partials, 1)) * c.H * kDc, kNaNF),
        partial_lse(static_cast<size_t>(std::max(plan.num_partials, 1)) * c.H, kNaNF) {}
};

mla::SparseMqaParams sparse_params(SparseCase& c, TestCache& cache, const Plan& plan, SparseRun& r) {
  mla::SparseMqaParams p;
  p.q_nope_lat = c.q_nope.data();
  p.q_nope_token_stride = c.qn_ts;
  p.q_nope_head_stride = c.qn_hs;
  p.q_pe = c.q_pe.data();
  p.q_pe_token_stride = c.qp_ts;
  p.q_pe_head_stride = c.qp_hs;
  p.num_tokens = c.T;
  p.num_heads = c.H;
  p.indices = c.indices.data();
  p.indices_row_stride = c.idx_stride;
  p.topk = c.topk;
  p.cache = cache.view();
  p.scale = c.scale;
  p.out_lat = r.out.data();
  p.lse = r.lse.data();
  p.metadata.items = plan.items.data();
  p.metadata.num_items = static_cast<int32_t>(plan.items.size());
  p.metadata.split_offsets = plan.offsets.data();
  p.metadata.num_tokens_planned = plan.num_tokens;
  p.metadata.num_partials = plan.num_partials;
  p.partial_out = r.partial_out.data();
  p.partial_lse = r.partial_lse.data();
  return p;
}

void expect_matches(SparseCase& c, SparseRun& r, const Expected& x) {
  ASSERT_TRUE(r.out.guards_intact());
  ASSERT_TRUE(r.lse.guards_intact());
  int failures = 0;
  for (int32_t t = 0; t < c.T; ++t) {
    for (int32_t h = 0; h < c.H; ++h) {
      const size_t row = static_cast<size_t>(t) * c.H + h;
      EXPECT_TRUE(lse_close(r.lse[row], x.lse[row])) << "token " << t << " head " << h;
      for (int e = 0; e < kDc && failures < 10; ++e) {
        const auto ok = out_close(bf16_value(r.out[row * kDc + e]), x.out[row * kDc + e]);
        if (!ok) ++failures;
        EXPECT_TRUE(ok) << "token " << t << " head " << h << " element " << e;
      }
    }
  }
}

class HostAttentionTest : public ::testing::Test {
 protected:
  std::unique_ptr<mla::Backend> backend = mla::make_host_backend();
};

TEST_F(HostAttentionTest, DeclaresAttentionSupport) { EXPECT_TRUE(backend->supports_attention()); }

// 1 head, 2 keys, scale 1: key 0 has element 0 = 1, key 1 has element 1 = 2; q = e0 + e1. Scores
// 1 and 2: p = (1/(1+e), e/(1+e)) = (0.268941, 0.731059); out[0] = p0 * 1, out[1] = p1 * 2;
// lse = ln(e + e^2) = 2.313262.
TEST_F(HostAttentionTest, SparseTwoKeysByHand) {
  TestCache cache(2, 4, 4 * kEntryBytes);
  uint8_t codes[512] = {};
  const float scales[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  const bf16_t rope[64] = {};
  codes[0] = 0x38;  // 1.0
  cache.set(5, codes, scales, rope);
  codes[0] = 0x00;
  codes[1] = 0x40;  // 2.0
  cache.set(2, codes, scales, rope);

  SparseCase c;
  c.init(1, 1, 2, 0, 0, 0, 0, 0);
  for (int e = 0; e < kDl; ++e) c.set_q(0, 0, e, e < 2 ? 1.0 : 0.0);
  c.index(0, 0) = 5;
  c.index(0, 1) = 2;
  const Plan plan = make_plan(1, {0, 2});
  SparseRun r(c, plan);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(c, cache, plan, r)).ok());
  EXPECT_TRUE(out_close(bf16_value(r.out[0]), 0.268941));
  EXPECT_TRUE(out_close(bf16_value(r.out[1]), 2 * 0.731059));
  // The precision contract, by hand: p = exp(s - max) = (0.3678794, 1) in fp32, l = 1.3678794;
  // P is rounded to bf16 for P.V (0.3678794 -> 0.3671875), so out[0] = bf16(0.3671875 / l) =
  // bf16(0.268433) = 0.267578125, one bf16 step below the unrounded 0.26953125.
  EXPECT_EQ(bf16_value(r.out[0]), 0.267578125);
  EXPECT_EQ(bf16_value(r.out[1]), 1.4609375);  // bf16(2 / l = 1.462117)
  for (int e = 2; e < kDc; ++e) EXPECT_EQ(r.out[static_cast<size_t>(e)], 0) << e;
  EXPECT_NEAR(r.lse[0], 2.313262, 1e-5);
  EXPECT_TRUE(r.out.guards_intact());
  EXPECT_TRUE(r.lse.guards_intact());
}

// A random case: 3 heads, top-k 150 (a partial last tile), strided q and indices, padded pages,
// invalid indices of every kind mixed in, duplicates, one token with no valid index at all.
struct RandomSparse {
  TestCache cache{12, 16, 16 * kEntryBytes + 48};
  SparseCase c;
  std::vector<int64_t> used;

  explicit RandomSparse(uint32_t seed, float scale = 0.5f) {
    std::mt19937 rng(seed);
    for (int64_t s = 0; s < cache.num_slots(); ++s) {
      if (s % 5 != 3) {  // every fifth slot stays unused (NaN)
        cache.set_random(s, rng);
        used.push_back(s);
      }
    }
    c.init(5, 3, 150, 8, 24, 16, 8, 10);
    c.scale = scale;
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int32_t t = 0; t < c.T; ++t)
      for (int32_t h = 0; h < c.H; ++h)
        for (int e = 0; e < kDl; ++e) c.set_q(t, h, e, u(rng));
    const int32_t invalid[] = {-1, static_cast<int32_t>(cache.num_slots()),
                               static_cast<int32_t>(cache.num_slots()) + 7, INT_MIN, -3};
    std::uniform_int_distribution<size_t> pick(0, used.size() - 1);
    std::uniform_int_distribution<int> kind(0, 9);
    for (int32_t t = 0; t < c.T; ++t) {
      for (int32_t j = 0; j < c.topk; ++j) {
        const int k = kind(rng);
        c.index(t, j) = (t == 3 || k < 2) ? invalid[static_cast<size_t>(j) % 5] : static_cast<int32_t>(used[pick(rng)]);
      }
    }
    c.index(0, 7) = c.index(0, 8);  // a duplicated slot counts twice
  }
};

TEST_F(HostAttentionTest, SparseRandomMatchesDoubleReference) {
  for (uint32_t seed : {1u, 2u}) {
    RandomSparse rs(seed);
    const Plan plan = make_plan(rs.c.T, {0, rs.c.topk});
    SparseRun r(rs.c, plan);
    ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, plan, r)).ok());
    const Expected x = sparse_reference(rs.c, rs.cache);
    expect_matches(rs.c, r, x);
    // Token 3 has no valid index: out 0 (exactly), lse -inf.
    for (int32_t h = 0; h < rs.c.H; ++h) {
      EXPECT_EQ(r.lse[static_cast<size_t>(3 * rs.c.H + h)], -kInfF);
      for (int e = 0; e < kDc; ++e) ASSERT_EQ(r.out[(static_cast<size_t>(3) * rs.c.H + h) * kDc + e], 0);
    }
  }
}

TEST_F(HostAttentionTest, SparseModelScaleMatchesDoubleReference) {
  RandomSparse rs(7, 1.0f / std::sqrt(192.0f));
  const Plan plan = make_plan(rs.c.T, {0, rs.c.topk});
  SparseRun r(rs.c, plan);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, plan, r)).ok());
  expect_matches(rs.c, r, sparse_reference(rs.c, rs.cache));
}

// Scale 100 makes scores of a few hundred: exp() of an unshifted score or LSE overflows fp32, so
// this also checks that the online softmax and the combine subtract their maxima.
class SparseSplitTest : public HostAttentionTest, public ::testing::WithParamInterface<float> {};

TEST_P(SparseSplitTest, SplitPlansAgreeWithUnsplit) {
  RandomSparse rs(3, GetParam());
  // Token 4's first split holds only invalid indices (an empty split: 0, -inf partial).
  for (int32_t j = 0; j < 64; ++j) rs.c.index(4, j) = -1;
  const Plan whole = make_plan(rs.c.T, {0, rs.c.topk});
  SparseRun a(rs.c, whole);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, whole, a)).ok());
  const Expected x = sparse_reference(rs.c, rs.cache);
  for (const std::vector<int32_t>& cuts : {std::vector<int32_t>{0, 64, 128, 150}, std::vector<int32_t>{0, 64, 150},
                                            std::vector<int32_t>{0, 100, 150}}) {
    const Plan split = make_plan(rs.c.T, cuts);
    SparseRun b(rs.c, split);
    ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, split, b)).ok());
    expect_matches(rs.c, b, x);
    ASSERT_TRUE(b.partial_out.guards_intact());
    ASSERT_TRUE(b.partial_lse.guards_intact());
    for (size_t i = 0; i < a.lse.size(); ++i) {
      if (std::isinf(a.lse[i])) {
        EXPECT_EQ(a.lse[i], b.lse[i]) << i;
      } else {
        EXPECT_NEAR(a.lse[i], b.lse[i], 1e-5) << i;
      }
    }
    // Every partial row was written (a split that ran; token 3's are empty: 0 and -inf).
    for (size_t i = 0; i < static_cast<size_t>(split.num_partials) * rs.c.H; ++i) {
      ASSERT_FALSE(std::isnan(b.partial_lse[i])) << "partial " << i / rs.c.H << " not written";
    }
    // Same result up to rounding: the splits differ in fp32 summation order and in the bf16
    // rounding of P, which is taken against each split's own max (2^-9 relative per weight,
    // times values up to ~1, so small outputs can move by a few 1e-4). Allowed: 2 bf16 steps
    // of the value or 1e-3 absolute; the LSEs (no P rounding) agree to 1e-5 above.
    for (size_t i = 0; i < a.out.size(); ++i) {
      const double va = bf16_value(a.out[i]), vb = bf16_value(b.out[i]);
      ASSERT_LE(std::fabs(va - vb), std::max(std::fabs(va) / 64, 1e-3))
          << "element " << i << ", " << cuts.size() - 1 << " splits: " << va << " vs " << vb;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Scales, SparseSplitTest, ::testing::Values(0.5f, 100.0f), [](const auto& p) {
  std::string n = "scale" + std::to_string(p.param);  // "scale0.500000" -> "scale0_5"
  n.erase(n.find_last_not_of('0') + 1);
  if (n.back() == '.') n.pop_back();
  for (auto& ch : n) if (ch == '.') ch = '_';
  return n;
});

// A plan may also send a token's only item to a partial row (offsets [t, t + 1)); the combine
// then copies it through.
TEST_F(HostAttentionTest, SparseSinglePartialIsCombined) {
  RandomSparse rs(13);
  const Plan whole = make_plan(rs.c.T, {0, rs.c.topk});
  Plan single = whole;
  for (size_t t = 0; t < single.items.size(); ++t) single.items[t].partial = static_cast<int32_t>(t);
  for (size_t t = 0; t < single.offsets.size(); ++t) single.offsets[t] = static_cast<int32_t>(t);
  single.num_partials = rs.c.T;
  SparseRun a(rs.c, whole), b(rs.c, single);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, whole, a)).ok());
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, single, b)).ok());
  for (size_t i = 0; i < a.lse.size(); ++i) EXPECT_EQ(a.lse[i], b.lse[i]) << i;
  for (size_t i = 0; i < a.out.size(); ++i) ASSERT_EQ(a.out[i], b.out[i]) << i;
}

TEST_F(HostAttentionTest, SparseInvalidIndicesAreNeverRead) {
  // Only slot 1 and slot 6 hold data; every other byte in and around the pool is NaN. Every
  // invalid kind is present; a read through any of them would make the outputs NaN.
  TestCache cache(2, 4, 4 * kEntryBytes);
  std::mt19937 rng(11);
  cache.set_random(1, rng);
  cache.set_random(6, rng);
  SparseCase c;
  c.init(2, 2, 8, 0, 0, 0, 0, 0);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int32_t t = 0; t < 2; ++t)
    for (int32_t h = 0; h < 2; ++h)
      for (int e = 0; e < kDl; ++e) c.set_q(t, h, e, u(rng));
  const int32_t row0[8] = {-1, 1, 8, INT_MIN, 6, 9, -2, INT_MAX};  // num_slots = 8
  const int32_t row1[8] = {-1, 8, INT_MIN, -1, INT_MAX, -100, 1000, -1};
  for (int j = 0; j < 8; ++j) {
    c.index(0, j) = row0[j];
    c.index(1, j) = row1[j];
  }
  const std::vector<uint8_t> before = cache.memory();
  const Plan plan = make_plan(2, {0, 8});
  SparseRun r(c, plan);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(c, cache, plan, r)).ok());
  const Expected x = sparse_reference(c, cache);
  expect_matches(c, r, x);
  for (size_t i = 0; i < r.out.size(); ++i) ASSERT_FALSE(std::isnan(bf16_value(r.out[i]))) << i;
  for (int32_t h = 0; h < 2; ++h) {
    EXPECT_EQ(r.lse[static_cast<size_t>(2 + h)], -kInfF);  // token 1: nothing valid
    EXPECT_TRUE(std::isfinite(r.lse[static_cast<size_t>(h)]));
  }
  EXPECT_EQ(cache.memory(), before) << "the cache is read only";
}

TEST_F(HostAttentionTest, SparseValidIndexOfANaNEntryShowsNaN) {
  // The other direction of the check above: reading an unused (NaN) entry does show.
  TestCache cache(1, 4, 4 * kEntryBytes);
  std::mt19937 rng(5);
  cache.set_random(0, rng);
  SparseCase c;
  c.init(1, 1, 2, 0, 0, 0, 0, 0);
  for (int e = 0; e < kDl; ++e) c.set_q(0, 0, e, 0.25);
  c.index(0, 0) = 0;
  c.index(0, 1) = 3;  // valid slot, never written: NaN
  const Plan plan = make_plan(1, {0, 2});
  SparseRun r(c, plan);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(c, cache, plan, r)).ok());
  EXPECT_TRUE(std::isnan(bf16_value(r.out[0])));
  EXPECT_TRUE(std::isnan(r.lse[0]));
}

TEST_F(HostAttentionTest, SparseWritesExactlyThePlannedTokens) {
  // Rows come from the metadata: a token no item and no split range names is not written
  // (token 1 here), the others are (split in two, combined).
  RandomSparse rs(9);
  Plan trimmed;
  trimmed.num_tokens = rs.c.T;
  trimmed.offsets.assign(static_cast<size_t>(rs.c.T) + 1, 0);
  for (int32_t t = 0; t < rs.c.T; ++t) {
    trimmed.offsets[static_cast<size_t>(t)] = trimmed.num_partials;
    if (t == 1) continue;
    trimmed.items.push_back({t, 0, 64, trimmed.num_partials});
    trimmed.items.push_back({t, 64, 150, trimmed.num_partials + 1});
    trimmed.num_partials += 2;
  }
  trimmed.offsets[static_cast<size_t>(rs.c.T)] = trimmed.num_partials;
  SparseRun t_run(rs.c, trimmed);
  ASSERT_TRUE(backend->sparse_mqa(sparse_params(rs.c, rs.cache, trimmed, t_run)).ok());
  const Expected x = sparse_reference(rs.c, rs.cache);
  for (int32_t h = 0; h < rs.c.H; ++h) {
    const size_t row1 = static_cast<size_t>(rs.c.H + h);
    EXPECT_EQ(bits_of(t_run.lse[row1]), bits_of(kPoisonF32)) << "token 1 is not in the plan";
    for (int e = 0; e < kDc; ++e) ASSERT_EQ(t_run.out[row1 * kDc + e], kPoisonBf16);
    const size_t row2 = static_cast<size_t>(2 * rs.c.H + h);
    EXPECT_TRUE(lse_close(t_run.lse[row2], x.lse[row2]));
  }
  EXPECT_TRUE(t_run.out.guards_intact());
}

TEST_F(HostAttentionTest, SparseRefusesInvalidParamsWithoutWriting) {
  RandomSparse rs(4);
  const Plan plan = make_plan(rs.c.T, {0, rs.c.topk});
  SparseRun r(rs.c, plan);
  mla::SparseMqaParams p = sparse_params(rs.c, rs.cache, plan, r);
  p.scale = kNaNF;
  const mla::Status s = backend->sparse_mqa(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("scale"), std::string::npos) << s.message();
  for (size_t i = 0; i < r.out.size(); ++i) ASSERT_EQ(r.out[i], kPoisonBf16);
}

// ---- dense MHA ---------------------------------------------------------------------------------

struct DenseCase {
  int32_t H = 0;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  bool causal = true;
  float scale = 0.5f;
  int64_t qn_stride = 0, qp_stride = 0, kn_stride = 0, kp_stride = 0, v_stride = 0;
  std::vector<bf16_t> q_nope, q_pe, k_nope, k_pe, v;

  int64_t total_q() const { return cu_q.back(); }
  int64_t total_k() const { return cu_k.back(); }
  void init(int32_t heads, const std::vector<std::pair<int32_t, int32_t>>& lens, int pad) {
    H = heads;
    for (const auto& [nq, nk] : lens) {
      cu_q.push_back(cu_q.back() + nq);
      cu_k.push_back(cu_k.back() + nk);
    }
    qn_stride = H * kDn + pad;
    qp_stride = H * kDr + pad;
    kn_stride = H * kDn + pad;
    kp_stride = kDl;  // as in gathered cache rows
    v_stride = H * kDv + pad;
    q_nope.assign(static_cast<size_t>(total_q() * qn_stride), 0x7FC0);
    q_pe.assign(static_cast<size_t>(total_q() * qp_stride), 0x7FC0);
    k_nope.assign(static_cast<size_t>(total_k() * kn_stride), 0x7FC0);
    k_pe.assign(static_cast<size_t>(total_k() * kp_stride), 0x7FC0);
    v.assign(static_cast<size_t>(total_k() * v_stride), 0x7FC0);
  }
  bf16_t& qe(int64_t t, int h, int e) {
    return e < kDn ? q_nope[static_cast<size_t>(t * qn_stride + h * kDn + e)]
                   : q_pe[static_cast<size_t>(t * qp_stride + h * kDr + e - kDn)];
  }
  bf16_t& ke(int64_t j, int h, int e) {
    return e < kDn ? k_nope[static_cast<size_t>(j * kn_stride + h * kDn + e)]
                   : k_pe[static_cast<size_t>(j * kp_stride + e - kDn)];
  }
  bf16_t& ve(int64_t j, int h, int e) { return v[static_cast<size_t>(j * v_stride + h * kDv + e)]; }

  void randomize(std::mt19937& rng) {
    // q in [-1, 1]; keys wide enough for a peaked softmax; values ~ N(0, 0.1^2) as docs/semantics.md §8's
    // latent (the bf16 rounding of P moves outputs by ~2^-9 x |v|).
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::normal_distribution<double> key(0.0, 0.3), value(0.0, 0.1);
    for (int64_t t = 0; t < total_q(); ++t)
      for (int h = 0; h < H; ++h)
        for (int e = 0; e < kDqk; ++e) qe(t, h, e) = to_bf16(u(rng));
    for (int64_t j = 0; j < total_k(); ++j)
      for (int h = 0; h < H; ++h) {
        for (int e = 0; e < kDqk; ++e) ke(j, h, e) = to_bf16(key(rng));
        for (int e = 0; e < kDv; ++e) ve(j, h, e) = to_bf16(value(rng));
      }
  }
};

Expected dense_reference(DenseCase& c) {
  Expected x;
  x.out.assign(static_cast<size_t>(c.total_q()) * c.H * kDv, 0.0);
  x.lse.assign(static_cast<size_t>(c.total_q()) * c.H, -kInf);
  for (size_t r = 0; r + 1 < c.cu_q.size(); ++r) {
    const int64_t q0 = c.cu_q[r], nq = c.cu_q[r + 1] - q0, k0 = c.cu_k[r], nk = c.cu_k[r + 1] - k0;
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t last = c.causal ? i + nk - nq : nk - 1;  // keys j <= last are visible
      for (int h = 0; h < c.H; ++h) {
        std::vector<double> s;
        double m = -kInf;
        for (int64_t j = 0; j < nk && j <= last; ++j) {
          double dot = 0.0;
          for (int e = 0; e < kDqk; ++e) dot += bf16_value(c.qe(q0 + i, h, e)) * bf16_value(c.ke(k0 + j, h, e));
          s.push_back(c.scale * dot);
          m = std::max(m, s.back());
        }
        if (s.empty()) continue;
        double l = 0.0;
        for (double v : s) l += std::exp(v - m);
        double* out = &x.out[(static_cast<size_t>(q0 + i) * c.H + h) * kDv];
        for (size_t j = 0; j < s.size(); ++j) {
          const double p = std::exp(s[j] - m) / l;
          for (int e = 0; e < kDv; ++e) out[e] += p * bf16_value(c.ve(k0 + static_cast<int64_t>(j), h, e));
        }
        x.lse[static_cast<size_t>(q0 + i) * c.H + h] = m + std::log(l);
      }
    }
  }
  return x;
}

struct DenseRun {
  Guarded<bf16_t> out;
  Guarded<float> lse;
  explicit DenseRun(const DenseCase& c)
      : out(static_cast<size_t>(c.total_q()) * c.H * kDv, kPoisonBf16), lse(static_cast<size_t>(c.total_q()) * c.H, kPoisonF32) {}
};

mla::DenseMhaParams dense_params(DenseCase& c, DenseRun& r) {
  mla::DenseMhaParams p;
  p.q_nope = c.q_nope.data();
  p.q_nope_stride = c.qn_stride;
  p.q_pe = c.q_pe.data();
  p.q_pe_stride = c.qp_stride;
  p.k_nope = c.k_nope.data();
  p.k_nope_stride = c.kn_stride;
  p.k_pe = c.k_pe.data();
  p.k_pe_stride = c.kp_stride;
  p.v = c.v.data();
  p.v_stride = c.v_stride;
  p.cu_seqlens_q = c.cu_q.data();
  p.cu_seqlens_k = c.cu_k.data();
  p.cu_seqlens_q_host = c.cu_q.data();
  p.cu_seqlens_k_host = c.cu_k.data();
  p.num_reqs = static_cast<int32_t>(c.cu_q.size()) - 1;
  p.num_heads = c.H;
  p.total_q = c.total_q();
  p.total_k = c.total_k();
  p.causal = c.causal;
  p.scale = c.scale;
  p.out = r.out.data();
  p.lse = r.lse.data();
  return p;
}

void expect_dense_matches(DenseRun& r, const Expected& x) {
  ASSERT_TRUE(r.out.guards_intact());
  ASSERT_TRUE(r.lse.guards_intact());
  int failures = 0;
  for (size_t row = 0; row < x.lse.size(); ++row) {
    EXPECT_TRUE(lse_close(r.lse[row], x.lse[row])) << "row " << row;
    for (int e = 0; e < kDv && failures < 10; ++e) {
      const auto ok = out_close(bf16_value(r.out[row * kDv + e]), x.out[row * kDv + e]);
      if (!ok) ++failures;
      EXPECT_TRUE(ok) << "row " << row << " element " << e;
    }
  }
}

// 1 head, 1 query, 2 keys, unmasked, scale 1: scores 1 and 2 as in SparseTwoKeysByHand, values
// e0 and 2 e1. Causal with 2 queries and 2 keys: query 0 sees key 0 only (out = v0, lse = s00).
TEST_F(HostAttentionTest, DenseTwoKeysByHand) {
  DenseCase c;
  c.init(1, {{1, 2}}, 0);
  c.causal = false;
  c.scale = 1.0f;
  for (int e = 0; e < kDqk; ++e) {
    c.qe(0, 0, e) = to_bf16(e == 0 ? 1.0 : 0.0);
    c.ke(0, 0, e) = to_bf16(e == 0 ? 1.0 : 0.0);
    c.ke(1, 0, e) = to_bf16(e == 0 ? 2.0 : 0.0);
  }
  for (int e = 0; e < kDv; ++e) {
    c.ve(0, 0, e) = to_bf16(e == 0 ? 1.0 : 0.0);
    c.ve(1, 0, e) = to_bf16(e == 1 ? 2.0 : 0.0);
  }
  DenseRun r(c);
  ASSERT_TRUE(backend->dense_mha(dense_params(c, r)).ok());
  EXPECT_TRUE(out_close(bf16_value(r.out[0]), 0.268941));
  EXPECT_TRUE(out_close(bf16_value(r.out[1]), 2 * 0.731059));
  EXPECT_EQ(bf16_value(r.out[0]), 0.267578125);  // P rounded to bf16, as in SparseTwoKeysByHand
  EXPECT_EQ(bf16_value(r.out[1]), 1.4609375);
  for (int e = 2; e < kDv; ++e) EXPECT_EQ(r.out[static_cast<size_t>(e)], 0) << e;
  EXPECT_NEAR(r.lse[0], 2.313262, 1e-5);

  DenseCase k;
  k.init(1, {{2, 2}}, 0);
  k.scale = 1.0f;
  for (int e = 0; e < kDqk; ++e) {
    for (int t = 0; t < 2; ++t) k.qe(t, 0, e) = to_bf16(e == 0 ? 1.0 : 0.0);
    k.ke(0, 0, e) = to_bf16(e == 0 ? 0.5 : 0.0);
    k.ke(1, 0, e) = to_bf16(e == 0 ? 3.0 : 0.0);
  }
  for (int e = 0; e < kDv; ++e) {
    k.ve(0, 0, e) = to_bf16(e == 0 ? 1.5 : 0.0);
    k.ve(1, 0, e) = to_bf16(e == 1 ? 1.0 : 0.0);
  }
  DenseRun rk(k);
  ASSERT_TRUE(backend->dense_mha(dense_params(k, rk)).ok());
  EXPECT_EQ(bf16_value(rk.out[0]), 1.5);
  for (int e = 1; e < kDv; ++e) EXPECT_EQ(rk.out[static_cast<size_t>(e)], 0) << e;
  EXPECT_NEAR(rk.lse[0], 0.5, 1e-6);
  // Query 1 sees both: scores 0.5 and 3, p1 = 1 / (1 + e^-2.5) = 0.924142.
  EXPECT_TRUE(out_close(bf16_value(rk.out[kDv + 0]), 1.5 * (1 - 0.924142)));
  EXPECT_TRUE(out_close(bf16_value(rk.out[kDv + 1]), 0.924142));
  EXPECT_NEAR(rk.lse[1], 3.0 + std::log1p(std::exp(-2.5)), 1e-5);
}

TEST_F(HostAttentionTest, DenseCausalRandomMatchesDoubleReference) {
  // Requests: equal lengths, a single query over many keys, more than one tile of queries and
  // keys (context + new), and empty ones.
  DenseCase c;
  c.init(2, {{5, 5}, {1, 70}, {0, 0}, {70, 130}, {0, 9}, {3, 3}}, 24);
  std::mt19937 rng(21);
  c.randomize(rng);
  DenseRun r(c);
  ASSERT_TRUE(backend->dense_mha(dense_params(c, r)).ok());
  expect_dense_matches(r, dense_reference(c));
}

TEST_F(HostAttentionTest, DenseUnmaskedRandomMatchesDoubleReference) {
  DenseCase c;
  c.init(3, {{4, 100}, {7, 0}, {20, 3}, {2, 65}}, 0);
  c.causal = false;
  c.scale = 1.0f / std::sqrt(192.0f);
  std::mt19937 rng(22);
  c.randomize(rng);
  DenseRun r(c);
  ASSERT_TRUE(backend->dense_mha(dense_params(c, r)).ok());
  expect_dense_matches(r, dense_reference(c));
  // Request 1 has no keys: out 0, lse -inf.
  for (int64_t t = 4; t < 11; ++t)
    for (int h = 0; h < 3; ++h) {
      EXPECT_EQ(r.lse[static_cast<size_t>(t * 3 + h)], -kInfF);
      for (int e = 0; e < kDv; ++e) ASSERT_EQ(r.out[(static_cast<size_t>(t) * 3 + h) * kDv + e], 0);
    }
}

TEST_F(HostAttentionTest, DenseCausalBoundaryIsBottomRight) {
  // nq = 3, nk = 7: query i sees keys 0 .. i + 4. Key j's value is the unit vector e_j, so
  // out element j is nonzero exactly when key j is visible.
  DenseCase c;
  c.init(1, {{3, 7}}, 0);
  std::mt19937 rng(3);
  c.randomize(rng);
  for (int64_t j = 0; j < 7; ++j)
    for (int e = 0; e < kDv; ++e) c.ve(j, 0, e) = to_bf16(e == j ? 1.0 : 0.0);
  DenseRun r(c);
  ASSERT_TRUE(backend->dense_mha(dense_params(c, r)).ok());
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 7; ++j) {
      const double v = bf16_value(r.out[static_cast<size_t>(i) * kDv + j]);
      if (j <= i + 4) {
        EXPECT_GT(v, 0.0) << "query " << i << " must see key " << j;
      } else {
        EXPECT_EQ(v, 0.0) << "query " << i << " must not see key " << j;
      }
    }
  }
  expect_dense_matches(r, dense_reference(c));
}

TEST_F(HostAttentionTest, DenseMaskedKeysAreNeverUsed) {
  // Keys past a query's boundary hold NaN in k and v: the visible outputs stay finite.
  DenseCase c;
  c.init(1, {{2, 66}}, 0);
  std::mt19937 rng(8);
  c.randomize(rng);
  for (int e = 0; e < kDqk; ++e) c.ke(65, 0, e) = 0x7FC0;  // only query 1 sees key 65
  for (int e = 0; e < kDv; ++e) c.ve(65, 0, e) = 0x7FC0;
  DenseRun r(c);
  ASSERT_TRUE(backend->dense_mha(dense_params(c, r)).ok());
  for (int e = 0; e < kDv; ++e) {
    EXPECT_FALSE(std::isnan(bf16_value(r.out[static_cast<size_t>(e)]))) << e;
    EXPECT_TRUE(std::isnan(bf16_value(r.out[static_cast<size_t>(kDv + e)]))) << e;
  }
  EXPECT_TRUE(std::isfinite(r.lse[0]));
}

// host::dense_mha's softmax step: 64 keys (the host backend, the `simple` and `tc` kernels) and
// 128 (the Hopper `wgmma` kernel, whose test compares it with this step) both match the double
// reference, at the model's scale and at peaked ones (scale 1 and 2, where P's bf16 rounding weighs
// most); the two steps give different bits (so the step reaches the computation), and the host
// backend runs the 64-key step.
TEST_F(HostAttentionTest, DenseSoftmaxStepsBothMatchDoubleReference) {
  for (const float scale : {0.0721688f, 1.0f, 2.0f}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    DenseCase c;
    c.init(2, {{40, 300}, {130, 130}, {1, 129}}, 8);
    c.scale = scale;
    std::mt19937 rng(31);
    c.randomize(rng);
    DenseRun r64(c), r128(c), rb(c);
    mla::host::dense_mha(dense_params(c, r64), 64);
    mla::host::dense_mha(dense_params(c, r128), 128);
    ASSERT_TRUE(backend->dense_mha(dense_params(c, rb)).ok());
    const Expected x = dense_reference(c);
    expect_dense_matches(r64, x);
    expect_dense_matches(r128, x);
    int differing = 0;
    for (size_t i = 0; i < x.out.size(); ++i) {
      differing += r64.out[i] != r128.out[i];
      ASSERT_EQ(rb.out[i], r64.out[i]) << "host backend, element " << i;
    }
    EXPECT_GT(differing, 0) << "the 64- and 128-key steps gave the same bits";
  }
}

// ---- GEMM --------------------------------------------------------------------------------------

struct GemmCase {
  int64_t m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c;
  int32_t batch;
  bool transpose_b;
};

void run_gemm_case(mla::Backend& backend, const GemmCase& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const int64_t b_rows = g.transpose_b ? g.n : g.k;
  const size_t a_size = static_cast<size_t>((g.batch - 1) * g.stride_a + g.m * g.lda);
  const size_t b_size = static_cast<size_t>((g.batch - 1) * g.stride_b + b_rows * g.ldb);
  const size_t c_size = static_cast<size_t>((g.batch - 1) * g.stride_c + g.m * g.ldc);
  std::vector<bf16_t> a(a_size), b(b_size);
  for (bf16_t& x : a) x = to_bf16(u(rng));
  for (bf16_t& x : b) x = to_bf16(u(rng));
  Guarded<bf16_t> c(c_size, kPoisonBf16);
  mla::GemmParams p;
  p.a = a.data();
  p.lda = g.lda;
  p.stride_a = g.stride_a;
  p.b = b.data();
  p.ldb = g.ldb;
  p.stride_b = g.stride_b;
  p.transpose_b = g.transpose_b;
  p.c = c.data();
  p.ldc = g.ldc;
  p.stride_c = g.stride_c;
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.batch = g.batch;
  const mla::Status s = backend.gemm(p);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(c.guards_intact());
  std::vector<bool> written(c_size, false);
  for (int32_t bt = 0; bt < g.batch; ++bt) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double sum = 0.0, mag = 0.0;
        for (int64_t kk = 0; kk < g.k; ++kk) {
          const double av = bf16_value(a[static_cast<size_t>(bt * g.stride_a + i * g.lda + kk)]);
          const double bv = bf16_value(g.transpose_b ? b[static_cast<size_t>(bt * g.stride_b + j * g.ldb + kk)]
                                                     : b[static_cast<size_t>(bt * g.stride_b + kk * g.ldb + j)]);
          sum += av * bv;
          mag += std::fabs(av * bv);
        }
        const size_t at = static_cast<size_t>(bt * g.stride_c + i * g.ldc + j);
        written[at] = true;
        // bf16 output rounding (2^-9 relative) plus fp32 accumulation error.
        const double tol = std::fabs(sum) / 256 + 1e-5 * mag;
        ASSERT_NEAR(bf16_value(c[at]), sum, tol) << "batch " << bt << " row " << i << " col " << j;
      }
    }
  }
  for (size_t i = 0; i < c_size; ++i) {
    if (!written[i]) {
      ASSERT_EQ(c[i], kPoisonBf16) << "padding element " << i << " was written";
    }
  }
}

TEST_F(HostAttentionTest, GemmMatchesDoubleLoop) {
  // {m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch, transpose_b}
  run_gemm_case(*backend, {7, 13, 9, 9, 13, 13, 63, 117, 91, 1, false}, 1);
  run_gemm_case(*backend, {7, 13, 9, 11, 15, 17, 80, 140, 120, 3, false}, 2);
  run_gemm_case(*backend, {5, 13, 9, 12, 10, 14, 60, 140, 70, 3, true}, 3);
  // The pipeline's shapes: A shared by every batch (stride_a 0), C side by side in its rows.
  run_gemm_case(*backend, {6, 128, 512, 576, 512, 3 * 128, 0, 128 * 512, 128, 3, true}, 4);
  run_gemm_case(*backend, {3, 512, 128, 2 * 128, 512, 2 * 512, 128, 128 * 512, 512, 2, false}, 5);
  // One shared B (stride_b 0).
  run_gemm_case(*backend, {9, 5, 4, 4, 5, 5, 36, 0, 45, 4, false}, 6);
}

TEST_F(HostAttentionTest, GemmSmallIntegersAreExact) {
  // [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]]; B^T given: same product.
  const bf16_t a[4] = {to_bf16(1), to_bf16(2), to_bf16(3), to_bf16(4)};
  const bf16_t b[4] = {to_bf16(5), to_bf16(6), to_bf16(7), to_bf16(8)};
  const bf16_t bt[4] = {to_bf16(5), to_bf16(7), to_bf16(6), to_bf16(8)};
  for (bool transpose : {false, true}) {
    bf16_t c[4] = {};
    mla::GemmParams p;
    p.a = a;
    p.lda = 2;
    p.b = transpose ? bt : b;
    p.ldb = 2;
    p.transpose_b = transpose;
    p.c = c;
    p.ldc = 2;
    p.m = p.n = p.k = 2;
    ASSERT_TRUE(backend->gemm(p).ok());
    EXPECT_EQ(bf16_value(c[0]), 19);
    EXPECT_EQ(bf16_value(c[1]), 22);
    EXPECT_EQ(bf16_value(c[2]), 43);
    EXPECT_EQ(bf16_value(c[3]), 50);
  }
}

// ---- merge -------------------------------------------------------------------------------------

struct MergeRun {
  std::vector<bf16_t> a, b;
  std::vector<float> la, lb;
  Guarded<bf16_t> out;
  Guarded<float> lse;
  int32_t width;
  MergeRun(int64_t rows, int32_t w)
      : a(static_cast<size_t>(rows * w)), b(static_cast<size_t>(rows * w)), la(static_cast<size_t>(rows)),
        lb(static_cast<size_t>(rows)), out(static_cast<size_t>(rows * w), kPoisonBf16),
        lse(static_cast<size_t>(rows), kPoisonF32), width(w) {}
  mla::MergeParams params() {
    mla::MergeParams p;
    p.out_a = a.data();
    p.lse_a = la.data();
    p.out_b = b.data();
    p.lse_b = lb.data();
    p.out = out.data();
    p.lse = lse.data();
    p.rows = static_cast<int64_t>(la.size());
    p.width = width;
    return p;
  }
};

TEST_F(HostAttentionTest, MergeIdentities) {
  // Rows: b is -inf | a is -inf | both -inf | b NaN | a +inf | equal LSEs. The out of a side
  // that does not count is NaN, so using it would show.
  MergeRun m(6, 3);
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (bf16_t& x : m.a) x = to_bf16(u(rng));
  for (bf16_t& x : m.b) x = to_bf16(u(rng));
  const float la[6] = {1.5f, -kInfF, -kInfF, 0.25f, kInfF, 2.0f};
  const float lb[6] = {-kInfF, -3.0f, -kInfF, kNaNF, 4.0f, 2.0f};
  for (int r = 0; r < 6; ++r) {
    m.la[static_cast<size_t>(r)] = la[r];
    m.lb[static_cast<size_t>(r)] = lb[r];
  }
  for (int e = 0; e < 3; ++e) {
    m.b[static_cast<size_t>(0 * 3 + e)] = 0x7FC0;
    m.a[static_cast<size_t>(1 * 3 + e)] = 0x7FC0;
    m.b[static_cast<size_t>(3 * 3 + e)] = 0x7FC0;
    m.a[static_cast<size_t>(4 * 3 + e)] = 0x7FC0;
  }
  ASSERT_TRUE(backend->merge(m.params()).ok());
  for (int e = 0; e < 3; ++e) {
    const size_t i = static_cast<size_t>(e);
    EXPECT_EQ(m.out[0 * 3 + i], m.a[0 * 3 + i]);
    EXPECT_EQ(m.out[1 * 3 + i], m.b[1 * 3 + i]);
    EXPECT_EQ(m.out[2 * 3 + i], m.a[2 * 3 + i]);  // both -inf: out_a as is
    EXPECT_EQ(m.out[3 * 3 + i], m.a[3 * 3 + i]);
    EXPECT_EQ(m.out[4 * 3 + i], m.b[4 * 3 + i]);
    EXPECT_TRUE(out_close(bf16_value(m.out[5 * 3 + i]), (bf16_value(m.a[15 + i]) + bf16_value(m.b[15 + i])) / 2));
  }
  EXPECT_EQ(m.lse[0], 1.5f);
  EXPECT_EQ(m.lse[1], -3.0f);
  EXPECT_EQ(m.lse[2], -kInfF);
  EXPECT_EQ(m.lse[3], 0.25f);
  EXPECT_EQ(m.lse[4], 4.0f);
  EXPECT_NEAR(m.lse[5], 2.0 + std::log(2.0), 1e-6);
  EXPECT_TRUE(m.out.guards_intact());
  EXPECT_TRUE(m.lse.guards_intact());
}

TEST_F(HostAttentionTest, MergeRandomMatchesDoubleInPlace) {
  for (int32_t width : {128, 512}) {
    const int64_t rows = 9;
    MergeRun m(rows, width);
    std::mt19937 rng(static_cast<uint32_t>(width));
    std::uniform_real_distribution<double> u(-1.0, 1.0), l(-6.0, 6.0);
    for (bf16_t& x : m.a) x = to_bf16(u(rng));
    for (bf16_t& x : m.b) x = to_bf16(u(rng));
    for (float& x : m.la) x = static_cast<float>(l(rng));
    for (float& x : m.lb) x = static_cast<float>(l(rng));
    std::vector<double> want(m.a.size()), want_lse(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const double a = m.la[static_cast<size_t>(r)], b = m.lb[static_cast<size_t>(r)];
      const double mx = std::max(a, b), wa = std::exp(a - mx), wb = std::exp(b - mx);
      want_lse[static_cast<size_t>(r)] = mx + std::log(wa + wb);
      for (int e = 0; e < width; ++e) {
        const size_t i = static_cast<size_t>(r * width + e);
        want[i] = (wa * bf16_value(m.a[i]) + wb * bf16_value(m.b[i])) / (wa + wb);
      }
    }
    // In place: out = out_a, lse = lse_a (the pipeline's use).
    mla::MergeParams p = m.params();
    p.out = m.a.data();
    p.lse = m.la.data();
    ASSERT_TRUE(backend->merge(p).ok());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(out_close(bf16_value(m.a[i]), want[i])) << i;
    for (size_t r = 0; r < want_lse.size(); ++r) EXPECT_TRUE(lse_close(m.la[r], want_lse[r])) << r;
  }
}

// ---- validate() --------------------------------------------------------------------------------

// The call fails and its message names `field`.
#define EXPECT_REFUSED(status_expr, field)                                        \
  do {                                                                            \
    const mla::Status s_ = (status_expr);                                         \
    EXPECT_FALSE(s_.ok()) << "expected a refusal naming " << (field);             \
    EXPECT_NE(s_.message().find(field), std::string::npos) << s_.message();       \
  } while (0)

TEST_F(HostAttentionTest, GemmValidateNamesTheProblem) {
  bf16_t a[64] = {}, b[64] = {}, c[64] = {};
  mla::GemmParams ok;
  ok.a = a;
  ok.lda = 4;
  ok.b = b;
  ok.ldb = 4;
  ok.c = c;
  ok.ldc = 4;
  ok.m = ok.n = ok.k = 4;
  ok.batch = 1;
  ASSERT_TRUE(ok.validate().ok()) << ok.validate().message();
  auto with = [&](auto change) {
    mla::GemmParams p = ok;
    change(p);
    return p.validate();
  };
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.n = 0; }), "GemmParams: n");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.k = -1; }), "GemmParams: k");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.m = -1; }), "GemmParams: m");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.batch = -2; }), "batch");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.lda = 3; }), "lda");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.ldc = 3; }), "ldc");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.n = 6; }), "ldb");  // ldb 4 < n
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.transpose_b = true; p.k = 6; p.lda = 6; }), "ldb");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.a = nullptr; }), "GemmParams: a is null");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.c = nullptr; }), "c is null");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.stride_b = -1; }), "stride_b");
  EXPECT_REFUSED(with([](mla::GemmParams& p) { p.batch = 2; p.stride_c = 8; }), "overlap");
  EXPECT_TRUE(with([](mla::GemmParams& p) { p.batch = 2; p.stride_c = 16; p.stride_a = 16; }).ok());
  EXPECT_TRUE(with([](mla::GemmParams& p) { p.batch = 2; p.n = 2; p.stride_c = 2; }).ok());  // side by side
  EXPECT_TRUE(with([](mla::GemmParams& p) { p.m = 0; p.a = p.b = nullptr; p.c = nullptr; }).ok());
}

TEST_F(HostAttentionTest, SparseValidateNamesTheProblem) {
  RandomSparse rs(12);
  const Plan plan = make_plan(rs.c.T, {0, 64, rs.c.topk});
  SparseRun r(rs.c, plan);
  const mla::SparseMqaParams ok = sparse_params(rs.c, rs.cache, plan, r);
  ASSERT_TRUE(ok.validate().ok()) << ok.validate().message();
  auto with = [&](auto change) {
    mla::SparseMqaParams p = ok;
    change(p);
    return p.validate();
  };
  using P = mla::SparseMqaParams;
  EXPECT_REFUSED(with([](P& p) { p.num_tokens = -1; }), "num_tokens");
  EXPECT_REFUSED(with([](P& p) { p.num_heads = 0; }), "num_heads");
  EXPECT_REFUSED(with([](P& p) { p.topk = 0; }), "topk");
  EXPECT_REFUSED(with([](P& p) { p.indices_row_stride = p.topk - 1; }), "indices_row_stride");
  EXPECT_REFUSED(with([](P& p) { p.q_nope_head_stride = 511; }), "q_nope_head_stride");
  EXPECT_REFUSED(with([](P& p) { p.q_nope_token_stride = 2 * p.q_nope_head_stride + 511; }), "q_nope_token_stride");
  EXPECT_REFUSED(with([](P& p) { p.q_pe_head_stride = 63; }), "q_pe_head_stride");
  EXPECT_REFUSED(with([](P& p) { p.q_pe_token_stride = 10; }), "q_pe_token_stride");
  EXPECT_REFUSED(with([](P& p) { p.scale = 0.0f; }), "scale");
  EXPECT_REFUSED(with([](P& p) { p.scale = -1.0f; }), "scale");
  EXPECT_REFUSED(with([](P& p) { p.scale = kInfF; }), "scale");
  EXPECT_REFUSED(with([](P& p) { p.cache.block_size = 0; }), "SparseMqaParams.cache");
  EXPECT_REFUSED(with([](P& p) { p.cache.page_stride_bytes = 100; }), "page_stride_bytes");
  EXPECT_REFUSED(with([](P& p) { p.q_nope_lat = nullptr; }), "q_nope_lat is null");
  EXPECT_REFUSED(with([](P& p) { p.q_pe = nullptr; }), "q_pe is null");
  EXPECT_REFUSED(with([](P& p) { p.indices = nullptr; }), "indices is null");
  EXPECT_REFUSED(with([](P& p) { p.out_lat = nullptr; }), "out_lat is null");
  EXPECT_REFUSED(with([](P& p) { p.lse = nullptr; }), "lse is null");
  EXPECT_REFUSED(with([](P& p) { p.metadata.items = nullptr; }), "metadata.items");
  EXPECT_REFUSED(with([](P& p) { p.metadata.num_items = -1; }), "metadata.num_items");
  EXPECT_REFUSED(with([](P& p) { p.metadata.split_offsets = nullptr; }), "metadata.split_offsets");
  EXPECT_REFUSED(with([](P& p) { p.metadata.num_partials = -1; }), "metadata.num_partials");
  EXPECT_REFUSED(with([](P& p) { p.partial_out = nullptr; }), "partial_out");
  EXPECT_REFUSED(with([](P& p) { p.partial_lse = nullptr; }), "partial_lse");
  // No tokens but work items: the items name rows that q does not have.
  EXPECT_REFUSED(with([](P& p) { p.num_tokens = 0; p.metadata.num_tokens_planned = 0; }),
                 "but num_tokens is 0 (work items for tokens");
  // A plan for more (failure mode 4, docs/semantics.md §6.4) or fewer tokens than q has.
  EXPECT_REFUSED(with([](P& p) { p.num_tokens = 2; }), "metadata.num_tokens_planned is 5 but num_tokens is 2");
  EXPECT_REFUSED(with([](P& p) { p.metadata.num_tokens_planned = 6; }), "docs/semantics.md §6.4");
  EXPECT_TRUE(with([](P& p) { p.metadata.num_partials = 0; p.partial_out = nullptr; p.partial_lse = nullptr; }).ok());
}

TEST_F(HostAttentionTest, DenseValidateNamesTheProblem) {
  DenseCase c;
  c.init(2, {{3, 5}, {2, 2}}, 8);
  DenseRun r(c);
  const mla::DenseMhaParams ok = dense_params(c, r);
  ASSERT_TRUE(ok.validate().ok()) << ok.validate().message();
  auto with = [&](auto change) {
    mla::DenseMhaParams p = ok;
    change(p);
    return p.validate();
  };
  using P = mla::DenseMhaParams;
  EXPECT_REFUSED(with([](P& p) { p.num_heads = 0; }), "num_heads");
  EXPECT_REFUSED(with([](P& p) { p.num_reqs = -1; }), "num_reqs");
  EXPECT_REFUSED(with([](P& p) { p.q_nope_stride = 255; }), "q_nope_stride");
  EXPECT_REFUSED(with([](P& p) { p.q_pe_stride = 127; }), "q_pe_stride");
  EXPECT_REFUSED(with([](P& p) { p.k_nope_stride = 200; }), "k_nope_stride");
  EXPECT_REFUSED(with([](P& p) { p.k_pe_stride = 63; }), "k_pe_stride");
  EXPECT_REFUSED(with([](P& p) { p.v_stride = 128; }), "v_stride");
  EXPECT_REFUSED(with([](P& p) { p.scale = kNaNF; }), "scale");
  EXPECT_REFUSED(with([](P& p) { p.k_pe = nullptr; }), "k_pe is null");
  EXPECT_REFUSED(with([](P& p) { p.out = nullptr; }), "out is null");
  EXPECT_REFUSED(with([](P& p) { p.cu_seqlens_q_host = nullptr; }), "cu_seqlens_q_host");
  EXPECT_REFUSED(with([](P& p) { p.cu_seqlens_k = nullptr; }), "cu_seqlens_k");
  EXPECT_REFUSED(with([](P& p) { p.total_q = 4; }), "total_q");
  EXPECT_REFUSED(with([](P& p) { p.total_k = 8; }), "total_k");
  EXPECT_REFUSED(with([](P& p) { p.num_reqs = 0; }), "num_reqs is 0");
  const int32_t bad_start[] = {1, 3, 5};
  EXPECT_REFUSED(with([&](P& p) { p.cu_seqlens_q_host = bad_start; }), "cu_seqlens_q_host[0]");
  const int32_t decreasing[] = {0, 6, 5};
  EXPECT_REFUSED(with([&](P& p) { p.cu_seqlens_q_host = decreasing; p.total_q = 5; }), "decreases");
  const int32_t more_q[] = {0, 4, 5};  // request 0: 4 queries over 5 keys ok; request 1: 1 over 2 ok
  EXPECT_TRUE(with([&](P& p) { p.cu_seqlens_q_host = more_q; }).ok());
  const int32_t too_many_q[] = {0, 2, 5};  // request 1: 3 queries over 2 keys
  EXPECT_REFUSED(with([&](P& p) { p.cu_seqlens_q_host = too_many_q; }), "causal request 1");
  EXPECT_TRUE(with([&](P& p) { p.cu_seqlens_q_host = too_many_q; p.causal = false; }).ok());
}

TEST_F(HostAttentionTest, MergeValidateNamesTheProblem) {
  MergeRun m(2, 4);
  const mla::MergeParams ok = m.params();
  ASSERT_TRUE(ok.validate().ok());
  auto with = [&](auto change) {
    mla::MergeParams p = ok;
    change(p);
    return p.validate();
  };
  using P = mla::MergeParams;
  EXPECT_REFUSED(with([](P& p) { p.rows = -1; }), "rows");
  EXPECT_REFUSED(with([](P& p) { p.width = 0; }), "width");
  EXPECT_REFUSED(with([](P& p) { p.out_a = nullptr; }), "out_a is null");
  EXPECT_REFUSED(with([](P& p) { p.lse_b = nullptr; }), "lse_b is null");
  EXPECT_REFUSED(with([](P& p) { p.out = nullptr; }), "MergeParams: out is null");
  EXPECT_REFUSED(with([](P& p) { p.lse = nullptr; }), "MergeParams: lse is null");
  EXPECT_TRUE(with([](P& p) { p.rows = 0; p.out = nullptr; p.lse = nullptr; }).ok());
  // A refused merge writes nothing.
  mla::MergeParams bad = ok;
  bad.width = -3;
  ASSERT_FALSE(backend->merge(bad).ok());
  for (size_t i = 0; i < m.out.size(); ++i) ASSERT_EQ(m.out[i], kPoisonBf16);
}

}  // namespace
