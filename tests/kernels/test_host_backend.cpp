// The host backend (kernels/host/) on small hand-built inputs with hand-computed expectations.
// Every buffer an operation writes has guard elements on both sides; every test checks that
// skipped tokens, invalid rows and refused calls leave memory outside the payload untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/host/host_kernels.h"

namespace {

using mla::bf16_t;
using mla::DsMlaEntry;

constexpr int kEntry = DsMlaEntry::kBytes;
constexpr bf16_t kInvalidRow = 0x7FC0;

// n payload elements with kSlack guard elements on each side.
template <typename T>
class Guarded {
 public:
  static constexpr std::size_t kSlack = 1024;  // more than an entry or a row: an off-by-one lands here
  Guarded(std::size_t n, T fill, T guard) : v_(n + 2 * kSlack, guard), n_(n), guard_(guard) {
    std::fill(v_.begin() + kSlack, v_.begin() + kSlack + n, fill);
  }
  T* data() { return v_.data() + kSlack; }
  T& operator[](std::size_t i) { return v_[kSlack + i]; }
  std::size_t size() const { return n_; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < kSlack; ++i) {
      if (v_[i] != guard_ || v_[kSlack + n_ + i] != guard_) return false;
    }
    return true;
  }

 private:
  std::vector<T> v_;
  std::size_t n_;
  T guard_;
};

void put_f32_le(uint8_t* dst, uint32_t bits) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<uint8_t>(bits >> (8 * i));
}
void put_bf16_le(uint8_t* dst, bf16_t bits) {
  dst[0] = static_cast<uint8_t>(bits);
  dst[1] = static_cast<uint8_t>(bits >> 8);
}

class HostBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<mla::Backend> backend = mla::make_host_backend();
};

TEST_F(HostBackendTest, Info) {
  const mla::BackendInfo info = backend->info();
  EXPECT_EQ(info.name, "host");
  EXPECT_FALSE(info.device.empty());
  EXPECT_EQ(info.runtime, "");
}

TEST_F(HostBackendTest, MemoryIsAlignedAndCopiesAreExact) {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{1} << 20}) {
    void* p = nullptr;
    ASSERT_TRUE(backend->allocate(bytes, &p).ok());
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    backend->release(p);
  }
  std::vector<uint8_t> src(777), back(777, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 31 + 7);
  void* dev = nullptr;
  ASSERT_TRUE(backend->allocate(src.size(), &dev).ok());
  ASSERT_TRUE(backend->copy_to_device(dev, src.data(), src.size()).ok());
  ASSERT_TRUE(backend->copy_to_host(back.data(), dev, back.size()).ok());
  EXPECT_EQ(src, back);
  EXPECT_TRUE(backend->synchronize().ok());
  EXPECT_FALSE(backend->copy_to_host(nullptr, dev, 4).ok());
  EXPECT_FALSE(backend->copy_to_device(dev, nullptr, 4).ok());
  EXPECT_TRUE(backend->copy_to_device(nullptr, nullptr, 0).ok());
  EXPECT_FALSE(backend->allocate(16, nullptr).ok());
  backend->release(dev);
  backend->release(nullptr);
}

// --- pack ------------------------------------------------------------------------------------

struct PackFixture {
  static constexpr int kBlockSize = 2, kNumBlocks = 3, kPageStride = kBlockSize * kEntry + 32;  // padded
  static constexpr int kKvStride = 520, kPeStride = 72;  // row padding
  static constexpr int kInputs = 5;
  Guarded<uint8_t> cache{static_cast<std::size_t>(kNumBlocks) * kPageStride, 0xFF, 0xA5};
  std::vector<bf16_t> kv_c = std::vector<bf16_t>(kInputs * kKvStride, 0);
  std::vector<bf16_t> k_pe = std::vector<bf16_t>(kInputs * kPeStride, 0);
  // 4 tokens; input row 4 lies past num_tokens and must not be packed.
  std::vector<int64_t> slots = {3, -1, kBlockSize * kNumBlocks, 0, 2};

  mla::PackParams params() {
    mla::PackParams p;
    p.kv_c = kv_c.data();
    p.kv_c_row_stride = kKvStride;
    p.k_pe = k_pe.data();
    p.k_pe_row_stride = kPeStride;
    p.slot_mapping = slots.data();
    p.num_tokens = 4;
    p.cache = {cache.data(), kNumBlocks, kBlockSize, kPageStride};
    return p;
  }
  uint8_t* entry(int64_t slot) {
    return cache.data() + (slot / kBlockSize) * kPageStride + (slot % kBlockSize) * kEntry;
  }
};

TEST_F(HostBackendTest, PackQuantizesTilesByHand) {
  PackFixture f;
  for (auto& v : f.kv_c) v = 0x3F80;  // every unset value of every row: 1.0
  bf16_t* t0 = f.kv_c.data();         // token 0 -> slot 3
  std::fill(t0, t0 + 512, bf16_t{0});
  // Tile 0, amax 448 -> scale 1.0 exactly; bytes are e4m3(x).
  t0[0] = 0x43E0;  // 448      -> 0x7E
  t0[1] = 0x3F88;  // 1.0625   -> tie 1 | 1.125, even -> 0x38
  t0[2] = 0x3F98;  // 1.1875   -> tie 1.125 | 1.25, even -> 0x3A
  t0[3] = 0xC040;  // -3       -> 0xC4
  t0[4] = 0x3A80;  // 2^-10    -> tie 0 | 2^-9, even -> 0x00
  t0[5] = 0x3B40;  // 3*2^-10  -> tie 1 | 2 quanta, even -> 0x02
  // Tile 1, amax 7 -> scale 7/448 = 2^-6 exactly; bytes are e4m3(64 x).
  t0[128] = 0x40E0;  // 7            -> 448 -> 0x7E
  t0[129] = 0xBF00;  // -0.5         -> -32 -> 0xE0
  t0[130] = 0x3DCD;  // 0.10009765625 -> 6.40625, nearer 6.5 than 6 -> 0x4D
  // Tile 2: only zeros (one negative) -> scale FLT_MIN; -0 keeps its sign.
  t0[256] = 0x8000;  // -0 -> 0x80
  // Tile 3, amax 1.53125 -> scale 1.53125 / 448 = 7/2048 exactly (0x3B600000). The quotients
  // below are exact ties (x * 2048/7 = 200, 232, 400); a reciprocal multiply would land just
  // above them and round up instead.
  t0[384] = 0x3FC4;  // 1.53125     -> 448 -> 0x7E
  t0[385] = 0x3F2F;  // 0.68359375  -> 200, tie 192 | 208 -> 0x74
  t0[386] = 0x3F4B;  // 0.79296875  -> 232, tie 224 | 240 -> 0x76
  t0[387] = 0x3FAF;  // 1.3671875   -> 400, tie 384 | 416 -> 0x7C
  t0[388] = 0xBF2F;  // -0.68359375 -> -200 -> 0xF4
  for (int i = 0; i < 64; ++i) f.k_pe[i] = static_cast<bf16_t>(0x1000 + i);
  f.k_pe[7] = 0x7FC1;  // a NaN payload is copied as bits
  // Token 3 -> slot 0: tile 0 amax 3 -> scale fl(3/448) = 0x3BDB6DB7; tiles 1..3 all 1.0 ->
  // scale fl(1/448) = 0x3B124925 and 1 / that = 447.99997 -> 0x7E.
  bf16_t* t3 = f.kv_c.data() + 3 * PackFixture::kKvStride;
  std::fill(t3, t3 + 128, bf16_t{0});
  t3[0] = 0x4040;  // 3    -> 448       -> 0x7E
  t3[1] = 0x3F80;  // 1    -> 149.33333 -> 144 -> 0x71
  t3[2] = 0xC000;  // -2   -> -298.667  -> -288 -> 0xF9
  t3[3] = 0x3F00;  // 0.5  -> 74.66667  -> 72 -> 0x69
  for (int i = 0; i < 64; ++i) f.k_pe[3 * PackFixture::kPeStride + i] = static_cast<bf16_t>(0xB000 + i);

  const std::vector<uint8_t> kv_before(reinterpret_cast<uint8_t*>(f.kv_c.data()),
                                       reinterpret_cast<uint8_t*>(f.kv_c.data() + f.kv_c.size()));
  ASSERT_TRUE(backend->pack(f.params()).ok());

  std::array<uint8_t, kEntry> want0{};
  want0[0] = 0x7E, want0[1] = 0x38, want0[2] = 0x3A, want0[3] = 0xC4, want0[4] = 0x00, want0[5] = 0x02;
  want0[128] = 0x7E, want0[129] = 0xE0, want0[130] = 0x4D;
  want0[256] = 0x80;
  want0[384] = 0x7E, want0[385] = 0x74, want0[386] = 0x76, want0[387] = 0x7C, want0[388] = 0xF4;
  put_f32_le(&want0[512], 0x3F800000u);  // 1.0
  put_f32_le(&want0[516], 0x3C800000u);  // 2^-6
  put_f32_le(&want0[520], 0x00800000u);  // FLT_MIN
  put_f32_le(&want0[524], 0x3B600000u);  // 7/2048
  for (int i = 0; i < 64; ++i) put_bf16_le(&want0[528 + 2 * i], f.k_pe[i]);

  std::array<uint8_t, kEntry> want3{};
  std::fill(want3.begin() + 128, want3.begin() + 512, uint8_t{0x7E});
  want3[0] = 0x7E, want3[1] = 0x71, want3[2] = 0xF9, want3[3] = 0x69;
  put_f32_le(&want3[512], 0x3BDB6DB7u);
  for (int t = 1; t < 4; ++t) put_f32_le(&want3[512 + 4 * t], 0x3B124925u);
  for (int i = 0; i < 64; ++i) put_bf16_le(&want3[528 + 2 * i], static_cast<bf16_t>(0xB000 + i));

  for (int b = 0; b < kEntry; ++b) {
    EXPECT_EQ(f.entry(3)[b], want0[b]) << "slot 3 byte " << b;
    EXPECT_EQ(f.entry(0)[b], want3[b]) << "slot 0 byte " << b;
  }
  // Everything else stays unused (0xFF): skipped slots -1 and 6, input row 4 past num_tokens
  // (slot 2), the other slots, and the page padding.
  for (int64_t i = 0; i < static_cast<int64_t>(f.cache.size()); ++i) {
    const int64_t page_off = i % PackFixture::kPageStride;
    const int64_t slot = (i / PackFixture::kPageStride) * PackFixture::kBlockSize + page_off / kEntry;
    if (page_off < PackFixture::kBlockSize * kEntry && (slot == 0 || slot == 3)) continue;
    ASSERT_EQ(f.cache[i], 0xFF) << "byte " << i;
  }
  EXPECT_TRUE(f.cache.guards_intact());
  EXPECT_EQ(0, std::memcmp(kv_before.data(), f.kv_c.data(), kv_before.size()));
}

TEST_F(HostBackendTest, PackSkipsEverySlotOutsideThePool) {
  PackFixture f;
  for (auto& v : f.kv_c) v = 0x3F80;
  f.slots = {-1, -(int64_t{1} << 40), 6, int64_t{1} << 40, 7};
  auto p = f.params();
  p.num_tokens = 5;
  ASSERT_TRUE(backend->pack(p).ok());
  for (std::size_t i = 0; i < f.cache.size(); ++i) ASSERT_EQ(f.cache[i], 0xFF) << i;
  EXPECT_TRUE(f.cache.guards_intact());
}

TEST_F(HostBackendTest, PackRefusesInvalidParamsWithoutWriting) {
  PackFixture f;
  auto p = f.params();
  p.cache.page_stride_bytes = PackFixture::kBlockSize * 576;  // sized by the head size
  const mla::Status s = backend->pack(p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("page_stride_bytes"), std::string::npos) << s.message();
  for (std::size_t i = 0; i < f.cache.size(); ++i) ASSERT_EQ(f.cache[i], 0xFF) << i;
  p = f.params();
  p.num_tokens = 0;
  p.kv_c = nullptr;
  EXPECT_TRUE(backend->pack(p).ok());
  EXPECT_TRUE(f.cache.guards_intact());
}

// --- gather ----------------------------------------------------------------------------------

// A cache of 3 blocks x 4 tokens whose entries, where written, dequantize to known rows:
//   tile 0: bytes 0x38 (1.0),  scale 0.5          -> 0x3F00
//   tile 1: bytes 0x3A (1.25), scale 0x3F813333   -> fp32 product 10584063.75 / 2^23 rounds to
//           1.26171875, a bf16 tie -> even 0x3FA2 (the exact product would give 0x3FA1: the
//           rule is one fp32 multiply, then one rounding to bf16)
//   tile 2: bytes alternate 0x7F / 0xFF (NaN)     -> 0x7FC0 / 0xFFC0
//   tile 3: bytes 0xC4 (-3),   scale 3.0          -> -9 -> 0xC110
//   RoPE element i of slot s: 0x4000 + 64 s + i
struct GatherFixture {
  static constexpr int kBlockSize = 4, kNumBlocks = 3, kPageStride = kBlockSize * kEntry + 16;
  Guarded<uint8_t> cache{static_cast<std::size_t>(kNumBlocks) * kPageStride, 0xFF, 0xA5};

  void write_entry(int64_t slot) {
    uint8_t* e = cache.data() + (slot / kBlockSize) * kPageStride + (slot % kBlockSize) * kEntry;
    std::fill(e, e + 128, uint8_t{0x38});
    std::fill(e + 128, e + 256, uint8_t{0x3A});
    for (int i = 256; i < 384; ++i) e[i] = (i % 2) ? 0xFF : 0x7F;
    std::fill(e + 384, e + 512, uint8_t{0xC4});
    put_f32_le(e + 512, 0x3F000000u);
    put_f32_le(e + 516, 0x3F813333u);
    put_f32_le(e + 520, 0x3F800000u);
    put_f32_le(e + 524, 0x40400000u);
    for (int i = 0; i < 64; ++i) put_bf16_le(e + 528 + 2 * i, rope(slot, i));
  }
  static bf16_t rope(int64_t slot, int i) { return static_cast<bf16_t>(0x4000 + 64 * slot + i); }
  static std::vector<bf16_t> row_of(int64_t slot) {
    std::vector<bf16_t> r(576);
    for (int i = 0; i < 128; ++i) r[i] = 0x3F00;
    for (int i = 128; i < 256; ++i) r[i] = 0x3FA2;
    for (int i = 256; i < 384; ++i) r[i] = (i % 2) ? 0xFFC0 : 0x7FC0;
    for (int i = 384; i < 512; ++i) r[i] = 0xC110;
    for (int i = 0; i < 64; ++i) r[512 + i] = rope(slot, i);
    return r;
  }
  mla::PagedCacheView view() { return {cache.data(), kNumBlocks, kBlockSize, kPageStride}; }
};

constexpr int64_t kInvalid = -1;

// Compares dst rows with the rows of the given source slots (kInvalid = the invalid-row pattern)
// and checks the row padding and the guards.
void expect_rows(Guarded<bf16_t>& dst, int64_t row_stride, const std::vector<int64_t>& sources) {
  for (std::size_t o = 0; o < sources.size(); ++o) {
    const std::vector<bf16_t> want =
        sources[o] == kInvalid ? std::vector<bf16_t>(576, kInvalidRow) : GatherFixture::row_of(sources[o]);
    for (int e = 0; e < 576; ++e) {
      ASSERT_EQ(dst[o * row_stride + e], want[e]) << "row " << o << " element " << e;
    }
    for (int64_t e = 576; e < row_stride; ++e) ASSERT_EQ(dst[o * row_stride + e], 0x1234) << "row padding";
  }
  EXPECT_TRUE(dst.guards_intact());
}

TEST_F(HostBackendTest, GatherMapsRowsThroughStartsAndBlockTable) {
  GatherFixture f;
  for (int64_t s : {3, 5, 6, 7, 10, 11}) f.write_entry(s);
  // Width 2, stride 3: column 2 holds valid blocks that must never be used.
  const std::vector<int32_t> bt = {2, 3, 1,    // r0: logical 1 -> block 3 == num_blocks
                                   1, -1, 0,   // r1: zero rows
                                   0, -1, 2,   // r2: logical 1 -> negative block
                                   2, 1, 0};   // r3
  const std::vector<int32_t> ws = {0, 3, 3, 6};
  const std::vector<int32_t> ss = {2, 0, 3, 5};  // not block-aligned
  constexpr int64_t kRows = 12, kStride = 580;
  Guarded<bf16_t> dst(kRows * kStride, 0x1234, 0xA5A5);
  mla::GatherParams g;
  g.cache = f.view();
  g.block_table = bt.data();
  g.num_reqs = 4;
  g.block_table_width = 2;
  g.block_table_stride = 3;
  g.workspace_starts = ws.data();
  g.seq_starts = ss.data();
  g.dst = dst.data();
  g.dst_row_stride = kStride;
  g.num_rows = kRows;
  ASSERT_TRUE(backend->gather(g).ok());
  // r0: p 2, 3 -> block 2 offsets 2, 3 (slots 10, 11); p 4 -> block 3: invalid.
  // r2: p 3 -> block 0 offset 3 (slot 3); p 4, 5 -> block -1: invalid.
  // r3: p 5, 6, 7 -> block 1 (slots 5, 6, 7); p 8.. -> logical 2 >= width: invalid.
  expect_rows(dst, kStride, {10, 11, kInvalid, 3, kInvalid, kInvalid, 5, 6, 7, kInvalid, kInvalid, kInvalid});
  EXPECT_TRUE(f.cache.guards_intact());
}

TEST_F(HostBackendTest, GatherRowsBeforeFirstStartAndNegativePositionsAreInvalid) {
  GatherFixture f;
  for (int64_t s = 0; s < 12; ++s) f.write_entry(s);
  const std::vector<int32_t> bt = {1, 0, 2};
  const std::vector<int32_t> ws = {2};  // ws[0] > 0 (docs/semantics.md §6.6)
  const std::vector<int32_t> ss = {-1};
  constexpr int64_t kRows = 5;
  Guarded<bf16_t> dst(kRows * 576, 0x1234, 0xA5A5);
  mla::GatherParams g;
  g.cache = f.view();
  g.block_table = bt.data();
  g.num_reqs = 1;
  g.block_table_width = 3;
  g.block_table_stride = 3;
  g.workspace_starts = ws.data();
  g.seq_starts = ss.data();
  g.dst = dst.data();
  g.num_rows = kRows;
  ASSERT_TRUE(backend->gather(g).ok());
  // Rows 0, 1 precede ws[0]; row 2 -> p -1; rows 3, 4 -> p 0, 1 -> block 1 (slots 4, 5).
  expect_rows(dst, 576, {kInvalid, kInvalid, kInvalid, 4, 5});

  g.seq_starts = nullptr;  // positions start at 0
  Guarded<bf16_t> dst2(kRows * 576, 0x1234, 0xA5A5);
  g.dst = dst2.data();
  ASSERT_TRUE(backend->gather(g).ok());
  expect_rows(dst2, 576, {kInvalid, kInvalid, 4, 5, 6});
}

TEST_F(HostBackendTest, GatherOfZeroRowsDoesNothing) {
  GatherFixture f;
  const std::vector<int32_t> bt = {0}, ws = {0};
  Guarded<bf16_t> dst(0, 0, 0xA5A5);
  mla::GatherParams g;
  g.cache = f.view();
  g.block_table = bt.data();
  g.num_reqs = 1;
  g.block_table_width = 1;
  g.block_table_stride = 1;
  g.workspace_starts = ws.data();
  g.dst = dst.data();
  g.num_rows = 0;
  EXPECT_TRUE(backend->gather(g).ok());
  EXPECT_TRUE(dst.guards_intact());
  g.dst = nullptr;
  EXPECT_TRUE(backend->gather(g).ok());
}

TEST_F(HostBackendTest, GatherRefusesInvalidParamsWithoutWriting) {
  GatherFixture f;
  const std::vector<int32_t> bt = {0}, ws = {0};
  Guarded<bf16_t> dst(2 * 576, 0x1234, 0xA5A5);
  mla::GatherParams g;
  g.cache = f.view();
  g.block_table = bt.data();
  g.num_reqs = 1;
  g.block_table_width = 1;
  g.block_table_stride = 1;
  g.workspace_starts = ws.data();
  g.dst = dst.data();
  g.num_rows = 2;
  g.dst_row_stride = 575;
  EXPECT_FALSE(backend->gather(g).ok());
  for (std::size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0x1234);
  EXPECT_TRUE(dst.guards_intact());
}

// --- flat FP8 gather (failure mode 2, reproduced on purpose) ---------------------------------

// Value of an E4M3 code from the format definition, for the flat-read expectations.
double e4m3_definition(uint8_t code) {
  const int exponent = (code >> 3) & 0xF, mantissa = code & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return NAN;
  const double m = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (code & 0x80) ? -m : m;
}
// bf16 bits of a value with at most 4 significant bits (exact in bf16), NaN -> sign | 0x7FC0.
bf16_t exact_bf16(double v, uint8_t code) {
  if (std::isnan(v)) return (code & 0x80) ? 0xFFC0 : 0x7FC0;
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<bf16_t>(u >> 16);
}

TEST_F(HostBackendTest, FlatFp8GatherReadsFirst576BytesWithGlobalScale) {
  constexpr int kBlockSize = 2, kNumBlocks = 2, kPageStride = kBlockSize * kEntry;
  Guarded<uint8_t> cache(kNumBlocks * kPageStride, 0, 0xA5);
  for (std::size_t i = 0; i < cache.size(); ++i) cache[i] = static_cast<uint8_t>((i * 37 + 11) & 0xFF);
  const std::vector<int32_t> bt = {1, 0};  // one request: logical 0 -> block 1, 1 -> block 0
  const std::vector<int32_t> ws = {0};
  const std::vector<int32_t> ss = {1};
  for (int entry_stride : {kEntry, 576}) {  // the ds_mla stride, and the head-size stride (docs/semantics.md §6.5)
    Guarded<bf16_t> dst(4 * 576, 0x1234, 0xA5A5);
    mla::FlatFp8GatherParams p;
    p.base.cache = {cache.data(), kNumBlocks, kBlockSize, kPageStride};
    p.base.block_table = bt.data();
    p.base.num_reqs = 1;
    p.base.block_table_width = 2;
    p.base.block_table_stride = 2;
    p.base.workspace_starts = ws.data();
    p.base.seq_starts = ss.data();
    p.base.dst = dst.data();
    p.base.num_rows = 4;
    p.entry_stride_bytes = entry_stride;
    p.global_scale = 4.0f;  // a power of two: the products are exact
    ASSERT_TRUE(p.validate().ok());
    mla::host::gather_flat_fp8(p);  // not a Backend operation: --inject flat-fp8-gather runs it
    // Rows 0..2 -> positions 1, 2, 3 -> (block 1, offset 1), (block 0, 0), (block 0, 1); row 3 ->
    // position 4 -> logical 2 >= width: invalid.
    const int64_t starts[] = {1 * kPageStride + 1 * entry_stride, 0, entry_stride};
    for (int o = 0; o < 3; ++o) {
      for (int e = 0; e < 576; ++e) {
        const uint8_t code = cache[starts[o] + e];
        ASSERT_EQ(dst[o * 576 + e], exact_bf16(e4m3_definition(code) * 4.0, code))
            << "stride " << entry_stride << " row " << o << " byte " << e;
      }
    }
    for (int e = 0; e < 576; ++e) ASSERT_EQ(dst[3 * 576 + e], kInvalidRow);
    EXPECT_TRUE(dst.guards_intact());
  }
  EXPECT_TRUE(cache.guards_intact());
}

// --- convert ---------------------------------------------------------------------------------

struct ConvertFixture {
  static constexpr int kTopk = 5, kStride = 6, kRows = 3;
  // B = 4, width 3, stride 4; column 3 holds a valid block that must never be used.
  std::vector<int32_t> bt = {5, -1, 2, 9,
                             0, 1, 3, 9};
  std::vector<int32_t> req_id = {1, 0, 2};  // request 2 does not exist
  std::vector<int32_t> indices = {0, 5, 11, 12, -1, 777,
                                  4, 3, 9, -7, 100000, 777,
                                  0, 1, 2, 3, 4, 777};
  Guarded<int32_t> out{kRows * kStride, 0x7777, 0x5A5A5A5A};
  Guarded<int32_t> valid{kRows, 0x7777, 0x5A5A5A5A};

  mla::ConvertParams params() {
    mla::ConvertParams c;
    c.req_id = req_id.data();
    c.num_tokens = kRows;
    c.indices = indices.data();
    c.indices_rows = kRows;
    c.topk = kTopk;
    c.indices_row_stride = kStride;
    c.block_table = bt.data();
    c.num_reqs = 2;
    c.block_table_width = 3;
    c.block_table_stride = 4;
    c.block_size = 4;
    c.out = out.data();
    c.out_row_stride = kStride;
    c.valid_count = valid.data();
    return c;
  }
  void expect(const std::vector<std::vector<int32_t>>& rows, const std::vector<int32_t>& counts) {
    for (int t = 0; t < kRows; ++t) {
      for (int j = 0; j < kTopk; ++j) EXPECT_EQ(out[t * kStride + j], rows[t][j]) << "row " << t << " col " << j;
      EXPECT_EQ(out[t * kStride + kTopk], 0x7777) << "row padding";
      EXPECT_EQ(valid[t], counts[t]) << "valid_count " << t;
    }
    EXPECT_TRUE(out.guards_intact());
    EXPECT_TRUE(valid.guards_intact());
  }
};

TEST_F(HostBackendTest, ConvertThroughBlockTable) {
  ConvertFixture f;
  ASSERT_TRUE(backend->convert(f.params()).ok());
  // Row 0 (request 1): 0 -> 0*4+0; 5 -> block 1, off 1 -> 5; 11 -> block 3, off 3 -> 15;
  //   12 -> logical 3 >= width; -1.
  // Row 1 (request 0): 4 -> negative block; 3 -> 5*4+3 = 23; 9 -> 2*4+1 = 9; -7; 100000 -> past width.
  // Row 2: request 2 is out of range -> whole row -1.
  f.expect({{0, 5, 15, -1, -1}, {-1, 23, 9, -1, -1}, {-1, -1, -1, -1, -1}}, {3, 2, 0});
}

TEST_F(HostBackendTest, ConvertPrefillWorkspaceRows) {
  ConvertFixture f;
  f.req_id = {1, 0, 1};
  const std::vector<int32_t> prefill_req = {-1, 0, 1};
  const std::vector<int32_t> starts = {100};
  auto c = f.params();
  c.prefill_req = prefill_req.data();
  c.prefill_workspace_starts = starts.data();
  c.num_prefills = 1;
  ASSERT_TRUE(backend->convert(c).ok());
  // Row 0: not a prefill token, block table as above. Row 1: workspace row 100 + tok, not bounded
  // by the block table. Row 2: prefill index 1 >= num_prefills -> whole row -1.
  f.expect({{0, 5, 15, -1, -1}, {104, 103, 109, -1, 100100}, {-1, -1, -1, -1, -1}}, {3, 4, 0});
}

TEST_F(HostBackendTest, ConvertDecodeContextParallelRank) {
  ConvertFixture f;
  f.req_id = {1, 1, 0};
  f.indices = {0, 2, 3, 6, 11, 777,
               1, 7, 10, 14, 15, 777,
               2, 3, 6, 7, 10, 777};
  auto c = f.params();
  c.dcp_world_size = 2;
  c.dcp_rank = 1;
  c.dcp_interleave = 2;
  ASSERT_TRUE(backend->convert(c).ok());
  // Rank 1 owns positions with (pos / 2) % 2 == 1, at local (pos / 4) * 2 + pos % 2:
  //   2 -> 0, 3 -> 1, 6 -> 2, 7 -> 3, 10 -> 4, 11 -> 5, 14 -> 6, 15 -> 7; 0 and 1 not owned.
  // Row 0 (request 1, blocks 0, 1, 3): -1, 0, 1, 2, local 5 -> block 1 off 1 -> 5.
  // Row 1 (request 1): -1, 3, local 4 -> 4, local 6 -> 6, local 7 -> 7.
  // Row 2 (request 0, blocks 5, -1, 2): local 0 -> 20, 1 -> 21, 2 -> 22, 3 -> 23, local 4 -> -1.
  f.expect({{-1, 0, 1, 2, 5}, {-1, 3, 4, 6, 7}, {20, 21, 22, 23, -1}}, {4, 4, 4});
}

TEST_F(HostBackendTest, ConvertRefusesReqIdLongerThanIndicesWithoutWriting) {
  ConvertFixture f;
  f.req_id = {1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0};  // the full batch; indices hold 3 decode rows
  auto c = f.params();
  c.num_tokens = 12;
  const mla::Status s = backend->convert(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("req_id has 12 rows but indices has 3 rows"), std::string::npos) << s.message();
  for (std::size_t i = 0; i < f.out.size(); ++i) ASSERT_EQ(f.out[i], 0x7777);
  for (std::size_t i = 0; i < f.valid.size(); ++i) ASSERT_EQ(f.valid[i], 0x7777);
  EXPECT_TRUE(f.out.guards_intact());
}

TEST_F(HostBackendTest, ConvertWithoutValidCount) {
  ConvertFixture f;
  auto c = f.params();
  c.valid_count = nullptr;
  ASSERT_TRUE(backend->convert(c).ok());
  EXPECT_EQ(f.out[2], 15);
  for (std::size_t i = 0; i < f.valid.size(); ++i) EXPECT_EQ(f.valid[i], 0x7777);
}

// --- arbitrary memory contents ------------------------------------------------------------------

// validate() cannot see the values in memory; the kernels must stay inside their buffers for any of
// them (extremes, unsorted starts, garbage indices). Run under ASan this also proves no stray read.
TEST_F(HostBackendTest, ArbitraryTableAndIndexValuesStayInBounds) {
  std::mt19937 rng(20240611);
  const int32_t extremes[] = {std::numeric_limits<int32_t>::min(), -2, -1, 0, 1, 2, 3, 4, 5,
                              std::numeric_limits<int32_t>::max()};
  auto any_int = [&]() -> int32_t {
    return (rng() % 2) ? extremes[rng() % 10] : static_cast<int32_t>(rng());
  };
  GatherFixture f;
  for (int64_t s = 0; s < 12; ++s) f.write_entry(s);
  for (int round = 0; round < 200; ++round) {
    std::vector<int32_t> bt(3 * 4), ws(3), ss(3), req(6), idx(6 * 8), prefill(6), pstarts(2);
    for (auto* v : {&bt, &ws, &ss, &req, &idx, &prefill, &pstarts}) {
      for (auto& x : *v) x = any_int();
    }
    Guarded<bf16_t> dst(7 * 576, 0x1234, 0xA5A5);
    mla::GatherParams g;
    g.cache = f.view();
    g.block_table = bt.data();
    g.num_reqs = 3;
    g.block_table_width = 3;
    g.block_table_stride = 4;
    g.workspace_starts = ws.data();
    g.seq_starts = (round % 2) ? ss.data() : nullptr;
    g.dst = dst.data();
    g.num_rows = 7;
    ASSERT_TRUE(backend->gather(g).ok());
    ASSERT_TRUE(dst.guards_intact());
    mla::FlatFp8GatherParams flat;
    flat.base = g;
    ASSERT_TRUE(flat.validate().ok());
    mla::host::gather_flat_fp8(flat);
    ASSERT_TRUE(dst.guards_intact());

    Guarded<int32_t> out(6 * 8, 0x7777, 0x5A5A5A5A);
    mla::ConvertParams c;
    c.req_id = req.data();
    c.num_tokens = c.indices_rows = 6;
    c.indices = idx.data();
    c.topk = 8;
    c.indices_row_stride = 8;
    c.block_table = bt.data();
    c.num_reqs = 3;
    c.block_table_width = 3;
    c.block_table_stride = 4;
    c.block_size = 4;
    c.out = out.data();
    c.out_row_stride = 8;
    if (round % 2) {
      c.prefill_req = prefill.data();
      c.prefill_workspace_starts = pstarts.data();
      c.num_prefills = 2;
    }
    if (round % 3 == 0) {
      c.dcp_world_size = 2;
      c.dcp_rank = 1;
      c.dcp_interleave = 2;
    }
    ASSERT_TRUE(backend->convert(c).ok());
    ASSERT_TRUE(out.guards_intact());
  }
  EXPECT_TRUE(f.cache.guards_intact());
}

}  // namespace
