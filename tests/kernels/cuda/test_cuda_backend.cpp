// The CUDA backend against the host backend, bit for bit (NaN == NaN for bf16 outputs), on random
// inputs that exercise every path of the cache kernels: block sizes 1, 16, 61, 64, padded pages,
// odd and misaligned strides (the scalar fallbacks), seq_starts, zero-length requests, invalid rows
// and slots, every convert mode (valid counts, prefill workspace, DCP). Every buffer lives on both
// backends with guard zones on both sides; outputs must match and guards, and every input, must
// be unchanged afterwards. Uses the Backend interface only.
//
// Without a usable CUDA device (always the case on CI) every test is skipped with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
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

#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "lib/batch/rng.h"

namespace {

using mla::Backend;
using mla::bf16_t;
using mla::DsMlaEntry;
using mla::Rng;
using mla::Status;

constexpr int kEntry = DsMlaEntry::kBytes;
constexpr int kRow = DsMlaEntry::kLatentDims;
constexpr std::size_t kGuard = 256;  // keeps an unshifted payload 256-byte aligned
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kPoisonByte = 0xEE;  // bf16 0xEEEE and int32 0xEEEEEEEE: not NaN, not -1
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();

void require(const Status& s, const std::string& what) {
  if (!s.ok()) throw std::runtime_error(what + ": " + s.message());
}

enum class Side { kHost, kCuda };

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The same bytes on the host and the CUDA backend: [guard | shift | payload | guard]. `shift`
// bytes move the payload off its 256-byte alignment (to reach the scalar kernel variants).
class DualBuffer {
 public:
  DualBuffer(Backend& host, Backend& cuda, std::vector<uint8_t> payload, std::size_t shift = 0)
      : backends_{&host, &cuda}, offset_(kGuard + shift), payload_bytes_(payload.size()) {
    image_.assign(offset_ + payload_bytes_ + kGuard, kGuardByte);
    std::copy(payload.begin(), payload.end(), image_.begin() + static_cast<std::ptrdiff_t>(offset_));
    for (int s = 0; s < 2; ++s) {
      require(backends_[s]->allocate(image_.size(), &base_[s]), "allocate");
      require(backends_[s]->copy_to_device(base_[s], image_.data(), image_.size()), "copy_to_device");
    }
  }
  ~DualBuffer() {
    for (int s = 0; s < 2; ++s) backends_[s]->release(base_[s]);
  }
  DualBuffer(const DualBuffer&) = delete;
  DualBuffer& operator=(const DualBuffer&) = delete;

  template <typename T>
  T* ptr(Side side) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(base_[index(side)]) + offset_);
  }

  // The payload as the backend holds it now; adds a failure when a guard byte changed.
  std::vector<uint8_t> payload(Side side, const std::string& name) const {
    const std::vector<uint8_t> img = read(side);
    std::size_t changed = 0;
    for (std::size_t i = 0; i < img.size(); ++i) {
      if ((i < offset_ || i >= offset_ + payload_bytes_) && img[i] != image_[i]) ++changed;
    }
    EXPECT_EQ(changed, 0u) << name << " (" << side_name(side) << "): guard bytes changed";
    return std::vector<uint8_t>(img.begin() + static_cast<std::ptrdiff_t>(offset_),
                                img.begin() + static_cast<std::ptrdiff_t>(offset_ + payload_bytes_));
  }

  // For inputs: nothing, payload included, may have changed.
  void expect_unchanged(const std::string& name) const {
    for (Side side : {Side::kHost, Side::kCuda}) {
      EXPECT_TRUE(read(side) == image_) << name << " (" << side_name(side) << ") was modified";
    }
  }

 private:
  static int index(Side s) { return s == Side::kHost ? 0 : 1; }
  static const char* side_name(Side s) { return s == Side::kHost ? "host" : "cuda"; }
  std::vector<uint8_t> read(Side side) const {
    std::vector<uint8_t> img(image_.size());
    require(backends_[index(side)]->copy_to_host(img.data(), base_[index(side)], img.size()), "copy_to_host");
    return img;
  }

  Backend* backends_[2];
  void* base_[2] = {nullptr, nullptr};
  std::size_t offset_, payload_bytes_;
  std::vector<uint8_t> image_;
};

// --- comparisons ------------------------------------------------------------------------------

void expect_same_bytes(const std::vector<uint8_t>& host, const std::vector<uint8_t>& cuda, const std::string& what) {
  ASSERT_EQ(host.size(), cuda.size()) << what;
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != cuda[i] && mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0u) << what << ": first mismatch at byte " << first << " (host 0x" << std::hex
                            << int(host[first]) << ", cuda 0x" << int(cuda[first]) << std::dec << ")";
}

bool bf16_is_nan(uint16_t b) { return (b & 0x7FFFu) > 0x7F80u; }

// bf16 words; any NaN equals any NaN (payloads differ between CPUs and GPUs), positions must match.
void expect_same_bf16(const std::vector<uint8_t>& host, const std::vector<uint8_t>& cuda, const std::string& what) {
  ASSERT_EQ(host.size(), cuda.size()) << what;
  ASSERT_EQ(host.size() % 2, 0u) << what;
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < host.size(); i += 2) {
    const uint16_t h = static_cast<uint16_t>(host[i] | (host[i + 1] << 8));
    const uint16_t c = static_cast<uint16_t>(cuda[i] | (cuda[i + 1] << 8));
    if (h != c && !(bf16_is_nan(h) && bf16_is_nan(c)) && mismatches++ == 0) first = i / 2;
  }
  if (mismatches == 0) return;
  const uint16_t h = static_cast<uint16_t>(host[2 * first] | (host[2 * first + 1] << 8));
  const uint16_t c = static_cast<uint16_t>(cuda[2 * first] | (cuda[2 * first + 1] << 8));
  ADD_FAILURE() << what << ": " << mismatches << " bf16 mismatches, first at element " << first << " (host 0x"
                << std::hex << h << ", cuda 0x" << c << std::dec << ")";
}

void expect_same_i32(const std::vector<uint8_t>& host, const std::vector<uint8_t>& cuda, const std::string& what) {
  ASSERT_EQ(host.size(), cuda.size()) << what;
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i + 4 <= host.size(); i += 4) {
    if (std::memcmp(&host[i], &cuda[i], 4) != 0 && mismatches++ == 0) first = i / 4;
  }
  if (mismatches == 0) return;
  int32_t h, c;
  std::memcpy(&h, &host[4 * first], 4);
  std::memcpy(&c, &cuda[4 * first], 4);
  ADD_FAILURE() << what << ": " << mismatches << " int32 mismatches, first at element " << first << " (host " << h
                << ", cuda " << c << ")";
}

// --- random inputs --------------------------------------------------------------------------------

// A bf16 value of one of several kinds: realistic latent values, any bit pattern (inf, NaN,
// subnormals), a wide exponent range (overflow to inf, fp32 subnormals), zero.
bf16_t random_bf16(Rng& rng, int kind) {
  switch (kind) {
    case 0: return mla::f32_to_bf16_rne(static_cast<float>(rng.normal(0.0, 0.1)));
    case 1: return static_cast<bf16_t>(rng.next_u64());
    case 2: {
      const double m = rng.uniform(1.0, 2.0) * (rng.bernoulli(0.5) ? -1.0 : 1.0);
      return mla::f32_to_bf16_rne(static_cast<float>(std::ldexp(m, static_cast<int>(rng.uniform_int(-140, 130)))));
    }
    default: return rng.bernoulli(0.5) ? bf16_t{0x0000} : bf16_t{0x8000};
  }
}

// A uniformly random float as little-endian bytes at dst.
void put_f32(uint8_t* dst, float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(u >> (8 * i));
}

// Random fp8_ds_mla cache contents: entries of random FP8 codes, scales mostly in a realistic
// range and sometimes any bit pattern (NaN, inf, subnormal), RoPE any bits. Page padding and
// unused tails are 0xFF.
std::vector<uint8_t> random_cache(Rng& rng, int64_t num_blocks, int32_t block_size, int64_t page_stride) {
  std::vector<uint8_t> cache(static_cast<std::size_t>(num_blocks * page_stride), 0xFF);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (int32_t o = 0; o < block_size; ++o) {
      uint8_t* e = cache.data() + b * page_stride + o * kEntry;
      for (int64_t i = 0; i < kEntry; ++i) e[i] = static_cast<uint8_t>(rng.next_u64());
      for (int t = 0; t < DsMlaEntry::kNumTiles; ++t) {
        if (rng.bernoulli(0.8)) put_f32(e + DsMlaEntry::kScaleOffset + 4 * t, static_cast<float>(rng.uniform(1e-4, 0.05)));
      }
    }
  }
  return cache;
}

// A block table [num_reqs, stride]: mostly distinct physical blocks in [0, num_blocks), some
// negative, some past the pool; the columns past `width` hold junk that must never be read.
std::vector<int32_t> random_block_table(Rng& rng, int32_t num_reqs, int32_t width, int64_t stride, int64_t num_blocks) {
  std::vector<int32_t> bt(static_cast<std::size_t>(num_reqs * stride));
  std::vector<int32_t> perm(static_cast<std::size_t>(std::max<int64_t>(num_blocks, 1)));
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  rng.shuffle(perm);
  std::size_t next = 0;
  for (int32_t r = 0; r < num_reqs; ++r) {
    for (int64_t c = 0; c < stride; ++c) {
      int32_t v;
      const uint64_t k = rng.below(100);
      if (c >= width) v = static_cast<int32_t>(rng.next_u64());  // junk
      else if (k < 5) v = -1;
      else if (k < 7) v = static_cast<int32_t>(num_blocks + static_cast<int64_t>(rng.below(5)));
      else if (k < 8) v = rng.bernoulli(0.5) ? kI32Min : kI32Max;
      else v = perm[next++ % perm.size()];
      bt[static_cast<std::size_t>(r * stride + c)] = v;
    }
  }
  return bt;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!mla::cuda_backend_available(&why)) MLA_SKIP_WITHOUT_CUDA() << "CUDA backend unavailable: " << why;
    std::string error;
    cuda_ = mla::make_cuda_backend(mla::KernelPolicy{}, &error);
    ASSERT_NE(cuda_, nullptr) << error;
    host_ = mla::make_host_backend();
  }

  Backend& backend(Side s) { return s == Side::kHost ? *host_ : *cuda_; }

  // Runs op on both backends (op(backend, side) returns the Status) and synchronises the GPU.
  template <typename Op>
  void run_both(Op op) {
    require(op(*host_, Side::kHost), "host backend");
    require(op(*cuda_, Side::kCuda), "cuda backend");
    require(cuda_->synchronize(), "cuda synchronize");
  }

  std::unique_ptr<Backend> host_, cuda_;
};

TEST_F(CudaBackendTest, Info) {
  const mla::BackendInfo info = cuda_->info();
  EXPECT_EQ(info.name, "cuda");
  EXPECT_NE(info.device.find("(sm_"), std::string::npos) << info.device;
  EXPECT_NE(info.device.find(" SMs, L2 "), std::string::npos) << info.device;
  EXPECT_EQ(info.runtime.rfind("CUDA runtime ", 0), 0u) << info.runtime;
  EXPECT_NE(info.runtime.find(", driver "), std::string::npos) << info.runtime;
}

TEST_F(CudaBackendTest, MemoryIsAlignedAndCopiesRoundTrip) {
  std::vector<uint8_t> src(100003);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  void* p = nullptr;
  require(cuda_->allocate(src.size(), &p), "allocate");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  require(cuda_->copy_to_device(p, src.data(), src.size()), "copy_to_device");
  std::vector<uint8_t> back(src.size(), 0);
  require(cuda_->copy_to_host(back.data(), p, back.size()), "copy_to_host");
  EXPECT_TRUE(back == src);
  cuda_->release(p);
  void* empty = nullptr;
  require(cuda_->allocate(0, &empty), "allocate 0");
  EXPECT_NE(empty, nullptr);
  cuda_->release(empty);
  EXPECT_TRUE(cuda_->synchronize().ok());
}

// --- pack -----------------------------------------------------------------------------------------

struct PackCase {
  int64_t num_tokens;
  int64_t input_rows;   // >= num_tokens: padding rows that must not be packed
  int64_t kv_c_stride;  // elements
  int64_t k_pe_stride;
  int32_t block_size;
  int64_t num_blocks;
  int64_t page_pad;     // bytes past block_size * 656, a multiple of 16
  std::size_t input_shift;  // bytes: 2 misaligns kv_c and k_pe (scalar loads)
  std::size_t cache_shift;  // bytes: 16 keeps 16-byte alignment, 8 does not (scalar stores)
};

std::string describe(const PackCase& c) {
  std::ostringstream os;
  os << "pack N=" << c.num_tokens << " rows=" << c.input_rows << " kv_stride=" << c.kv_c_stride
     << " pe_stride=" << c.k_pe_stride << " B=" << c.block_size << " blocks=" << c.num_blocks << " pad=" << c.page_pad
     << " in_shift=" << c.input_shift << " cache_shift=" << c.cache_shift;
  return os.str();
}

TEST_F(CudaBackendTest, PackMatchesHostBitForBit) {
  const PackCase cases[] = {
      {1, 1, 512, 64, 1, 4, 0, 0, 0},
      {100, 120, 512, 64, 16, 10, 0, 0, 0},
      {333, 333, 520, 72, 61, 7, 48, 0, 0},
      {1000, 1003, 512, 64, 64, 20, 16, 0, 16},
      {257, 260, 513, 65, 64, 6, 0, 0, 0},    // odd strides: scalar loads
      {200, 200, 512, 64, 16, 16, 0, 2, 0},   // misaligned inputs: scalar loads
      {200, 200, 512, 64, 61, 5, 0, 0, 8},    // misaligned cache: scalar stores
      {300, 300, 517, 66, 1, 400, 16, 2, 8},  // everything scalar, one token per page
      {5000, 5000, 512, 64, 64, 100, 0, 0, 0},
      // Several steps per warp on any GPU (the persistent grid holds at most a few thousand tokens
      // per step): the loads of step n + 1 in flight while step n is packed.
      {40000, 40001, 512, 64, 64, 700, 0, 0, 0},
      {20000, 20000, 517, 66, 61, 400, 16, 2, 8},
  };
  Rng rng(0xC0DA1);
  for (const PackCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const int64_t num_slots = c.num_blocks * c.block_size;
    const int64_t page_stride = static_cast<int64_t>(c.block_size) * kEntry + c.page_pad;

    // Inputs: per 128-tile a kind of values (see random_bf16); the padding columns too.
    std::vector<bf16_t> kv_c(static_cast<std::size_t>(c.input_rows * c.kv_c_stride));
    for (std::size_t i = 0; i < kv_c.size(); i += DsMlaEntry::kTileDims) {
      const uint64_t k = rng.below(100);
      const int kind = k < 65 ? 0 : k < 80 ? 1 : k < 95 ? 2 : 3;
      for (std::size_t j = i; j < std::min(kv_c.size(), i + DsMlaEntry::kTileDims); ++j) {
        kv_c[j] = random_bf16(rng, kind == 3 && rng.bernoulli(0.02) ? 1 : kind);  // zero tiles, some with a stray value
      }
    }
    // Signaling NaNs are quieted here: how a max treats them is pinned by PackIgnoresEveryNaNInAmax.
    for (auto& v : kv_c) {
      if (bf16_is_nan(v)) v = static_cast<bf16_t>(v | 0x0040u);
    }
    std::vector<bf16_t> k_pe(static_cast<std::size_t>(c.input_rows * c.k_pe_stride));
    for (auto& v : k_pe) v = static_cast<bf16_t>(rng.next_u64());

    // Distinct valid slots, plus skipped ones: negative, past the pool, extreme.
    std::vector<int64_t> perm(static_cast<std::size_t>(num_slots));
    for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
    rng.shuffle(perm);
    std::vector<int64_t> slots(static_cast<std::size_t>(c.num_tokens));
    std::size_t next = 0;
    for (auto& s : slots) {
      const uint64_t k = rng.below(100);
      if (k < 6) s = -1 - static_cast<int64_t>(rng.below(3));
      else if (k < 9) s = num_slots + static_cast<int64_t>(rng.below(1000));
      else if (k < 10) s = rng.bernoulli(0.5) ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
      else s = next < perm.size() ? perm[next++] : -1;
    }

    DualBuffer kv_buf(*host_, *cuda_, bytes_of(kv_c), c.input_shift);
    DualBuffer pe_buf(*host_, *cuda_, bytes_of(k_pe), c.input_shift);
    DualBuffer slot_buf(*host_, *cuda_, bytes_of(slots));
    DualBuffer cache_buf(*host_, *cuda_, std::vector<uint8_t>(static_cast<std::size_t>(c.num_blocks * page_stride), 0xFF),
                         c.cache_shift);

    run_both([&](Backend& b, Side s) {
      mla::PackParams p;
      p.kv_c = kv_buf.ptr<bf16_t>(s);
      p.kv_c_row_stride = c.kv_c_stride;
      p.k_pe = pe_buf.ptr<bf16_t>(s);
      p.k_pe_row_stride = c.k_pe_stride;
      p.slot_mapping = slot_buf.ptr<int64_t>(s);
      p.num_tokens = c.num_tokens;
      p.cache.data = cache_buf.ptr<uint8_t>(s);
      p.cache.num_blocks = c.num_blocks;
      p.cache.block_size = c.block_size;
      p.cache.page_stride_bytes = page_stride;
      return b.pack(p);
    });

    expect_same_bytes(cache_buf.payload(Side::kHost, "cache"), cache_buf.payload(Side::kCuda, "cache"), "cache");
    kv_buf.expect_unchanged("kv_c");
    pe_buf.expect_unchanged("k_pe");
    slot_buf.expect_unchanged("slot_mapping");
  }
}

// amax ignores NaN inputs, quiet and signaling alike, wherever they sit in the tile (the GPU's
// max.f32 does). glibc's fmaxf does not: fmaxf(x, sNaN) is a quiet NaN, so a host amax built on
// it restarts after the last signaling NaN of the tile.
TEST_F(CudaBackendTest, PackIgnoresEveryNaNInAmax) {
  std::vector<bf16_t> kv_c(512, 0x3F00);  // 0.5
  kv_c[0] = 0x4000;                       // 2.0: the tile's amax
  kv_c[1] = 0x7F81;                       // signaling NaN
  kv_c[128] = 0x7FC1;                     // quiet NaN in tile 1
  kv_c[129] = 0x4040;                     // 3.0: tile 1's amax
  kv_c[300] = 0xFF81;                     // negative signaling NaN last in tile 2
  kv_c[257] = 0xC080;                     // -4.0: tile 2's amax
  const std::vector<bf16_t> k_pe(64, 0x3F80);
  const std::vector<int64_t> slots = {0};
  DualBuffer kv_buf(*host_, *cuda_, bytes_of(kv_c));
  DualBuffer pe_buf(*host_, *cuda_, bytes_of(k_pe));
  DualBuffer slot_buf(*host_, *cuda_, bytes_of(slots));
  DualBuffer cache_buf(*host_, *cuda_, std::vector<uint8_t>(kEntry, 0xFF));
  run_both([&](Backend& b, Side s) {
    mla::PackParams p;
    p.kv_c = kv_buf.ptr<bf16_t>(s);
    p.k_pe = pe_buf.ptr<bf16_t>(s);
    p.slot_mapping = slot_buf.ptr<int64_t>(s);
    p.num_tokens = 1;
    p.cache.data = cache_buf.ptr<uint8_t>(s);
    p.cache.num_blocks = 1;
    p.cache.block_size = 1;
    p.cache.page_stride_bytes = kEntry;
    return b.pack(p);
  });
  const std::vector<uint8_t> cuda = cache_buf.payload(Side::kCuda, "cache");
  const float expected[4] = {2.0f / 448.0f, 3.0f / 448.0f, 4.0f / 448.0f, 0.5f / 448.0f};
  for (int t = 0; t < 4; ++t) {
    float scale;
    std::memcpy(&scale, &cuda[DsMlaEntry::kScaleOffset + 4 * t], 4);
    EXPECT_EQ(scale, expected[t]) << "cuda scale of tile " << t;
  }
  expect_same_bytes(cache_buf.payload(Side::kHost, "cache"), cuda, "cache (host vs cuda)");
}

// The kernel divides by the tile's scale through a reciprocal and FMA corrections (exact division
// for tiny and infinite scales), which must give the bytes of the host's true division: each tile
// holds its amax A and then, 127 at a time, every finite bf16 x with |x| <= A (both signs, zeros
// and subnormals included), for 160 amax values: fixed ones across the bf16 range (scale = FLT_MIN
// below 448 FLT_MIN, 1 at A = 448), the tiny amaxes (0x04F8 .. 0x0B2A, scale just above FLT_MIN)
// where the corrections' residual underflows and the kernel must divide exactly, and random ones;
// plus one tile with an infinite amax (scale inf: x / inf = ±0, inf / inf = NaN). The arithmetic
// itself is checked on the host by tests/kernels/test_scale_division.cpp.
TEST_F(CudaBackendTest, PackQuantizesEveryBf16InputLikeTheHostDivision) {
  Rng rng(0xD1F);
  std::vector<bf16_t> amaxes = {0x0001, 0x0080, 0x04F8, 0x050A, 0x0850, 0x0B2A,  // subnormal, tiny scales
                                0x0C00, 0x3F80, 0x43E0, 0x7F7F};
  while (amaxes.size() < 160) {
    const bf16_t a = static_cast<bf16_t>(rng.below(0x7F80));  // finite, non-negative
    if (a != 0) amaxes.push_back(a);
  }
  std::vector<bf16_t> kv_c;
  for (bf16_t amax : amaxes) {
    const float limit = mla::bf16_to_f32(amax);
    std::vector<bf16_t> xs;
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const bf16_t x = static_cast<bf16_t>(bits);
      if (!bf16_is_nan(x) && std::fabs(mla::bf16_to_f32(x)) <= limit) xs.push_back(x);
    }
    for (std::size_t i = 0; i < xs.size(); i += DsMlaEntry::kTileDims - 1) {
      kv_c.push_back(rng.bernoulli(0.5) ? amax : static_cast<bf16_t>(amax | 0x8000u));
      for (std::size_t j = i; j < i + DsMlaEntry::kTileDims - 1; ++j) kv_c.push_back(j < xs.size() ? xs[j] : 0);
    }
  }
  const bf16_t inf_tile[] = {0x7F80, 0x3F80, 0xBF80, 0x0000, 0x8000, 0xFF80, 0x0001};
  kv_c.insert(kv_c.end(), std::begin(inf_tile), std::end(inf_tile));
  while (kv_c.size() % DsMlaEntry::kNopeDims != 0) kv_c.push_back(0x4000);
  const int64_t tokens = static_cast<int64_t>(kv_c.size()) / DsMlaEntry::kNopeDims;
  const std::vector<bf16_t> k_pe(static_cast<std::size_t>(tokens) * DsMlaEntry::kRopeDims, 0x3F80);
  std::vector<int64_t> slots(static_cast<std::size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) slots[static_cast<std::size_t>(t)] = t;

  DualBuffer kv_buf(*host_, *cuda_, bytes_of(kv_c));
  DualBuffer pe_buf(*host_, *cuda_, bytes_of(k_pe));
  DualBuffer slot_buf(*host_, *cuda_, bytes_of(slots));
  DualBuffer cache_buf(*host_, *cuda_, std::vector<uint8_t>(static_cast<std::size_t>(tokens) * kEntry, 0xFF));
  run_both([&](Backend& b, Side s) {
    mla::PackParams p;
    p.kv_c = kv_buf.ptr<bf16_t>(s);
    p.kv_c_row_stride = DsMlaEntry::kNopeDims;
    p.k_pe = pe_buf.ptr<bf16_t>(s);
    p.k_pe_row_stride = DsMlaEntry::kRopeDims;
    p.slot_mapping = slot_buf.ptr<int64_t>(s);
    p.num_tokens = tokens;
    p.cache.data = cache_buf.ptr<uint8_t>(s);
    p.cache.num_blocks = tokens;
    p.cache.block_size = 1;
    p.cache.page_stride_bytes = kEntry;
    return b.pack(p);
  });
  expect_same_bytes(cache_buf.payload(Side::kHost, "cache"), cache_buf.payload(Side::kCuda, "cache"), "cache");
}

TEST_F(CudaBackendTest, PackWithNoTokensOrNoSlotsWritesNothing) {
  const std::vector<bf16_t> kv_c(512, 0x3F80), k_pe(64, 0x3F80);
  const std::vector<int64_t> slots = {0};
  DualBuffer kv_buf(*host_, *cuda_, bytes_of(kv_c));
  DualBuffer pe_buf(*host_, *cuda_, bytes_of(k_pe));
  DualBuffer slot_buf(*host_, *cuda_, bytes_of(slots));
  DualBuffer cache_buf(*host_, *cuda_, std::vector<uint8_t>(kEntry * 4, 0xFF));
  for (int variant = 0; variant < 2; ++variant) {
    mla::PackParams p;
    p.kv_c = kv_buf.ptr<bf16_t>(Side::kCuda);
    p.k_pe = pe_buf.ptr<bf16_t>(Side::kCuda);
    p.slot_mapping = slot_buf.ptr<int64_t>(Side::kCuda);
    p.num_tokens = variant == 0 ? 0 : 1;
    p.cache.data = cache_buf.ptr<uint8_t>(Side::kCuda);
    p.cache.num_blocks = variant == 0 ? 4 : 0;  // no slots: slot 0 is out of the (empty) pool
    p.cache.block_size = 1;
    p.cache.page_stride_bytes = kEntry;
    require(cuda_->pack(p), "pack");
  }
  require(cuda_->synchronize(), "synchronize");
  cache_buf.expect_unchanged("cache");
}

// --- gather ---------------------------------------------------------------------------------------

enum class Starts { kNormal, kFirstPositive, kNonMonotone };

struct GatherCase {
  int32_t block_size;
  int64_t num_blocks;
  int64_t page_pad;
  int32_t num_reqs;
  int32_t bt_width;
  int64_t bt_stride;
  int32_t max_len;       // request lengths in [0, max_len], some zero
  bool seq_starts;
  Starts starts;
  int64_t dst_stride;    // elements
  std::size_t dst_shift;     // bytes (2: misaligned dst, scalar stores)
  std::size_t cache_shift;   // bytes (8: misaligned cache, scalar loads)
};

std::string describe(const GatherCase& c) {
  std::ostringstream os;
  os << "gather B=" << c.block_size << " blocks=" << c.num_blocks << " pad=" << c.page_pad << " R=" << c.num_reqs
     << " width=" << c.bt_width << " bt_stride=" << c.bt_stride << " max_len=" << c.max_len
     << " seq_starts=" << c.seq_starts << " starts=" << static_cast<int>(c.starts) << " dst_stride=" << c.dst_stride
     << " dst_shift=" << c.dst_shift << " cache_shift=" << c.cache_shift;
  return os.str();
}

struct GatherRows {
  std::vector<int32_t> ws;
  std::vector<int32_t> seq_starts;
  int64_t num_rows = 0;
};

GatherRows random_rows(Rng& rng, const GatherCase& c) {
  GatherRows g;
  const int64_t capacity = static_cast<int64_t>(c.bt_width) * c.block_size;
  int64_t total = 0;
  for (int32_t r = 0; r < c.num_reqs; ++r) {
    const int64_t len = rng.bernoulli(0.15) ? 0 : static_cast<int64_t>(rng.below(static_cast<uint64_t>(c.max_len) + 1));
    g.ws.push_back(static_cast<int32_t>(total));
    int64_t start = 0;
    const uint64_t k = rng.below(100);
    if (k < 5) start = -static_cast<int64_t>(rng.below(3)) - 1;  // rows before position 0: invalid
    else if (k < 8) start = capacity - len + static_cast<int64_t>(rng.below(3)) + 1;  // runs past the table
    else if (k < 9) start = kI32Max - 5;
    else start = static_cast<int64_t>(rng.below(static_cast<uint64_t>(std::max<int64_t>(capacity - len, 0)) + 1));
    g.seq_starts.push_back(static_cast<int32_t>(start));
    total += len;
  }
  g.num_rows = total;
  if (c.starts == Starts::kFirstPositive) {
    for (auto& w : g.ws) w += 7;  // rows 0..6 belong to no request
    g.num_rows += 7;
  } else if (c.starts == Starts::kNonMonotone && g.ws.size() > 2) {
    std::swap(g.ws[1], g.ws[g.ws.size() - 1]);  // breaks the contract: must stay in bounds, and agree
  }
  return g;
}

TEST_F(CudaBackendTest, GatherMatchesHostBitForBit) {
  const GatherCase cases[] = {
      {64, 40, 0, 6, 8, 8, 300, true, Starts::kNormal, 576, 0, 0},
      {64, 40, 0, 6, 8, 8, 300, false, Starts::kNormal, 576, 0, 0},
      {1, 300, 0, 5, 64, 70, 60, true, Starts::kNormal, 584, 0, 0},
      {16, 64, 32, 9, 12, 13, 200, true, Starts::kNormal, 576, 0, 16},
      {61, 30, 16, 4, 6, 6, 400, true, Starts::kNormal, 577, 0, 0},   // odd dst stride: scalar stores
      {64, 30, 0, 4, 6, 9, 400, true, Starts::kNormal, 576, 2, 0},    // misaligned dst
      {16, 50, 0, 5, 10, 10, 150, true, Starts::kNormal, 600, 0, 8},  // misaligned cache: scalar loads
      {61, 30, 48, 7, 5, 5, 300, true, Starts::kFirstPositive, 576, 0, 0},
      {64, 30, 0, 8, 5, 5, 300, true, Starts::kNonMonotone, 576, 0, 0},
      {64, 600, 0, 32, 20, 20, 1280, true, Starts::kNormal, 576, 0, 0},
      {64, 1200, 16, 64, 40, 44, 2560, false, Starts::kNormal, 576, 0, 0},  // ~80k rows
      {16, 2400, 0, 300, 8, 9, 120, true, Starts::kNormal, 576, 0, 0},  // > 256 requests: starts not staged
  };
  Rng rng(0x6A7E);
  for (const GatherCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const int64_t page_stride = static_cast<int64_t>(c.block_size) * kEntry + c.page_pad;
    const std::vector<uint8_t> cache = random_cache(rng, c.num_blocks, c.block_size, page_stride);
    const std::vector<int32_t> bt = random_block_table(rng, c.num_reqs, c.bt_width, c.bt_stride, c.num_blocks);
    const GatherRows rows = random_rows(rng, c);

    DualBuffer cache_buf(*host_, *cuda_, cache, c.cache_shift);
    DualBuffer bt_buf(*host_, *cuda_, bytes_of(bt));
    DualBuffer ws_buf(*host_, *cuda_, bytes_of(rows.ws));
    DualBuffer ss_buf(*host_, *cuda_, bytes_of(rows.seq_starts));
    const std::size_t dst_bytes = static_cast<std::size_t>(rows.num_rows * c.dst_stride * 2);
    DualBuffer dst_buf(*host_, *cuda_, std::vector<uint8_t>(dst_bytes, kPoisonByte), c.dst_shift);

    run_both([&](Backend& b, Side s) {
      mla::GatherParams p;
      p.cache.data = cache_buf.ptr<uint8_t>(s);
      p.cache.num_blocks = c.num_blocks;
      p.cache.block_size = c.block_size;
      p.cache.page_stride_bytes = page_stride;
      p.block_table = bt_buf.ptr<int32_t>(s);
      p.num_reqs = c.num_reqs;
      p.block_table_width = c.bt_width;
      p.block_table_stride = c.bt_stride;
      p.workspace_starts = ws_buf.ptr<int32_t>(s);
      p.seq_starts = c.seq_starts ? ss_buf.ptr<int32_t>(s) : nullptr;
      p.dst = dst_buf.ptr<bf16_t>(s);
      p.dst_row_stride = c.dst_stride;
      p.num_rows = rows.num_rows;
      return b.gather(p);
    });

    expect_same_bf16(dst_buf.payload(Side::kHost, "dst"), dst_buf.payload(Side::kCuda, "dst"), "dst");
    cache_buf.expect_unchanged("cache");
    bt_buf.expect_unchanged("block_table");
    ws_buf.expect_unchanged("workspace_starts");
    ss_buf.expect_unchanged("seq_starts");
  }
}

TEST_F(CudaBackendTest, GatherOfZeroRowsWritesNothing) {
  const std::vector<int32_t> bt = {0}, ws = {0};
  DualBuffer cache_buf(*host_, *cuda_, std::vector<uint8_t>(kEntry, 0x11));
  DualBuffer bt_buf(*host_, *cuda_, bytes_of(bt));
  DualBuffer ws_buf(*host_, *cuda_, bytes_of(ws));
  DualBuffer dst_buf(*host_, *cuda_, std::vector<uint8_t>(kRow * 2, kPoisonByte));
  mla::GatherParams p;
  p.cache.data = cache_buf.ptr<uint8_t>(Side::kCuda);
  p.cache.num_blocks = 1;
  p.cache.block_size = 1;
  p.cache.page_stride_bytes = kEntry;
  p.block_table = bt_buf.ptr<int32_t>(Side::kCuda);
  p.num_reqs = 1;
  p.block_table_width = 1;
  p.block_table_stride = 1;
  p.workspace_starts = ws_buf.ptr<int32_t>(Side::kCuda);
  p.dst = dst_buf.ptr<bf16_t>(Side::kCuda);
  p.num_rows = 0;
  require(cuda_->gather(p), "gather");
  require(cuda_->synchronize(), "synchronize");
  dst_buf.expect_unchanged("dst");
}

TEST_F(CudaBackendTest, GatherRefusesInvalidParamsWithoutWriting) {
  const std::vector<int32_t> bt = {0}, ws = {0};
  DualBuffer cache_buf(*host_, *cuda_, std::vector<uint8_t>(kEntry, 0x11));
  DualBuffer bt_buf(*host_, *cuda_, bytes_of(bt));
  DualBuffer ws_buf(*host_, *cuda_, bytes_of(ws));
  DualBuffer dst_buf(*host_, *cuda_, std::vector<uint8_t>(kRow * 2, kPoisonByte));
  mla::GatherParams p;
  p.cache.data = cache_buf.ptr<uint8_t>(Side::kCuda);
  p.cache.num_blocks = 1;
  p.cache.block_size = 1;
  p.cache.page_stride_bytes = kEntry;
  p.block_table = bt_buf.ptr<int32_t>(Side::kCuda);
  p.num_reqs = 1;
  p.block_table_width = 1;
  p.block_table_stride = 1;
  p.workspace_starts = ws_buf.ptr<int32_t>(Side::kCuda);
  p.dst = dst_buf.ptr<bf16_t>(Side::kCuda);
  p.dst_row_stride = kRow - 1;  // narrower than a row
  p.num_rows = 1;
  const Status s = cuda_->gather(p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dst_row_stride"), std::string::npos) << s.message();
  require(cuda_->synchronize(), "synchronize");
  dst_buf.expect_unchanged("dst");
}

// --- convert --------------------------------------------------------------------------------------

struct ConvertCase {
  int64_t rows;
  int32_t topk;
  int64_t indices_stride;
  int64_t out_stride;
  std::size_t out_shift;  // bytes (4: int32-aligned but not 16-byte aligned: scalar path)
  int32_t num_reqs;
  int32_t bt_width;
  int64_t bt_stride;
  int32_t block_size;
  bool valid_count;
  int32_t num_prefills;   // < 0: no prefill-workspace mode
  int32_t dcp_world, dcp_rank, dcp_interleave;
};

std::string describe(const ConvertCase& c) {
  std::ostringstream os;
  os << "convert N=" << c.rows << " K=" << c.topk << " idx_stride=" << c.indices_stride
     << " out_stride=" << c.out_stride << " out_shift=" << c.out_shift << " R=" << c.num_reqs
     << " width=" << c.bt_width << " bt_stride=" << c.bt_stride << " B=" << c.block_size
     << " valid_count=" << c.valid_count << " prefills=" << c.num_prefills << " dcp=" << c.dcp_world << "/"
     << c.dcp_rank << "/" << c.dcp_interleave;
  return os.str();
}

TEST_F(CudaBackendTest, ConvertMatchesHostBitForBit) {
  const ConvertCase cases[] = {
      {1, 1, 1, 1, 0, 1, 4, 4, 64, true, -1, 1, 0, 1},
      {37, 128, 128, 128, 0, 4, 8, 8, 64, true, -1, 1, 0, 1},
      {37, 128, 128, 128, 0, 4, 8, 8, 64, false, -1, 1, 0, 1},
      {513, 2048, 2048, 2048, 0, 16, 40, 40, 64, true, -1, 1, 0, 1},   // 256 threads per row
      {200, 1000, 1004, 1008, 0, 8, 20, 23, 16, true, -1, 1, 0, 1},   // 256 threads, 250 steps
      {100, 512, 512, 512, 0, 8, 20, 20, 61, true, -1, 1, 0, 1},      // 128 threads per row
      {100, 256, 256, 256, 0, 8, 20, 20, 1, true, -1, 1, 0, 1},       // 64 threads per row
      {64, 3, 3, 5, 0, 3, 4, 4, 16, true, -1, 1, 0, 1},               // scalar, topk % 4 != 0
      {300, 2047, 2047, 2047, 0, 8, 40, 40, 64, true, -1, 1, 0, 1},   // scalar, 256 threads
      {100, 128, 129, 128, 0, 8, 8, 8, 64, true, -1, 1, 0, 1},        // odd indices stride: scalar
      {100, 128, 128, 128, 4, 8, 8, 8, 64, true, -1, 1, 0, 1},        // out not 16-byte aligned: scalar
      {150, 128, 128, 132, 0, 6, 8, 9, 64, true, 4, 1, 0, 1},         // prefill workspace
      {150, 100, 100, 100, 0, 6, 8, 9, 16, true, 3, 1, 0, 1},         // prefill workspace, scalar
      {150, 128, 128, 128, 0, 6, 8, 8, 64, true, 0, 1, 0, 1},         // prefill_req set, no prefills
      {200, 128, 128, 128, 0, 8, 8, 8, 64, true, -1, 2, 1, 1},        // DCP W=2
      {200, 128, 128, 128, 0, 8, 8, 8, 64, true, -1, 4, 3, 4},        // DCP W=4, I=4
      {200, 2048, 2048, 2048, 0, 8, 16, 16, 64, true, -1, 4, 0, 2},   // DCP W=4, I=2
      {200, 96, 97, 96, 0, 8, 8, 8, 16, true, 3, 2, 1, 8},            // DCP + prefill (rows not DCP-mapped), scalar
      {2000, 2048, 2048, 2048, 0, 64, 40, 40, 64, true, -1, 1, 0, 1},
      {16384, 2048, 2048, 2048, 0, 64, 40, 40, 64, true, -1, 1, 0, 1},  // many rows: 64 threads, 8 steps each
      {8192, 1028, 1028, 1032, 0, 64, 20, 20, 16, true, 5, 1, 0, 1},   // many rows, prefill, 128 threads
  };
  Rng rng(0xC0417);
  for (const ConvertCase& c : cases) {
    SCOPED_TRACE(describe(c));
    const bool prefill_mode = c.num_prefills >= 0;
    const int64_t positions = static_cast<int64_t>(c.bt_width) * c.block_size * c.dcp_world;

    std::vector<int32_t> req_id(static_cast<std::size_t>(c.rows));
    for (auto& r : req_id) {
      const uint64_t k = rng.below(100);
      r = k < 3 ? -1 : k < 5 ? c.num_reqs : k < 6 ? (rng.bernoulli(0.5) ? kI32Max : kI32Min)
                                               : static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.num_reqs)));
    }
    std::vector<int32_t> indices(static_cast<std::size_t>(c.rows * c.indices_stride));
    for (int64_t t = 0; t < c.rows; ++t) {
      const int64_t n = static_cast<int64_t>(rng.below(static_cast<uint64_t>(c.topk) + 1));  // valid prefix length
      for (int64_t j = 0; j < c.indices_stride; ++j) {
        int32_t v = -1;
        if (j >= c.topk) {
          v = static_cast<int32_t>(rng.next_u64());  // stride padding: junk never read
        } else if (j < n) {
          const uint64_t k = rng.below(100);
          if (k < 3) v = static_cast<int32_t>(positions + static_cast<int64_t>(rng.below(100)));
          else if (k < 4) v = rng.bernoulli(0.5) ? kI32Max : kI32Min;
          else if (k < 5) v = -2 - static_cast<int32_t>(rng.below(10));
          else v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(positions)));
        }
        indices[static_cast<std::size_t>(t * c.indices_stride + j)] = v;
      }
    }
    std::vector<int32_t> bt = random_block_table(rng, c.num_reqs, c.bt_width, c.bt_stride, 5000);
    bt[0] = 0x7FFFFFF0 / c.block_size + 1;  // phys * B + offset past INT32_MAX: the int32 cast of both backends
    if (bt.size() > 2) {  // the edge of the 32-bit fast path at B = 64: 2^25 - 1 fits an int32 slot, 2^25 not
      bt[1] = (1 << 25) - 1;
      bt[2] = 1 << 25;
    }
    std::vector<int32_t> prefill_req(static_cast<std::size_t>(c.rows), -1);
    std::vector<int32_t> pws(static_cast<std::size_t>(std::max(c.num_prefills, 1)), 0);
    if (prefill_mode) {
      for (auto& p : prefill_req) {
        const uint64_t k = rng.below(100);
        if (k < 40) p = -1;
        else if (k < 44) p = c.num_prefills + static_cast<int32_t>(rng.below(3));
        else if (k < 45) p = kI32Min;
        else if (c.num_prefills > 0) p = static_cast<int32_t>(rng.below(static_cast<uint64_t>(c.num_prefills)));
      }
      for (auto& w : pws) w = static_cast<int32_t>(rng.below(1000000));
      pws[0] = kI32Max - 1000;  // rows past INT32_MAX are invalid
      if (pws.size() > 1) pws[1] = -500;  // negative rows are invalid
    }

    DualBuffer req_buf(*host_, *cuda_, bytes_of(req_id));
    DualBuffer idx_buf(*host_, *cuda_, bytes_of(indices));
    DualBuffer bt_buf(*host_, *cuda_, bytes_of(bt));
    DualBuffer pr_buf(*host_, *cuda_, bytes_of(prefill_req));
    DualBuffer pws_buf(*host_, *cuda_, bytes_of(pws));
    DualBuffer out_buf(*host_, *cuda_,
                       std::vector<uint8_t>(static_cast<std::size_t>(c.rows * c.out_stride * 4), kPoisonByte),
                       c.out_shift);
    DualBuffer vc_buf(*host_, *cuda_, std::vector<uint8_t>(static_cast<std::size_t>(c.rows * 4), kPoisonByte));

    run_both([&](Backend& b, Side s) {
      mla::ConvertParams p;
      p.req_id = req_buf.ptr<int32_t>(s);
      p.num_tokens = c.rows;
      p.indices = idx_buf.ptr<int32_t>(s);
      p.indices_rows = c.rows;
      p.topk = c.topk;
      p.indices_row_stride = c.indices_stride;
      p.block_table = bt_buf.ptr<int32_t>(s);
      p.num_reqs = c.num_reqs;
      p.block_table_width = c.bt_width;
      p.block_table_stride = c.bt_stride;
      p.block_size = c.block_size;
      p.out = out_buf.ptr<int32_t>(s);
      p.out_row_stride = c.out_stride;
      p.valid_count = c.valid_count ? vc_buf.ptr<int32_t>(s) : nullptr;
      if (prefill_mode) {
        p.prefill_req = pr_buf.ptr<int32_t>(s);
        p.prefill_workspace_starts = c.num_prefills > 0 ? pws_buf.ptr<int32_t>(s) : nullptr;
        p.num_prefills = c.num_prefills;
      }
      p.dcp_world_size = c.dcp_world;
      p.dcp_rank = c.dcp_rank;
      p.dcp_interleave = c.dcp_interleave;
      return b.convert(p);
    });

    expect_same_i32(out_buf.payload(Side::kHost, "out"), out_buf.payload(Side::kCuda, "out"), "out");
    expect_same_i32(vc_buf.payload(Side::kHost, "valid_count"), vc_buf.payload(Side::kCuda, "valid_count"),
                    "valid_count");
    req_buf.expect_unchanged("req_id");
    idx_buf.expect_unchanged("indices");
    bt_buf.expect_unchanged("block_table");
    pr_buf.expect_unchanged("prefill_req");
    pws_buf.expect_unchanged("prefill_workspace_starts");
  }
}

// docs/semantics.md §6.1: req_id for the full batch, indices and out for the decode rows only. The call must be
// refused with a message that names the mismatch, and nothing written.
TEST_F(CudaBackendTest, ConvertRefusesMismatchedLengths) {
  const int32_t decode_rows = 4, full_rows = 10, topk = 8;
  const std::vector<int32_t> req_id(full_rows, 0), bt(4, 0);
  const std::vector<int32_t> indices(decode_rows * topk, 1);
  DualBuffer req_buf(*host_, *cuda_, bytes_of(req_id));
  DualBuffer idx_buf(*host_, *cuda_, bytes_of(indices));
  DualBuffer bt_buf(*host_, *cuda_, bytes_of(bt));
  DualBuffer out_buf(*host_, *cuda_, std::vector<uint8_t>(decode_rows * topk * 4, kPoisonByte));
  DualBuffer vc_buf(*host_, *cuda_, std::vector<uint8_t>(decode_rows * 4, kPoisonByte));

  mla::ConvertParams p;
  p.req_id = req_buf.ptr<int32_t>(Side::kCuda);
  p.num_tokens = full_rows;
  p.indices = idx_buf.ptr<int32_t>(Side::kCuda);
  p.indices_rows = decode_rows;
  p.topk = topk;
  p.indices_row_stride = topk;
  p.block_table = bt_buf.ptr<int32_t>(Side::kCuda);
  p.num_reqs = 1;
  p.block_table_width = 4;
  p.block_table_stride = 4;
  p.block_size = 64;
  p.out = out_buf.ptr<int32_t>(Side::kCuda);
  p.out_row_stride = topk;
  p.valid_count = vc_buf.ptr<int32_t>(Side::kCuda);

  const Status s = cuda_->convert(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("req_id"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("indices"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(full_rows)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(decode_rows)), std::string::npos) << s.message();
  require(cuda_->synchronize(), "synchronize");
  out_buf.expect_unchanged("out");
  vc_buf.expect_unchanged("valid_count");

  // The fix: req_id sliced to the rows of indices.
  p.num_tokens = decode_rows;
  require(cuda_->convert(p), "convert with sliced req_id");
  require(cuda_->synchronize(), "synchronize");
  const std::vector<uint8_t> out = out_buf.payload(Side::kCuda, "out");
  std::vector<int32_t> values(out.size() / 4);
  std::memcpy(values.data(), out.data(), out.size());
  for (int32_t v : values) EXPECT_EQ(v, 1);  // block_table[0][0] * 64 + 1
}

[[noreturn]] void print_and_exit(const std::string& what, int code) {
  std::fprintf(stderr, "%s\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

// A child process (a fault poisons the CUDA context for the rest of its process): a gather from
// unmapped device memory, then a wait; prints the first error and exits 0 if there was one.
[[noreturn]] void gather_from_unmapped_memory(bool sync_each) {
  mla::KernelPolicy policy;
  policy.sync_each = sync_each;
  std::string error;
  const std::unique_ptr<Backend> cuda = mla::make_cuda_backend(policy, &error);
  if (!cuda) print_and_exit("no CUDA backend: " + error, 2);
  const int32_t zero = 0;
  void *bt = nullptr, *ws = nullptr, *dst = nullptr;
  Status st = cuda->allocate(sizeof zero, &bt);
  if (st.ok()) st = cuda->allocate(sizeof zero, &ws);
  if (st.ok()) st = cuda->allocate(kRow * sizeof(bf16_t), &dst);
  if (st.ok()) st = cuda->copy_to_device(bt, &zero, sizeof zero);
  if (st.ok()) st = cuda->copy_to_device(ws, &zero, sizeof zero);
  if (!st.ok()) print_and_exit("setup: " + st.message(), 3);
  mla::GatherParams p;
  p.cache.data = reinterpret_cast<uint8_t*>(uintptr_t{0x1000});  // not device memory
  p.cache.num_blocks = 1;
  p.cache.block_size = 1;
  p.cache.page_stride_bytes = kEntry;
  p.block_table = static_cast<const int32_t*>(bt);
  p.num_reqs = 1;
  p.block_table_width = 1;
  p.block_table_stride = 1;
  p.workspace_starts = static_cast<const int32_t*>(ws);
  p.dst = static_cast<bf16_t*>(dst);
  p.dst_row_stride = kRow;
  p.num_rows = 1;
  st = cuda->gather(p);
  if (st.ok()) st = cuda->synchronize();
  if (st.ok()) print_and_exit("no fault", 4);
  print_and_exit(st.message(), 0);
}

// An execution fault surfaces at the next wait for the stream; its message names the operations
// issued since the last wait, and with the policy's sync_each the operation right after which it
// waited. Each in a fresh process ("threadsafe" death tests re-run this binary).
TEST(CudaBackendFaults, AFaultNamesTheOperationsSinceTheLastWait) {
  std::string why;
  if (!mla::cuda_backend_available(&why)) MLA_SKIP_WITHOUT_CUDA() << "CUDA backend unavailable: " << why;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(gather_from_unmapped_memory(false), ::testing::ExitedWithCode(0),
              "cudaStreamSynchronize \\(operations since the last wait: gather; MLA_CUDA_SYNC_EACH=1 waits after each");
  EXPECT_EXIT(gather_from_unmapped_memory(true), ::testing::ExitedWithCode(0),
              "cudaStreamSynchronize after gather \\(sync_each\\) \\(operations since the last wait: gather\\)");
}

}  // namespace

#else  // !MLA_HAVE_CUDA

TEST(CudaBackendTest, Unavailable) {
  std::string why;
  EXPECT_FALSE(mla::cuda_backend_available(&why));
  MLA_SKIP_WITHOUT_CUDA() << "this build has no CUDA backend: " << why;
}

#endif  // MLA_HAVE_CUDA
