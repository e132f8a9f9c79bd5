// The CUDA backend's attention operations (gemm, sparse_mqa, dense_mha, merge) against the host
// backend on random inputs, and the CUDA implementations of sparse MQA / dense MHA (`wgmma`, the
// default on Hopper, which falls back to `tc` elsewhere, `tc` and `simple`; chosen through the
// backend's KernelPolicy) against the host and each other. The two
// backends sum in different orders, so outputs are compared with the tolerance of docs/semantics.md §8 (abs 1e-3
// OR rel 2e-2 per element, LSE abs 1e-4); NaN and infinity positions must match. Every buffer
// lives on both backends with guard zones on both sides that must be unchanged afterwards, outputs
// are poisoned first, inputs must be unchanged. Shapes cover head counts 16 / 32 / 64 / 128 (not
// multiples of the 64-head tile too), top-k 64..16384, split and unsplit work plans, invalid
// indices (-1, INT_MIN, past the pool), rows and tiles without a valid index, misaligned query
// strides, causal and unmasked varlen batches, requests without queries or keys, every LSE merge
// case and in-place merges. Uses the Backend interface.
//
// Without a usable CUDA device (always the case on CI) every test is skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/kernels/cuda/require_cuda.h"

#if defined(MLA_HAVE_CUDA) && MLA_HAVE_CUDA

#include "kernels/common/attention_params.h"
#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/mla_dims.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/dense_mha/dense_mha_config.h"
#include "kernels/cuda/dense_mha/dense_mha_launcher.h"
#include "kernels/cuda/sparse_mqa/sparse_mqa_launcher.h"
#include "kernels/kernel_policy.h"
#include "kernels/host/host_kernels.h"
#include "lib/batch/rng.h"
#include "lib/pipeline/sparse_mqa_plan.h"

namespace {

using mla::Backend;
using mla::bf16_t;
using mla::DsMlaEntry;
using mla::Rng;
using mla::Status;

using mla::kDc;
using mla::kDl;
using mla::kDn;
using mla::kDr;
using mla::kDv;
constexpr int kEntry = DsMlaEntry::kBytes;
constexpr std::size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kPoisonByte = 0xEE;  // bf16 0xEEEE / fp32 0xEEEEEEEE: finite, never a result
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

void require(const Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.message());
}

enum Side { kHost = 0, kCuda = 1 };

int device_of(Backend& cuda) { return dynamic_cast<mla::CudaBackend&>(cuda).device(); }

// The CUDA backend's policy with one change (the operations issued afterwards follow it).
template <typename Change>
void set_policy(Backend& cuda, Change&& change) {
  mla::KernelPolicy policy;
  change(policy);
  dynamic_cast<mla::CudaBackend&>(cuda).set_kernel_policy(policy);
}

// The same bytes on the host and the CUDA backend: [guard | payload | guard]. The payload starts
// 256-byte aligned plus `shift` bytes.
class Dual {
 public:
  Dual(Backend& host, Backend& cuda, const void* payload, std::size_t bytes, std::size_t shift = 0)
      : backends_{&host, &cuda}, offset_(kGuard + shift), bytes_(bytes) {
    image_.assign(offset_ + bytes_ + kGuard, kGuardByte);
    if (bytes_ > 0) std::memcpy(image_.data() + offset_, payload, bytes_);
    for (int s = 0; s < 2; ++s) {
      require(backends_[s]->allocate(image_.size(), &base_[s]), "allocate");
      require(backends_[s]->copy_to_device(base_[s], image_.data(), image_.size()), "copy_to_device");
    }
  }
  template <typename T>
  static std::unique_ptr<Dual> of(Backend& host, Backend& cuda, const std::vector<T>& v, std::size_t shift = 0) {
    return std::make_unique<Dual>(host, cuda, v.data(), v.size() * sizeof(T), shift);
  }
  // An output of `bytes` poisoned bytes.
  static std::unique_ptr<Dual> poisoned(Backend& host, Backend& cuda, std::size_t bytes, std::size_t shift = 0) {
    std::vector<uint8_t> p(bytes, kPoisonByte);
    return std::make_unique<Dual>(host, cuda, p.data(), p.size(), shift);
  }
  ~Dual() {
    for (int s = 0; s < 2; ++s) backends_[s]->release(base_[s]);
  }
  Dual(const Dual&) = delete;
  Dual& operator=(const Dual&) = delete;

  template <typename T>
  T* ptr(int side) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(base_[side]) + offset_);
  }

  // Re-poisons / restores the payload on the CUDA side only (between CUDA runs).
  void reset_cuda() { require(backends_[kCuda]->copy_to_device(base_[kCuda], image_.data(), image_.size()), "reset"); }

  // The payload as a backend holds it now; a failure is added when a guard byte changed.
  template <typename T>
  std::vector<T> read(int side, const std::string& name) const {
    std::vector<uint8_t> img(image_.size());
    require(backends_[side]->copy_to_host(img.data(), base_[side], img.size()), "copy_to_host");
    std::size_t changed = 0;
    for (std::size_t i = 0; i < img.size(); ++i) {
      if ((i < offset_ || i >= offset_ + bytes_) && img[i] != image_[i]) ++changed;
    }
    EXPECT_EQ(changed, 0u) << name << " (" << (side == kHost ? "host" : "cuda") << "): guard bytes changed";
    std::vector<T> out(bytes_ / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), img.data() + offset_, out.size() * sizeof(T));
    return out;
  }

  void expect_unchanged(const std::string& name) const {
    for (int side : {kHost, kCuda}) {
      std::vector<uint8_t> img(image_.size());
      require(backends_[side]->copy_to_host(img.data(), base_[side], img.size()), "copy_to_host");
      EXPECT_TRUE(img == image_) << name << " (" << (side == kHost ? "host" : "cuda") << ") was modified";
    }
  }

 private:
  Backend* backends_[2];
  void* base_[2] = {nullptr, nullptr};
  std::size_t offset_, bytes_;
  std::vector<uint8_t> image_;
};

// --- comparisons ----------------------------------------------------------------------------------

bool close_enough(double ref, double got, double abs_tol, double rel_tol) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got);
  if (std::isinf(ref) || std::isinf(got)) return ref == got;
  const double d = std::fabs(ref - got);
  return d <= abs_tol || d <= rel_tol * std::fabs(ref);
}

void expect_close_bf16(const std::vector<bf16_t>& ref, const std::vector<bf16_t>& got, const std::string& what,
                       double abs_tol = 1e-3, double rel_tol = 2e-2) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double r = mla::bf16_to_f32(ref[i]), g = mla::bf16_to_f32(got[i]);
    if (!close_enough(r, g, abs_tol, rel_tol) && bad++ == 0) first = i;
  }
  if (bad == 0) return;
  ADD_FAILURE() << what << ": " << bad << " of " << ref.size() << " elements out of tolerance, first at " << first
                << " (expected " << mla::bf16_to_f32(ref[first]) << " [0x" << std::hex << ref[first] << "], got "
                << mla::bf16_to_f32(got[first]) << " [0x" << got[first] << std::dec << "])";
}

void expect_close_f32(const std::vector<float>& ref, const std::vector<float>& got, const std::string& what,
                      double abs_tol, double rel_tol) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!close_enough(ref[i], got[i], abs_tol, rel_tol) && bad++ == 0) first = i;
  }
  if (bad == 0) return;
  ADD_FAILURE() << what << ": " << bad << " of " << ref.size() << " elements out of tolerance, first at " << first
                << " (expected " << ref[first] << ", got " << got[first] << ")";
}

// --- random inputs --------------------------------------------------------------------------------

// Run-to-run determinism (bitwise): `again`, from a second launch on the same inputs and freshly
// poisoned outputs, must hold the bytes of `first` (NaN payloads included).
template <typename T>
void expect_same_bits(const std::vector<T>& first, const std::vector<T>& again, const std::string& what) {
  ASSERT_EQ(first.size(), again.size()) << what;
  std::size_t differ = 0, at = 0;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (std::memcmp(&first[i], &again[i], sizeof(T)) == 0) continue;
    if (differ++ == 0) at = i;
  }
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << first.size()
                        << " elements differ from the first launch, the first at " << at;
}

bf16_t bf16_of(double x) { return mla::f32_to_bf16_rne(static_cast<float>(x)); }

std::vector<bf16_t> random_bf16(Rng& rng, std::size_t n, double lo, double hi) {
  std::vector<bf16_t> v(n);
  for (auto& x : v) x = bf16_of(rng.uniform(lo, hi));
  return v;
}

void put_f32(uint8_t* dst, float x) { std::memcpy(dst, &x, 4); }

// A random non-NaN E4M3 code.
uint8_t random_e4m3(Rng& rng) {
  uint8_t b = static_cast<uint8_t>(rng.next_u64());
  if ((b & 0x7F) == 0x7F) b ^= 0x01;
  return b;
}

class CudaAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!mla::cuda_backend_available(&why)) MLA_SKIP_WITHOUT_CUDA() << "CUDA backend unavailable: " << why;
    std::string error;
    cuda_ = mla::make_cuda_backend(mla::KernelPolicy{}, &error);
    ASSERT_NE(cuda_, nullptr) << error;
    host_ = mla::make_host_backend();
    ASSERT_TRUE(cuda_->supports_attention()) << "the CUDA backend does not expose the attention operations";
  }

  Backend& be(int side) { return side == kHost ? *host_ : *cuda_; }
  void sync() { require(cuda_->synchronize(), "cuda synchronize"); }

  std::unique_ptr<Backend> host_, cuda_;
};

// =================================================================================================
// GEMM
// =================================================================================================

struct GemmCase {
  int64_t m, n, k;
  int32_t batch;
  bool transpose_b;
  bool shared_a;      // stride_a = 0
  bool side_by_side;  // batches write column blocks of one C row (stride_c = n, ldc = batch n + pad)
  int64_t pad;        // extra elements in every leading dimension
};

TEST_F(CudaAttentionTest, GemmMatchesHost) {
  const GemmCase cases[] = {
      {5, 64, 128, 3, false, true, false, 0},    {33, 512, 128, 2, true, false, false, 8},
      {128, 128, 512, 4, false, false, true, 0}, {1, 128, 512, 1, true, false, false, 3},
      {70, 96, 64, 2, true, true, true, 5},      {0, 16, 16, 2, false, false, false, 0},
  };
  Rng rng(1234);
  for (const GemmCase& c : cases) {
    std::ostringstream name;
    name << "gemm m=" << c.m << " n=" << c.n << " k=" << c.k << " batch=" << c.batch << " tb=" << c.transpose_b
         << " shared_a=" << c.shared_a << " sbs=" << c.side_by_side << " pad=" << c.pad;
    SCOPED_TRACE(name.str());
    mla::GemmParams p;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.batch = c.batch;
    p.transpose_b = c.transpose_b;
    p.lda = c.k + c.pad;
    p.stride_a = c.shared_a ? 0 : c.m * p.lda;
    p.ldb = (c.transpose_b ? c.k : c.n) + c.pad;
    p.stride_b = (c.transpose_b ? c.n : c.k) * p.ldb;
    if (c.side_by_side) {
      p.ldc = c.batch * c.n + c.pad;
      p.stride_c = c.n;
    } else {
      p.ldc = c.n + c.pad;
      p.stride_c = c.m * p.ldc;
    }
    const int64_t a_elems = (c.shared_a ? 1 : c.batch) * std::max<int64_t>(c.m, 1) * p.lda;
    const int64_t b_elems = c.batch * p.stride_b;
    const int64_t c_elems = c.side_by_side ? std::max<int64_t>(c.m, 1) * p.ldc : c.batch * std::max<int64_t>(p.stride_c, 1);
    auto a = Dual::of(*host_, *cuda_, random_bf16(rng, static_cast<std::size_t>(a_elems), -1.0, 1.0));
    auto b = Dual::of(*host_, *cuda_, random_bf16(rng, static_cast<std::size_t>(b_elems), -1.0, 1.0));
    auto out = Dual::poisoned(*host_, *cuda_, static_cast<std::size_t>(c_elems) * 2);
    for (int side : {kHost, kCuda}) {
      mla::GemmParams q = p;
      q.a = a->ptr<bf16_t>(side);
      q.b = b->ptr<bf16_t>(side);
      q.c = out->ptr<bf16_t>(side);
      require(side == kHost ? host_->gemm(q) : cuda_->gemm(q), "gemm");
    }
    sync();
    const auto ref = out->read<bf16_t>(kHost, "C");
    const auto got = out->read<bf16_t>(kCuda, "C");
    // Elements outside the written blocks keep the poison on both sides: compared too.
    expect_close_bf16(ref, got, name.str());
    // Bitwise deterministic run to run (cuBLAS: same stream, device and toolkit).
    out->reset_cuda();
    mla::GemmParams again = p;
    again.a = a->ptr<bf16_t>(kCuda);
    again.b = b->ptr<bf16_t>(kCuda);
    again.c = out->ptr<bf16_t>(kCuda);
    require(cuda_->gemm(again), "gemm, second launch");
    sync();
    expect_same_bits(got, out->read<bf16_t>(kCuda, "C"), name.str() + ", second launch");
    a->expect_unchanged("A");
    b->expect_unchanged("B");
  }
}

TEST_F(CudaAttentionTest, GemmRejectsInvalidParams) {
  mla::GemmParams p;
  p.m = 4;
  p.n = 4;
  p.k = 0;  // invalid
  EXPECT_FALSE(cuda_->gemm(p).ok());
}

// =================================================================================================
// Sparse MQA
// =================================================================================================

struct SparseCase {
  int32_t heads;
  int32_t topk;
  int64_t tokens;
  int32_t block_size;
  int64_t page_pad;         // bytes, multiple of 16
  int64_t q_head_pad;       // elements added to the head strides (odd: misaligned rows)
  float scale;
  std::string label;
};

std::string describe(const SparseCase& c, int32_t target_items) {
  std::ostringstream os;
  os << "sparse " << c.label << " H=" << c.heads << " K=" << c.topk << " T=" << c.tokens << " B=" << c.block_size
     << " pad=" << c.page_pad << " q_head_pad=" << c.q_head_pad << " scale=" << c.scale
     << " target_items=" << target_items;
  return os.str();
}

TEST_F(CudaAttentionTest, SparseMqaMatchesHost) {
  const SparseCase cases[] = {
      {16, 64, 3, 64, 0, 0, 1.0f, "small"},
      {64, 200, 4, 64, 32, 8, 1.0f, "partial-tiles"},
      {128, 128, 5, 64, 0, 0, 0.0721688f, "vllm-test-shape"},
      {32, 100, 3, 16, 16, 1, 4.0f, "misaligned-q-peaky"},
      {72, 256, 3, 61, 0, 0, 2.0f, "heads-not-multiple-of-64"},
      {128, 2048, 2, 64, 0, 0, 1.0f, "decode-shape"},
      {32, 16384, 2, 64, 0, 0, 0.5f, "topk-16384"},
      // Paired head groups (crossover) with a last tile of 8 columns: the second CTA's half of it
      // lies wholly past topk; unaligned q (plain Q loads).
      {128, 200, 3, 64, 32, 1, 1.0f, "partial-tile-paired-head-groups"},
      // More item pairs than clusters are resident at once (66 on a 132-SM H100 or H200), so
      // persistent crossover CTAs run several blocks through the same stages and barriers: 100
      // items of 5 tiles (target 1: CTAs 0-67 run two blocks), or 300 split items of 2, 2 and 1
      // tiles with partials (target 264: every CTA runs 4-5 blocks).
      {128, 320, 100, 64, 0, 0, 0.25f, "persistent-blocks"},
      // 60 tokens of 9 tiles split 2, 2, 2, 2, 1 (target 264: 300 items; 66 = 1 mod 5, so a CTA's
      // blocks mix 2- and 1-tile items), unaligned q (the next block's Q by plain loads), top-k >=
      // 512 (auto runs crossover).
      {128, 576, 60, 64, 0, 1, 0.25f, "persistent-mixed-tiles"},
  };
  Rng rng(98765);
  for (const SparseCase& c : cases) {
    const int32_t H = c.heads, K = c.topk;
    const int64_t T = c.tokens;
    const int64_t num_slots_wanted = std::max<int64_t>(2 * K, 256);
    const int64_t num_blocks = (num_slots_wanted + c.block_size - 1) / c.block_size;
    const int64_t page_stride = int64_t{c.block_size} * kEntry + c.page_pad;
    const int64_t num_slots = num_blocks * c.block_size;

    // Cache: every slot written except the last 5 (0xFF = NaN everywhere: a stray read shows).
    std::vector<uint8_t> cache(static_cast<std::size_t>(num_blocks * page_stride), 0xFF);
    for (int64_t s = 0; s + 5 < num_slots; ++s) {
      uint8_t* e = cache.data() + (s / c.block_size) * page_stride + (s % c.block_size) * kEntry;
      for (int i = 0; i < DsMlaEntry::kNopeBytes; ++i) e[i] = random_e4m3(rng);
      for (int t = 0; t < DsMlaEntry::kNumTiles; ++t) {
        put_f32(e + DsMlaEntry::kScaleOffset + 4 * t, static_cast<float>(rng.uniform(2e-4, 2e-3)));
      }
      for (int i = 0; i < kDr; ++i) {
        const bf16_t v = bf16_of(rng.normal(0.0, 0.3));
        std::memcpy(e + DsMlaEntry::kRopeOffset + 2 * i, &v, 2);
      }
    }

    // Queries with padded strides.
    const int64_t qn_hs = kDc + c.q_head_pad, qn_ts = H * qn_hs + 8;
    const int64_t qp_hs = kDr + c.q_head_pad, qp_ts = H * qp_hs + 16;
    const auto q_nope = random_bf16(rng, static_cast<std::size_t>(T * qn_ts), -1.0, 1.0);
    const auto q_pe = random_bf16(rng, static_cast<std::size_t>(T * qp_ts), -1.0, 1.0);

    // Indices: valid written slots, with -1, INT_MIN and past-the-pool entries mixed in. Token 0
    // has no valid index at all; token 1 (when there is one) has its first 64 columns invalid.
    const int64_t idx_stride = K + 3;
    std::vector<int32_t> indices(static_cast<std::size_t>(T * idx_stride), 0x7EEEEEEE);
    for (int64_t t = 0; t < T; ++t) {
      for (int32_t j = 0; j < K; ++j) {
        int32_t v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(num_slots - 5)));
        const uint64_t k = rng.below(32);
        if (k == 0) v = -1;
        else if (k == 1) v = INT_MIN;
        else if (k == 2) v = static_cast<int32_t>(num_slots + static_cast<int64_t>(rng.below(100)));
        if (t == 0 || (t == 1 && j < 64)) v = (j % 2) ? -1 : static_cast<int32_t>(num_slots + j);
        indices[static_cast<std::size_t>(t * idx_stride + j)] = v;
      }
    }

    auto d_cache = Dual::of(*host_, *cuda_, cache);
    auto d_qn = Dual::of(*host_, *cuda_, q_nope, c.q_head_pad % 8 ? 2 : 0);
    auto d_qp = Dual::of(*host_, *cuda_, q_pe, c.q_head_pad % 8 ? 2 : 0);
    auto d_idx = Dual::of(*host_, *cuda_, indices);

    for (const int32_t target : {1, 264}) {
      const std::string name = describe(c, target);
      SCOPED_TRACE(name);
      const mla::SparseMqaPlan plan = mla::plan_sparse_mqa(static_cast<int32_t>(T), K, target);
      auto d_items = Dual::of(*host_, *cuda_, plan.items);
      auto d_offsets = Dual::of(*host_, *cuda_, plan.split_offsets);
      const std::size_t partials = static_cast<std::size_t>(std::max(plan.num_partials, 1));
      auto d_out = Dual::poisoned(*host_, *cuda_, static_cast<std::size_t>(T) * H * kDc * 2);
      auto d_lse = Dual::poisoned(*host_, *cuda_, static_cast<std::size_t>(T) * H * 4);
      auto d_pout = Dual::poisoned(*host_, *cuda_, partials * H * kDc * 4);
      auto d_plse = Dual::poisoned(*host_, *cuda_, partials * H * 4);

      auto params = [&](int side) {
        mla::SparseMqaParams p;
        p.q_nope_lat = d_qn->ptr<bf16_t>(side);
        p.q_nope_token_stride = qn_ts;
        p.q_nope_head_stride = qn_hs;
        p.q_pe = d_qp->ptr<bf16_t>(side);
        p.q_pe_token_stride = qp_ts;
        p.q_pe_head_stride = qp_hs;
        p.num_tokens = T;
        p.num_heads = H;
        p.indices = d_idx->ptr<int32_t>(side);
        p.indices_row_stride = idx_stride;
        p.topk = K;
        p.cache = {d_cache->ptr<uint8_t>(side), num_blocks, c.block_size, page_stride};
        p.scale = c.scale;
        p.out_lat = d_out->ptr<bf16_t>(side);
        p.lse = d_lse->ptr<float>(side);
        p.metadata.items = d_items->ptr<mla::SparseMqaWorkItem>(side);
        p.metadata.num_items = static_cast<int32_t>(plan.items.size());
        p.metadata.split_offsets = d_offsets->ptr<int32_t>(side);
        p.metadata.num_tokens_planned = plan.num_tokens;
        p.metadata.num_partials = plan.num_partials;
        p.partial_out = d_pout->ptr<float>(side);
        p.partial_lse = d_plse->ptr<float>(side);
        return p;
      };

      require(host_->sparse_mqa(params(kHost)), "host sparse_mqa");
      const auto ref_out = d_out->read<bf16_t>(kHost, "out_lat");
      const auto ref_lse = d_lse->read<float>(kHost, "lse");
      // The empty token: zeros and -inf.
      for (int h = 0; h < H; ++h) {
        ASSERT_EQ(ref_lse[static_cast<std::size_t>(h)], -kInf) << "host: token 0 has no valid index";
      }

      // wgmma and crossover run only on sm_90a builds and devices (elsewhere they are tc again);
      // crossover only where the 64-head groups come in pairs (H = 72, 128 here; else wgmma); auto
      // requests crossover there when K >= 512 (decode-shape here), else wgmma.
      constexpr int kImpls = 5;
      std::vector<bf16_t> impl_out[kImpls];
      std::vector<float> impl_lse[kImpls];
      mla::SparseMqaImpl impl_ran[kImpls];
      const mla::SparseMqaImpl impls[kImpls] = {mla::SparseMqaImpl::kAuto, mla::SparseMqaImpl::kCrossover,
                                                mla::SparseMqaImpl::kWgmma, mla::SparseMqaImpl::kTc,
                                                mla::SparseMqaImpl::kSimple};
      const bool paired_head_groups = ((H + 63) / 64) % 2 == 0;
      for (int i = 0; i < kImpls; ++i) {
        SCOPED_TRACE(std::string("sparse_mqa=") + to_string(impls[i]));
        set_policy(*cuda_, [&](mla::KernelPolicy& k) { k.sparse_mqa = impls[i]; });
        d_out->reset_cuda();
        d_lse->reset_cuda();
        d_pout->reset_cuda();
        d_plse->reset_cuda();
        require(cuda_->sparse_mqa(params(kCuda)), "cuda sparse_mqa");
        sync();
        // Every buffer here is aligned: what ran is what the device runs for aligned inputs.
        mla::SparseMqaImpl ran = mla::SparseMqaImpl::kSimple, aligned_runs = mla::SparseMqaImpl::kSimple;
        require(mla::sparse_mqa_implementation_for(params(kCuda), impls[i], device_of(*cuda_), &ran), "implementation");
        require(mla::sparse_mqa_implementation(impls[i], device_of(*cuda_), &aligned_runs), "implementation");
        const bool crossover_here = paired_head_groups && (impls[i] != mla::SparseMqaImpl::kAuto || K >= 512);
        const mla::SparseMqaImpl expected =
            aligned_runs == mla::SparseMqaImpl::kCrossover && !crossover_here ? mla::SparseMqaImpl::kWgmma : aligned_runs;
        EXPECT_EQ(to_string(ran), std::string(to_string(expected))) << name;
        impl_ran[i] = ran;
        impl_out[i] = d_out->read<bf16_t>(kCuda, "out_lat");
        impl_lse[i] = d_lse->read<float>(kCuda, "lse");
        (void)d_pout->read<float>(kCuda, "partial_out");  // guards
        (void)d_plse->read<float>(kCuda, "partial_lse");
        expect_close_bf16(ref_out, impl_out[i], name + " out_lat vs host");
        expect_close_f32(ref_lse, impl_lse[i], name + " lse vs host", 1e-4, 0.0);
        // Bitwise deterministic run to run (the split plan's partials and combine included).
        d_out->reset_cuda();
        d_lse->reset_cuda();
        d_pout->reset_cuda();
        d_plse->reset_cuda();
        require(cuda_->sparse_mqa(params(kCuda)), "cuda sparse_mqa, second launch");
        sync();
        expect_same_bits(impl_out[i], d_out->read<bf16_t>(kCuda, "out_lat"), name + " out_lat, second launch");
        expect_same_bits(impl_lse[i], d_lse->read<float>(kCuda, "lse"), name + " lse, second launch");
      }
      // crossover runs the wgmma kernel's product and softmax steps on the same bf16 keys: the same
      // bits (a stale or racing shared-memory tile shows up here even when it stays in tolerance).
      if (impl_ran[1] == mla::SparseMqaImpl::kCrossover && impl_ran[2] == mla::SparseMqaImpl::kWgmma) {
        expect_same_bits(impl_out[2], impl_out[1], name + " out_lat, crossover vs wgmma");
        expect_same_bits(impl_lse[2], impl_lse[1], name + " lse, crossover vs wgmma");
      }
      for (int i = 0; i + 1 < kImpls; ++i) {
        expect_close_bf16(impl_out[kImpls - 1], impl_out[i], name + " out_lat " + to_string(impls[i]) + " vs simple");
        expect_close_f32(impl_lse[kImpls - 1], impl_lse[i], name + " lse " + to_string(impls[i]) + " vs simple", 1e-4,
                         0.0);
      }
    }
    d_cache->expect_unchanged("cache");
    d_qn->expect_unchanged("q_nope_lat");
    d_qp->expect_unchanged("q_pe");
    d_idx->expect_unchanged("indices");
  }
}

// info().kernels is the policy the backend was given as its launchers apply it here: `simple`
// runs everywhere, so a policy of `simple` is recorded unchanged.
TEST_F(CudaAttentionTest, BackendInfoNamesTheAttentionKernels) {
  const std::string k = cuda_->info().kernels;  // the defaults: what this device and build run
  EXPECT_EQ(k.rfind("sparse_mqa=", 0), 0u) << k;
  EXPECT_NE(k.find(" dense_mha="), std::string::npos) << k;
  mla::KernelPolicy policy;
  policy.sparse_mqa = mla::SparseMqaImpl::kSimple;
  policy.dense_mha = mla::DenseMhaImpl::kSimple;
  policy.dense_wgmma_schedule = mla::DenseWgmmaSchedule::kGrid;
  policy.dense_wgmma_max_ctas = 3;
  policy.sync_each = true;
  std::string error;
  const std::unique_ptr<Backend> other = mla::make_cuda_backend(policy, &error);
  ASSERT_NE(other, nullptr) << error;
  EXPECT_EQ(other->info().kernels,
            "sparse_mqa=simple dense_mha=simple dense_wgmma_schedule=grid dense_wgmma_debug=off "
            "dense_wgmma_max_ctas=3 sync_each=1");
}

// On a compute capability 9.0 device with a build that has the sm_90a kernels, sparse MQA runs
// `crossover` by default (`auto`, for 128 heads and top-k >= 512) and when asked, and dense MHA
// runs `wgmma`: a probe that refuses them (say, a register count that no longer matches the setmaxnreg
// budget, or no room for a cluster) would otherwise leave every test passing on a fallback.
TEST_F(CudaAttentionTest, WgmmaKernelsRunOnHopper) {
  if (!mla::wgmma_kernels_built())
    GTEST_SKIP() << "built without sm_90a (the CUDA architectures do not include 90); "
                    "a skip even with MLA_REQUIRE_CUDA";
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_of(*cuda_)), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_of(*cuda_)), cudaSuccess);
  if (major != 9 || minor != 0)
    GTEST_SKIP() << "compute capability " << major << "." << minor << ", not 9.0; a skip even with MLA_REQUIRE_CUDA";
  EXPECT_EQ(cuda_->info().kernels,
            "sparse_mqa=crossover dense_mha=wgmma dense_wgmma_schedule=persistent dense_wgmma_debug=off "
            "dense_wgmma_max_ctas=none sync_each=0 sparse_mqa_requested=auto");
  mla::SparseMqaImpl runs = mla::SparseMqaImpl::kSimple;
  require(mla::sparse_mqa_implementation(mla::SparseMqaImpl::kCrossover, device_of(*cuda_), &runs), "implementation");
  EXPECT_EQ(to_string(runs), std::string("crossover"));
}

// =================================================================================================
// Dense MHA
// =================================================================================================

struct DenseCase {
  int32_t heads;
  bool causal;
  std::vector<int32_t> nq, nk;
  int64_t q_pad;  // elements added to the q_nope token stride (odd: misaligned -> simple fallback)
  float scale;
  std::string label;
  std::size_t out_shift = 0;  // bytes past 256-byte alignment of out (4: wgmma's 16-byte stores cannot run)
};

// One varlen dense MHA problem on both backends: random bf16 inputs in [-1, 1] (q_nope's token
// stride padded by q_pad elements, v's by 8; k_pe at column 512 of gathered [rows, 576] cache
// rows), poisoned outputs (out `out_shift` bytes past 256-byte alignment), and the params that
// point at one side's copies.
struct DenseProblem {
  int32_t heads = 0, reqs = 0;
  bool causal = true;
  float scale = 0.0f;
  std::vector<int32_t> cu_q, cu_k;
  int64_t total_q = 0, total_k = 0;
  int64_t qn_stride = 0, qp_stride = 0, kn_stride = 0, kpe_stride = kDl, v_stride = 0;
  std::vector<bf16_t> q_nope, q_pe, k_nope, k_rows, v;
  std::unique_ptr<Dual> d_qn, d_qp, d_kn, d_kr, d_v, d_cuq, d_cuk, d_out, d_lse;

  DenseProblem(Backend& host, Backend& cuda, Rng& rng, int32_t h, const std::vector<int32_t>& nq,
               const std::vector<int32_t>& nk, int64_t q_pad, bool is_causal, float s, std::size_t out_shift = 0)
      : heads(h), reqs(static_cast<int32_t>(nq.size())), causal(is_causal), scale(s) {
    cu_q.assign(nq.size() + 1, 0);
    cu_k.assign(nk.size() + 1, 0);
    for (std::size_t r = 0; r < nq.size(); ++r) {
      cu_q[r + 1] = cu_q[r] + nq[r];
      cu_k[r + 1] = cu_k[r] + nk[r];
    }
    total_q = cu_q.back();
    total_k = cu_k.back();
    qn_stride = int64_t{h} * kDn + q_pad;
    qp_stride = int64_t{h} * kDr;
    kn_stride = int64_t{h} * kDn;
    v_stride = int64_t{h} * kDv + 8;
    const auto rows = [](int64_t n) { return static_cast<std::size_t>(std::max<int64_t>(n, 1)); };
    q_nope = random_bf16(rng, rows(total_q) * qn_stride, -1.0, 1.0);
    q_pe = random_bf16(rng, rows(total_q) * qp_stride, -1.0, 1.0);
    k_nope = random_bf16(rng, rows(total_k) * kn_stride, -1.0, 1.0);
    k_rows = random_bf16(rng, rows(total_k) * kpe_stride, -1.0, 1.0);
    v = random_bf16(rng, rows(total_k) * v_stride, -1.0, 1.0);
    d_qn = Dual::of(host, cuda, q_nope);
    d_qp = Dual::of(host, cuda, q_pe);
    d_kn = Dual::of(host, cuda, k_nope);
    d_kr = Dual::of(host, cuda, k_rows);
    d_v = Dual::of(host, cuda, v);
    d_cuq = Dual::of(host, cuda, cu_q);
    d_cuk = Dual::of(host, cuda, cu_k);
    d_out = Dual::poisoned(host, cuda, rows(total_q) * h * kDv * 2, out_shift);
    d_lse = Dual::poisoned(host, cuda, rows(total_q) * h * 4);
  }

  mla::DenseMhaParams params(int side) const {
    mla::DenseMhaParams p;
    p.q_nope = d_qn->ptr<bf16_t>(side);
    p.q_nope_stride = qn_stride;
    p.q_pe = d_qp->ptr<bf16_t>(side);
    p.q_pe_stride = qp_stride;
    p.k_nope = d_kn->ptr<bf16_t>(side);
    p.k_nope_stride = kn_stride;
    p.k_pe = d_kr->ptr<bf16_t>(side) + kDc;
    p.k_pe_stride = kpe_stride;
    p.v = d_v->ptr<bf16_t>(side);
    p.v_stride = v_stride;
    p.cu_seqlens_q = d_cuq->ptr<int32_t>(side);
    p.cu_seqlens_k = d_cuk->ptr<int32_t>(side);
    p.cu_seqlens_q_host = cu_q.data();
    p.cu_seqlens_k_host = cu_k.data();
    p.num_reqs = reqs;
    p.num_heads = heads;
    p.total_q = total_q;
    p.total_k = total_k;
    p.causal = causal;
    p.scale = scale;
    p.out = d_out->ptr<bf16_t>(side);
    p.lse = d_lse->ptr<float>(side);
    return p;
  }

  // The host algorithm with each online-softmax step (host::dense_mha), run on the host buffers:
  // [0] kAttentionTile keys (the host backend, simple, tc), [1] dense_wgmma::kSoftmaxStepKeys
  // (wgmma); softmax_step_of names the one an implementation follows.
  struct HostRefs {
    std::vector<bf16_t> out[2];
    std::vector<float> lse[2];
  };
  HostRefs host_references() const {
    const int softmax_keys[2] = {mla::host::kAttentionTile, mla::dense_wgmma::kSoftmaxStepKeys};
    HostRefs refs;
    for (int k = 0; k < 2; ++k) {
      mla::host::dense_mha(params(kHost), softmax_keys[k]);
      refs.out[k] = d_out->read<bf16_t>(kHost, "out");
      refs.lse[k] = d_lse->read<float>(kHost, "lse");
    }
    return refs;
  }
  static int softmax_step_of(const std::string& impl) { return impl == "wgmma" ? 1 : 0; }

  void expect_inputs_unchanged() const {
    d_qn->expect_unchanged("q_nope");
    d_qp->expect_unchanged("q_pe");
    d_kn->expect_unchanged("k_nope");
    d_kr->expect_unchanged("k rows");
    d_v->expect_unchanged("v");
  }
};

// The wgmma kernel (128-query CTAs, 128-key tiles, two K/V pipeline stages) is covered by: several
// key tiles through both stages and partial last tiles (chunked context 300 x 1000, unmasked
// 200 x 513), 128 heads with a 257-query tile tail, causal requests whose two consumer warpgroups
// need different numbers of key tiles, whole CTAs of queries that see no key (a request without
// keys; bottom-right causal needs nq <= nk, so every causal query sees one) and the misaligned
// fallbacks (an input; out not 16-byte aligned for wgmma's stores). Each implementation is compared
// with the host algorithm of its own softmax step (host::dense_mha: 64 keys for simple and tc,
// dense_wgmma::kSoftmaxStepKeys = 128 for wgmma). Scales stay <= 0.5 where tc and wgmma run
// (misaligned-q runs simple only), with these inputs (q, k, v uniform in [-1, 1]): at scale 1,
// scores summed by the tensor cores in another fp32 order than the host's flip the bf16 rounding
// of a few large p, which moves a small out by ~1.2e-3, past the 1e-3 / 2e-2 tolerance, for tc
// (the host's own 64-key step) as for wgmma; simple, which sums as the host does, stays within it
// (H200: 6 of 552,960 values).
TEST_F(CudaAttentionTest, DenseMhaMatchesHost) {
  const DenseCase cases[] = {
      {16, true, {1, 5, 64, 70, 0, 130}, {1, 40, 64, 200, 10, 130}, 0, 0.0721688f, "causal-mixed"},
      {64, true, {17, 100}, {17, 300}, 8, 0.5f, "causal-context"},
      {16, false, {3, 0, 65, 20}, {0, 0, 129, 20}, 0, 0.5f, "unmasked-with-empty"},
      {128, true, {33, 64}, {96, 64}, 0, 0.0721688f, "causal-128-heads"},
      {32, true, {40, 9}, {45, 9}, 3, 1.0f, "misaligned-q"},
      {16, true, {40, 9}, {45, 9}, 0, 0.5f, "out-4-byte-aligned", 4},
      {8, true, {300}, {1000}, 0, 0.0721688f, "causal-chunked-context"},
      {8, false, {200}, {513}, 0, 0.25f, "unmasked-partial-tiles"},
      {128, true, {257}, {257}, 0, 0.0721688f, "causal-128-heads-257"},
      {8, true, {200, 300, 50}, {250, 320, 300}, 0, 0.5f, "causal-uneven-warpgroups"},
      {8, false, {200, 130}, {0, 300}, 0, 0.5f, "unmasked-ctas-without-keys"},
      {8, false, {3, 70}, {0, 0}, 0, 0.5f, "unmasked-no-keys-at-all"},
      // Mostly empty items (the 1-query requests' second and third query tiles): with 1 or 3 CTAs
      // the fetching warp runs ahead of the readers and reuses each item slot many times.
      {4, true, {300, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {300, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233}, 0, 0.5f,
       "causal-mostly-empty-items"},
  };
  Rng rng(4242);
  for (const DenseCase& c : cases) {
    const int32_t H = c.heads, R = static_cast<int32_t>(c.nq.size());
    const DenseProblem pb(*host_, *cuda_, rng, H, c.nq, c.nk, c.q_pad, c.causal, c.scale, c.out_shift);
    const std::vector<int32_t>& cu_q = pb.cu_q;
    auto& d_out = pb.d_out;
    auto& d_lse = pb.d_lse;
    std::ostringstream os;
    os << "dense " << c.label << " H=" << H << " causal=" << c.causal << " q_pad=" << c.q_pad << " out_shift=" << c.out_shift;
    const std::string name = os.str();
    SCOPED_TRACE(name);
    const DenseProblem::HostRefs ref = pb.host_references();

    std::vector<bf16_t> impl_out[3];
    std::vector<float> impl_lse[3];
    const char* impls[3] = {"tc", "simple", "wgmma"};
    const mla::DenseMhaImpl requested[3] = {mla::DenseMhaImpl::kTc, mla::DenseMhaImpl::kSimple,
                                            mla::DenseMhaImpl::kWgmma};
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(std::string("dense_mha=") + impls[i]);
      // The default schedule (persistent), no CTA cap.
      set_policy(*cuda_, [&](mla::KernelPolicy& k) { k.dense_mha = requested[i]; });
      d_out->reset_cuda();
      d_lse->reset_cuda();
      require(cuda_->dense_mha(pb.params(kCuda)), "cuda dense_mha");
      sync();
      // What ran: a misaligned token stride runs simple (tc and wgmma need 16-byte rows), an out
      // that is not 16-byte aligned runs tc instead of wgmma; else what the device runs for
      // aligned inputs.
      mla::DenseMhaImpl ran_impl = mla::DenseMhaImpl::kSimple, expected_impl = mla::DenseMhaImpl::kSimple;
      require(mla::dense_mha_implementation(requested[i], device_of(*cuda_), &expected_impl), "implementation");
      require(mla::dense_mha_implementation_for(pb.params(kCuda), requested[i], device_of(*cuda_), &ran_impl),
              "implementation");
      std::string ran = to_string(ran_impl), expected = to_string(expected_impl);
      if (c.q_pad % 8 != 0) expected = "simple";
      if (c.out_shift % 16 != 0 && expected == "wgmma") expected = "tc";
      EXPECT_EQ(ran, expected) << name;
      impl_out[i] = d_out->read<bf16_t>(kCuda, "out");
      impl_lse[i] = d_lse->read<float>(kCuda, "lse");
      // The host algorithm of what ran (`ran` differs from impls[i] only on the fallbacks).
      const int k = DenseProblem::softmax_step_of(ran);
      expect_close_bf16(ref.out[k], impl_out[i], name + " out vs host, softmax step of " + ran);
      expect_close_f32(ref.lse[k], impl_lse[i], name + " lse vs host, softmax step of " + ran, 1e-4, 0.0);
      // Bitwise deterministic run to run (wgmma's other schedules are compared with it below).
      d_out->reset_cuda();
      d_lse->reset_cuda();
      require(cuda_->dense_mha(pb.params(kCuda)), "cuda dense_mha, second launch");
      sync();
      expect_same_bits(impl_out[i], d_out->read<bf16_t>(kCuda, "out"), name + " out, second launch");
      expect_same_bits(impl_lse[i], d_lse->read<float>(kCuda, "lse"), name + " lse, second launch");
    }
    // The wgmma kernel's other schedules: one CTA per item (grid), 3 CTAs looping over the items
    // (the grid's path past INT_MAX items), and the default dynamic schedule on 3 CTAs and on 1.
    // The same per-item computation, so the same bits. The dynamic runs also check that each launch
    // leaves its item counter at zero for the next (else the next one skips items, poison in out,
    // or traps).
    const struct {
      int64_t max_ctas;
      mla::DenseWgmmaSchedule schedule;
    } loops[] = {{0, mla::DenseWgmmaSchedule::kGrid},
                 {3, mla::DenseWgmmaSchedule::kGrid},
                 {3, mla::DenseWgmmaSchedule::kPersistent},
                 {1, mla::DenseWgmmaSchedule::kPersistent}};
    for (const auto& loop : loops) {
      SCOPED_TRACE(std::string("dense_mha=wgmma dense_wgmma_max_ctas=") + std::to_string(loop.max_ctas) +
                   " dense_wgmma_schedule=" + to_string(loop.schedule));
      set_policy(*cuda_, [&](mla::KernelPolicy& k) {
        k.dense_mha = mla::DenseMhaImpl::kWgmma;
        k.dense_wgmma_max_ctas = loop.max_ctas;
        k.dense_wgmma_schedule = loop.schedule;
      });
      d_out->reset_cuda();
      d_lse->reset_cuda();
      require(cuda_->dense_mha(pb.params(kCuda)), "cuda dense_mha");
      sync();
      expect_same_bits(impl_out[2], d_out->read<bf16_t>(kCuda, "out"), name + ": out, vs the default schedule");
      expect_same_bits(impl_lse[2], d_lse->read<float>(kCuda, "lse"), name + ": lse, vs the default schedule");
    }
    expect_close_bf16(impl_out[1], impl_out[0], name + " out tc vs simple");
    expect_close_f32(impl_lse[1], impl_lse[0], name + " lse tc vs simple", 1e-4, 0.0);
    // Across softmax steps (wgmma's 128 keys, simple's 64) too, at the same tolerance.
    expect_close_bf16(impl_out[1], impl_out[2], name + " out wgmma vs simple");
    expect_close_f32(impl_lse[1], impl_lse[2], name + " lse wgmma vs simple", 1e-4, 0.0);
    // Queries that see no key (a request without keys): 0 and -inf.
    for (int32_t r = 0; r < R; ++r) {
      const int32_t nq = c.nq[static_cast<std::size_t>(r)], nk = c.nk[static_cast<std::size_t>(r)];
      const int32_t blind = nk == 0 ? nq : 0;
      for (int32_t i = cu_q[static_cast<std::size_t>(r)]; i < cu_q[static_cast<std::size_t>(r)] + blind; ++i) {
        for (int h = 0; h < H; ++h) {
          for (int k = 0; k < 3; k += 2) {  // tc, wgmma
            EXPECT_EQ(impl_lse[k][static_cast<std::size_t>(i) * H + h], -kInf)
                << impls[k] << " query " << i << " head " << h;
            EXPECT_EQ(impl_out[k][(static_cast<std::size_t>(i) * H + h) * kDv], 0)
                << impls[k] << " query " << i << " head " << h;
          }
        }
      }
    }
    pb.expect_inputs_unchanged();
  }
}

// Two backends (two streams) running the default persistent dense kernel at once: each stream has
// its own schedule state (item counters and slots), so both launches get every item and the same
// bits as a launch alone. With one state per device, the second launch's CTAs would draw from the
// first's counter (leaving outputs poisoned) or trap. Skipped where the wgmma kernel does not run.
TEST_F(CudaAttentionTest, DenseMhaOnTwoStreamsAtOnce) {
  // The default policy: wgmma, persistent, no CTA cap.
  if (cuda_->info().kernels.find("dense_mha=wgmma") == std::string::npos) {
    GTEST_SKIP() << "the wgmma dense kernel does not run here (a skip even with MLA_REQUIRE_CUDA): "
                 << cuda_->info().kernels;
  }
  std::string error;
  const std::unique_ptr<Backend> other = mla::make_cuda_backend(mla::KernelPolicy{}, &error);
  ASSERT_NE(other, nullptr) << error;
  Rng rng(5151);
  // 1024 items (16 query tiles x 2 requests x 32 heads): long enough for the launches to overlap.
  const DenseProblem pb(*host_, *cuda_, rng, 32, {2048, 2048}, {2048, 2048}, /*q_pad=*/0, /*causal=*/true,
                        0.0721688f);
  require(cuda_->dense_mha(pb.params(kCuda)), "cuda dense_mha (alone)");
  sync();
  const auto want_out = pb.d_out->read<bf16_t>(kCuda, "out");
  const auto want_lse = pb.d_lse->read<float>(kCuda, "lse");
  auto out2 = Dual::poisoned(*host_, *cuda_, want_out.size() * sizeof(bf16_t));
  auto lse2 = Dual::poisoned(*host_, *cuda_, want_lse.size() * sizeof(float));
  mla::DenseMhaParams p2 = pb.params(kCuda);
  p2.out = out2->ptr<bf16_t>(kCuda);
  p2.lse = lse2->ptr<float>(kCuda);
  for (int round = 0; round < 3; ++round) {
    pb.d_out->reset_cuda();
    pb.d_lse->reset_cuda();
    out2->reset_cuda();
    lse2->reset_cuda();
    require(cuda_->dense_mha(pb.params(kCuda)), "dense_mha on the first stream");
    require(other->dense_mha(p2), "dense_mha on the second stream");
    sync();
    require(other->synchronize(), "synchronize the second stream");
    EXPECT_EQ(pb.d_out->read<bf16_t>(kCuda, "out"), want_out) << "first stream, round " << round;
    EXPECT_EQ(out2->read<bf16_t>(kCuda, "out"), want_out) << "second stream, round " << round;
    const auto lse_a = pb.d_lse->read<float>(kCuda, "lse");
    const auto lse_b = lse2->read<float>(kCuda, "lse");
    EXPECT_EQ(0, std::memcmp(lse_a.data(), want_lse.data(), want_lse.size() * sizeof(float))) << "round " << round;
    EXPECT_EQ(0, std::memcmp(lse_b.data(), want_lse.data(), want_lse.size() * sizeof(float))) << "round " << round;
  }
}

// The policy's dense_wgmma_debug isolates the two products of the Hopper `wgmma` kernel
// (dense_mha_impls.h):
// `scores` writes out[t, h, j] = scale * q_t . k_j for the request's keys j < 128 (S = Q K^T: the
// Q / K shared-memory layouts and K-major descriptors), `values` writes out[t, h, :] = v[i % 128]
// for query i of its request (P = identity through the register-A operand and the transposed,
// MN-major V descriptor); lse is 0. Keys past the request read as 0. When DenseMhaMatchesHost fails
// for wgmma, this test says which product is wrong. Skipped where the wgmma kernel cannot run.
TEST_F(CudaAttentionTest, DenseMhaWgmmaIsolatedProducts) {
  const int32_t H = 3;
  const std::vector<int32_t> nq = {200, 70}, nk = {100, 300};
  const float scale = 0.25f;
  Rng rng(9090);
  const DenseProblem pb(*host_, *cuda_, rng, H, nq, nk, /*q_pad=*/0, /*causal=*/false, scale);
  const std::vector<int32_t>& cu_q = pb.cu_q;
  const std::vector<int32_t>& cu_k = pb.cu_k;
  const int64_t qn_stride = pb.qn_stride, qp_stride = pb.qp_stride, kn_stride = pb.kn_stride;
  const int64_t kpe_stride = pb.kpe_stride, v_stride = pb.v_stride;
  const auto& q_nope = pb.q_nope;
  const auto& q_pe = pb.q_pe;
  const auto& k_nope = pb.k_nope;
  const auto& k_rows = pb.k_rows;
  const auto& v = pb.v;
  auto& d_out = pb.d_out;
  auto& d_lse = pb.d_lse;
  const mla::DenseMhaParams p = pb.params(kCuda);

  auto f = [](const std::vector<bf16_t>& x, int64_t i) {
    return static_cast<double>(mla::bf16_to_f32(x[static_cast<std::size_t>(i)]));
  };
  for (const char* mode : {"scores", "values"}) {
    SCOPED_TRACE(std::string("dense_wgmma_debug=") + mode);
    set_policy(*cuda_, [&](mla::KernelPolicy& k) {
      k.dense_mha = mla::DenseMhaImpl::kWgmma;
      k.dense_wgmma_debug =
          std::string(mode) == "scores" ? mla::DenseWgmmaDebug::kScores : mla::DenseWgmmaDebug::kValues;
    });
    d_out->reset_cuda();
    d_lse->reset_cuda();
    const Status st = cuda_->dense_mha(p);
    if (st.is_unsupported()) GTEST_SKIP() << st.message();
    require(st, "cuda dense_mha (debug)");
    sync();
    const auto got = d_out->read<bf16_t>(kCuda, "out");
    const auto got_lse = d_lse->read<float>(kCuda, "lse");
    std::vector<bf16_t> want(got.size(), 0);
    for (int r = 0; r < 2; ++r) {
      for (int32_t i = 0; i < nq[static_cast<std::size_t>(r)]; ++i) {
        const int64_t t = cu_q[static_cast<std::size_t>(r)] + i;
        for (int h = 0; h < H; ++h) {
          bf16_t* w = &want[static_cast<std::size_t>((t * H + h) * kDv)];
          if (std::string(mode) == "scores") {
            for (int j = 0; j < 128 && j < nk[static_cast<std::size_t>(r)]; ++j) {
              const int64_t tk = cu_k[static_cast<std::size_t>(r)] + j;
              double dot = 0.0;
              for (int e = 0; e < kDn; ++e) {
                dot += f(q_nope, t * qn_stride + h * kDn + e) * f(k_nope, tk * kn_stride + h * kDn + e);
              }
              for (int e = 0; e < kDr; ++e) {
                dot += f(q_pe, t * qp_stride + h * kDr + e) * f(k_rows, tk * kpe_stride + kDc + e);
              }
              w[j] = bf16_of(scale * dot);
            }
          } else if (i % 128 < nk[static_cast<std::size_t>(r)]) {
            const int64_t tk = cu_k[static_cast<std::size_t>(r)] + i % 128;
            for (int e = 0; e < kDv; ++e) w[e] = v[static_cast<std::size_t>(tk * v_stride + h * kDv + e)];
          }
        }
      }
    }
    if (std::string(mode) == "scores") {
      expect_close_bf16(want, got, "S = Q K^T tile 0", 1e-2, 1e-2);
    } else {
      expect_close_bf16(want, got, "P V with P = identity", 0.0, 0.0);
    }
    expect_close_f32(std::vector<float>(got_lse.size(), 0.0f), got_lse, "lse", 0.0, 0.0);
  }
  pb.expect_inputs_unchanged();
}

// What the wgmma kernel's tiles reach past a request stays out of its results: a request's partial
// last key tile (zero-filled past its keys) and its partial query tile (the next request's rows,
// computed and not stored). Request 0 (70 queries, 200 keys: tiles of 128 end inside request 1)
// must match the host while every input of request 1 is +Inf: a value row of request 1 read into
// request 0's P V turns its rows into NaN (0 * Inf; a leaked key row is masked to -inf before it
// counts, so the values are what this catches), an Inf query row of request 1 must stay in its own
// (unstored) rows. Request 1's own outputs are not compared (Inf inputs). Every implementation is
// held to it.
TEST_F(CudaAttentionTest, DenseMhaNeighbourRequestStaysOut) {
  const int32_t H = 4;
  const std::vector<int32_t> nq = {70, 64}, nk = {200, 64};
  Rng rng(5151);
  for (const bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "unmasked");
    DenseProblem pb(*host_, *cuda_, rng, H, nq, nk, /*q_pad=*/0, causal, 0.0721688f);
    const bf16_t inf = bf16_of(kInf);
    auto poison = [&](std::vector<bf16_t>& v, int64_t stride, int64_t first, int64_t count) {
      std::fill(v.begin() + first * stride, v.begin() + (first + count) * stride, inf);
    };
    poison(pb.q_nope, pb.qn_stride, pb.cu_q[1], nq[1]);
    poison(pb.q_pe, pb.qp_stride, pb.cu_q[1], nq[1]);
    poison(pb.k_nope, pb.kn_stride, pb.cu_k[1], nk[1]);
    poison(pb.k_rows, pb.kpe_stride, pb.cu_k[1], nk[1]);
    poison(pb.v, pb.v_stride, pb.cu_k[1], nk[1]);
    pb.d_qn = Dual::of(*host_, *cuda_, pb.q_nope);
    pb.d_qp = Dual::of(*host_, *cuda_, pb.q_pe);
    pb.d_kn = Dual::of(*host_, *cuda_, pb.k_nope);
    pb.d_kr = Dual::of(*host_, *cuda_, pb.k_rows);
    pb.d_v = Dual::of(*host_, *cuda_, pb.v);

    const std::size_t out_0 = static_cast<std::size_t>(nq[0]) * H * kDv, lse_0 = static_cast<std::size_t>(nq[0]) * H;
    // Request 0 on the host, with each softmax step (the implementations' own, as in
    // DenseMhaMatchesHost).
    DenseProblem::HostRefs ref = pb.host_references();
    for (int k = 0; k < 2; ++k) {
      ref.out[k].resize(out_0);
      ref.lse[k].resize(lse_0);
      for (const bf16_t x : ref.out[k]) ASSERT_TRUE(std::isfinite(mla::bf16_to_f32(x))) << "host: request 0 is finite";
    }
    for (const mla::DenseMhaImpl impl : {mla::DenseMhaImpl::kWgmma, mla::DenseMhaImpl::kTc, mla::DenseMhaImpl::kSimple}) {
      SCOPED_TRACE(std::string("dense_mha=") + to_string(impl));
      set_policy(*cuda_, [&](mla::KernelPolicy& k) { k.dense_mha = impl; });
      mla::DenseMhaImpl ran_impl = mla::DenseMhaImpl::kSimple;
      require(mla::dense_mha_implementation_for(pb.params(kCuda), impl, device_of(*cuda_), &ran_impl),
              "implementation");
      const std::string ran = to_string(ran_impl);
      const int k = DenseProblem::softmax_step_of(ran);
      pb.d_out->reset_cuda();
      pb.d_lse->reset_cuda();
      require(cuda_->dense_mha(pb.params(kCuda)), "cuda dense_mha");
      sync();
      auto got_out = pb.d_out->read<bf16_t>(kCuda, "out");
      auto got_lse = pb.d_lse->read<float>(kCuda, "lse");
      got_out.resize(out_0);
      got_lse.resize(lse_0);
      expect_close_bf16(ref.out[k], got_out, "request 0 out vs host, softmax step of " + ran);
      expect_close_f32(ref.lse[k], got_lse, "request 0 lse vs host, softmax step of " + ran, 1e-4, 0.0);
    }
  }
}

// =================================================================================================
// Merge
// =================================================================================================

TEST_F(CudaAttentionTest, MergeMatchesHost) {
  Rng rng(777);
  const float special[] = {-kInf, kInf, kNaN};
  for (const int32_t width : {128, 512, 100}) {
    for (const bool in_place : {false, true}) {
      const int64_t rows = 301;
      std::vector<float> lse_a(static_cast<std::size_t>(rows)), lse_b(static_cast<std::size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        const int kind = static_cast<int>(r % 9);
        float a = static_cast<float>(rng.uniform(-5.0, 5.0)), b = static_cast<float>(rng.uniform(-5.0, 5.0));
        if (kind == 1) a = -kInf;
        if (kind == 2) b = -kInf;
        if (kind == 3) a = b = -kInf;
        if (kind == 4) a = special[rng.below(3)];
        if (kind == 5) b = special[rng.below(3)];
        if (kind == 6) a = b = kNaN;
        if (kind == 7) b = a + 120.0f;  // wa = exp(-120) underflows to 0
        lse_a[static_cast<std::size_t>(r)] = a;
        lse_b[static_cast<std::size_t>(r)] = b;
      }
      auto out_a_vals = random_bf16(rng, static_cast<std::size_t>(rows * width), -2.0, 2.0);
      auto out_b_vals = random_bf16(rng, static_cast<std::size_t>(rows * width), -2.0, 2.0);
      // A side with weight 0 holds NaN: it must not leak.
      for (int64_t r = 0; r < rows; ++r) {
        if (r % 9 == 2) out_b_vals[static_cast<std::size_t>(r * width)] = mla::kBf16QuietNaN;
        if (r % 9 == 1) out_a_vals[static_cast<std::size_t>(r * width + 1)] = mla::kBf16QuietNaN;
      }
      auto d_a = Dual::of(*host_, *cuda_, out_a_vals);
      auto d_la = Dual::of(*host_, *cuda_, lse_a);
      auto d_b = Dual::of(*host_, *cuda_, out_b_vals);
      auto d_lb = Dual::of(*host_, *cuda_, lse_b);
      auto d_out = Dual::poisoned(*host_, *cuda_, static_cast<std::size_t>(rows * width) * 2);
      auto d_lse = Dual::poisoned(*host_, *cuda_, static_cast<std::size_t>(rows) * 4);
      const std::string name = "merge width=" + std::to_string(width) + (in_place ? " in place" : "");
      SCOPED_TRACE(name);
      for (int side : {kHost, kCuda}) {
        mla::MergeParams p;
        p.out_a = d_a->ptr<bf16_t>(side);
        p.lse_a = d_la->ptr<float>(side);
        p.out_b = d_b->ptr<bf16_t>(side);
        p.lse_b = d_lb->ptr<float>(side);
        p.out = in_place ? d_a->ptr<bf16_t>(side) : d_out->ptr<bf16_t>(side);
        p.lse = in_place ? d_la->ptr<float>(side) : d_lse->ptr<float>(side);
        p.rows = rows;
        p.width = width;
        require(side == kHost ? host_->merge(p) : cuda_->merge(p), "merge");
      }
      sync();
      const Dual& out = in_place ? *d_a : *d_out;
      const Dual& lse = in_place ? *d_la : *d_lse;
      const auto ref = out.read<bf16_t>(kHost, "out");
      const auto got = out.read<bf16_t>(kCuda, "out");
      expect_close_bf16(ref, got, name + " out");
      expect_close_f32(lse.read<float>(kHost, "lse"), lse.read<float>(kCuda, "lse"), name + " lse", 1e-4, 0.0);
      // Neither zero-weight NaN leaked (rows with one finite side have finite outputs).
      for (int64_t r = 0; r < rows; ++r) {
        if (r % 9 != 1 && r % 9 != 2) continue;
        for (int32_t e = 0; e < width; ++e) {
          const float x = mla::bf16_to_f32(got[static_cast<std::size_t>(r * width + e)]);
          ASSERT_FALSE(std::isnan(x)) << "row " << r << " element " << e;
        }
      }
      if (!in_place) {
        d_a->expect_unchanged("out_a");
        d_la->expect_unchanged("lse_a");
      }
      d_b->expect_unchanged("out_b");
      d_lb->expect_unchanged("lse_b");
    }
  }
}

}  // namespace

#else  // !MLA_HAVE_CUDA

TEST(CudaAttentionTest, SkippedWithoutCudaBuild) { MLA_SKIP_WITHOUT_CUDA() << "built without the CUDA backend"; }

#endif
