// Tests of the independent cache-path reference (reference/cache_reference.h). Expected values are
// computed by hand (worked in the comments) or taken from an independent oracle (the CPU's own
// double -> float conversion); never from the code under test.
#include "reference/cache_reference.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

namespace mla::ref {
namespace {

constexpr int kEntry = 656;
constexpr int kScaleAt = 512;
constexpr int kRopeAt = 528;

// bf16 bits of a float that is exactly representable in bf16 (checked): the top half of its bits.
uint16_t bf16_of(float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  EXPECT_EQ(bits & 0xFFFFu, 0u) << f << " is not a bf16 value";
  return static_cast<uint16_t>(bits >> 16);
}

uint32_t read_u32_le(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint16_t read_u16_le(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

bool bf16_is_nan(uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }

// The four tile scales of an entry, as fp32 bits, little-endian.
void write_scales(std::array<uint8_t, kEntry>& e, const uint32_t (&scales)[4]) {
  for (int t = 0; t < 4; ++t)
    for (int b = 0; b < 4; ++b) e[static_cast<size_t>(kScaleAt + 4 * t + b)] = static_cast<uint8_t>(scales[t] >> (8 * b));
}

// ================================ FP8 E4M3 ====================================================

TEST(E4m3Value, HandPickedCodes) {
  EXPECT_EQ(e4m3_value(0x7E), 448.0);                  // 0 1111 110: 1.75 * 2^8
  EXPECT_EQ(e4m3_value(0xFE), -448.0);
  EXPECT_EQ(e4m3_value(0x08), std::ldexp(1.0, -6));    // smallest normal
  EXPECT_EQ(e4m3_value(0x01), std::ldexp(1.0, -9));    // smallest subnormal: 1/8 * 2^-6
  EXPECT_EQ(e4m3_value(0x07), 7 * std::ldexp(1.0, -9));  // largest subnormal
  EXPECT_EQ(e4m3_value(0x0F), 1.875 * std::ldexp(1.0, -6));
  EXPECT_EQ(e4m3_value(0x38), 1.0);                    // 0 0111 000
  EXPECT_EQ(e4m3_value(0xB8), -1.0);
  EXPECT_EQ(e4m3_value(0x3C), 1.5);                    // 0 0111 100
  EXPECT_EQ(e4m3_value(0x77), 240.0);                  // 0 1110 111: 1.875 * 2^7
  EXPECT_EQ(e4m3_value(0x78), 256.0);                  // 0 1111 000: exponent 15 is finite in "fn"
  EXPECT_EQ(e4m3_value(0x00), 0.0);
  EXPECT_FALSE(std::signbit(e4m3_value(0x00)));
  EXPECT_EQ(e4m3_value(0x80), 0.0);
  EXPECT_TRUE(std::signbit(e4m3_value(0x80)));
  EXPECT_TRUE(std::isnan(e4m3_value(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_value(0xFF)));
}

TEST(E4m3Value, OnlyTwoNaNsAndStrictlyIncreasing) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) nans += std::isnan(e4m3_value(static_cast<uint8_t>(c))) ? 1 : 0;
  EXPECT_EQ(nans, 2);
  for (int c = 1; c <= 0x7E; ++c) {
    EXPECT_LT(e4m3_value(static_cast<uint8_t>(c - 1)), e4m3_value(static_cast<uint8_t>(c))) << c;
    EXPECT_EQ(e4m3_value(static_cast<uint8_t>(c | 0x80)), -e4m3_value(static_cast<uint8_t>(c))) << c;
  }
}

TEST(E4m3Encode, ExactValues) {
  EXPECT_EQ(e4m3_encode(1.0), 0x38);
  EXPECT_EQ(e4m3_encode(-1.0), 0xB8);
  EXPECT_EQ(e4m3_encode(448.0), 0x7E);
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0, -6)), 0x08);
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0, -9)), 0x01);
  EXPECT_EQ(e4m3_encode(0.0), 0x00);
  EXPECT_EQ(e4m3_encode(-0.0), 0x80);
}

TEST(E4m3Encode, RoundsHalfToEven) {
  EXPECT_EQ(e4m3_encode(1.0625), 0x38);   // halfway 1.0 (m=0) / 1.125 (m=1): even -> 1.0
  EXPECT_EQ(e4m3_encode(1.1875), 0x3A);   // halfway 1.125 (m=1) / 1.25 (m=2): even -> 1.25
  EXPECT_EQ(e4m3_encode(-1.1875), 0xBA);
  EXPECT_EQ(e4m3_encode(1.0625 + 1e-9), 0x39);  // just above the tie -> 1.125
  EXPECT_EQ(e4m3_encode(432.0), 0x7E);    // halfway 416 (m=5) / 448 (m=6) -> 448
  EXPECT_EQ(e4m3_encode(424.0), 0x7D);    // nearer 416
  EXPECT_EQ(e4m3_encode(400.0), 0x7C);    // halfway 384 (m=4) / 416 (m=5) -> 384
  // Subnormals (quantum 2^-9).
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0, -10)), 0x00);      // halfway 0 / 2^-9 -> 0
  EXPECT_EQ(e4m3_encode(-std::ldexp(1.0, -10)), 0x80);     // keeps its sign
  EXPECT_EQ(e4m3_encode(3 * std::ldexp(1.0, -10)), 0x02);  // halfway 2^-9 / 2^-8 -> 2^-8
  EXPECT_EQ(e4m3_encode(std::ldexp(1.0, -11)), 0x00);
  EXPECT_EQ(e4m3_encode(15 * std::ldexp(1.0, -10)), 0x08);  // halfway 7*2^-9 / 2^-6 -> 2^-6 (normal)
  EXPECT_EQ(e4m3_encode(1.0625 * std::ldexp(1.0, -6)), 0x08);  // halfway 2^-6 / 1.125*2^-6 -> 2^-6
}

TEST(E4m3Encode, SaturatesAndNaN) {
  EXPECT_EQ(e4m3_encode(500.0), 0x7E);
  EXPECT_EQ(e4m3_encode(-500.0), 0xFE);
  EXPECT_EQ(e4m3_encode(464.0), 0x7E);   // would be a tie with the (non-existent) 480
  EXPECT_EQ(e4m3_encode(1e30), 0x7E);
  EXPECT_EQ(e4m3_encode(INFINITY), 0x7E);
  EXPECT_EQ(e4m3_encode(-INFINITY), 0xFE);
  EXPECT_EQ(e4m3_encode(NAN), 0x7F);
  EXPECT_EQ(e4m3_encode(-NAN), 0x7F);
}

TEST(E4m3Encode, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if (c == 0x7F || c == 0xFF) continue;
    EXPECT_EQ(e4m3_encode(e4m3_value(static_cast<uint8_t>(c))), c) << c;
  }
}

TEST(E4m3Encode, NearestCodeByExhaustiveSearch) {
  // Independent oracle: the nearest finite code by brute force (ties resolved by even mantissa).
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> log2mag(-12.0, 9.5);
  for (int i = 0; i < 20000; ++i) {
    const double x = static_cast<float>(std::exp2(log2mag(rng)) * ((i & 1) ? -1 : 1));
    int best = -1;
    double best_err = INFINITY;
    for (int c = 0; c < 256; ++c) {
      if (c == 0x7F || c == 0xFF || c == 0x80) continue;
      const double err = std::fabs(e4m3_value(static_cast<uint8_t>(c)) - x);
      if (err < best_err || (err == best_err && (c & 1) == 0)) best = c, best_err = err;
    }
    if (std::fabs(x) >= 448.0) best = x > 0 ? 0x7E : 0xFE;
    uint8_t got = e4m3_encode(x);
    if (got == 0x80) got = 0x00;  // signed zero: the oracle above only knows +0
    ASSERT_EQ(got, best) << "x = " << x;
  }
}

// ================================ bf16 and fp32 ===============================================

TEST(Bf16Value, HandPickedBits) {
  EXPECT_EQ(bf16_value(0x3F80), 1.0);
  EXPECT_EQ(bf16_value(0xC000), -2.0);
  EXPECT_EQ(bf16_value(0x43E0), 448.0);        // 0 10000111 1100000
  EXPECT_EQ(bf16_value(0x0080), std::ldexp(1.0, -126));
  EXPECT_EQ(bf16_value(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(bf16_value(0x7F7F), std::ldexp(255.0, 120));  // (2 - 2^-7) * 2^127
  EXPECT_EQ(bf16_value(0x7F80), INFINITY);
  EXPECT_EQ(bf16_value(0xFF80), -INFINITY);
  EXPECT_TRUE(std::isnan(bf16_value(0x7FC0)));
  EXPECT_TRUE(std::isnan(bf16_value(0xFFFF)));
  EXPECT_TRUE(std::signbit(bf16_value(0x8000)));
}

TEST(Bf16Round, NearestEvenOverflowAndNaN) {
  EXPECT_EQ(bf16_round(1.0), 0x3F80);
  EXPECT_EQ(bf16_round(1.0 + std::ldexp(1.0, -8)), 0x3F80);      // tie 1 / 1+2^-7 -> even
  EXPECT_EQ(bf16_round(1.0 + 3 * std::ldexp(1.0, -8)), 0x3F82);  // tie m=1 / m=2 -> m=2
  EXPECT_EQ(bf16_round(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -20)), 0x3F81);
  EXPECT_EQ(bf16_round(-2.0), 0xC000);
  EXPECT_EQ(bf16_round(-0.0), 0x8000);
  EXPECT_EQ(bf16_round(std::ldexp(1.0, -133)), 0x0001);             // smallest subnormal
  EXPECT_EQ(bf16_round(std::ldexp(1.0, -134)), 0x0000);             // tie 0 / 2^-133 -> 0
  EXPECT_EQ(bf16_round(3 * std::ldexp(1.0, -134)), 0x0002);         // tie 1 / 2 quanta -> 2
  EXPECT_EQ(bf16_round(std::ldexp(255.0, 120)), 0x7F7F);            // largest finite
  EXPECT_EQ(bf16_round(FLT_MAX), 0x7F80);                           // rounds past it: inf
  EXPECT_EQ(bf16_round(-FLT_MAX), 0xFF80);
  EXPECT_EQ(bf16_round(INFINITY), 0x7F80);
  EXPECT_EQ(bf16_round(NAN), 0x7FC0);
  EXPECT_EQ(bf16_round(-NAN), 0xFFC0);
  EXPECT_EQ(bf16_round(0.15000000596046448), 0x3E1A);  // 1.2*2^-3: 0.2*128 = 25.6 -> 26
}

TEST(RoundToF32, AgreesWithTheCpuConversion) {
  EXPECT_EQ(round_to_f32(1.0 + std::ldexp(1.0, -24)), 1.0);                             // tie -> even
  EXPECT_EQ(round_to_f32(1.0 + 3 * std::ldexp(1.0, -24)), 1.0 + std::ldexp(1.0, -22));  // tie -> even
  EXPECT_EQ(round_to_f32(std::ldexp(1.0, -150)), 0.0);
  EXPECT_EQ(round_to_f32(3 * std::ldexp(1.0, -150)), std::ldexp(1.0, -148));
  EXPECT_EQ(round_to_f32(FLT_MAX + std::ldexp(1.0, 102)), FLT_MAX);
  EXPECT_EQ(round_to_f32(FLT_MAX + std::ldexp(1.0, 103)), INFINITY);  // tie with 2^128 -> inf
  EXPECT_TRUE(std::signbit(round_to_f32(-std::ldexp(1.0, -151))));
  EXPECT_TRUE(std::isnan(round_to_f32(NAN)));
  // Oracle: the CPU's double -> float conversion (round to nearest even).
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> log2mag(-152.0, 128.5);
  for (int i = 0; i < 100000; ++i) {
    const double x = std::exp2(log2mag(rng)) * ((i & 1) ? -1 : 1);
    ASSERT_EQ(round_to_f32(x), static_cast<double>(static_cast<float>(x))) << x;
  }
}

// ================================ Entry format ================================================

// A token whose every tile has amax 448 (element 0 of each tile), so every scale is exactly 1.0f.
struct Token {
  std::vector<uint16_t> kv_c = std::vector<uint16_t>(512, 0x0000);
  std::vector<uint16_t> k_pe = std::vector<uint16_t>(64, 0x0000);
};
Token unit_scale_token() {
  Token t;
  for (int tile = 0; tile < 4; ++tile) t.kv_c[static_cast<size_t>(tile * 128)] = 0x43E0;  // 448
  return t;
}

TEST(QuantizeEntry, TileWithAmax448HasScaleOneAndPlainCodes) {
  Token t = unit_scale_token();
  t.kv_c[1] = bf16_of(1.0f);
  t.kv_c[2] = bf16_of(-1.0f);
  t.kv_c[3] = bf16_of(1.0625f);   // tie -> 1.0
  t.kv_c[4] = bf16_of(1.1875f);   // tie -> 1.25
  t.kv_c[5] = bf16_of(0x1p-10f);  // tie -> 0
  t.kv_c[6] = bf16_of(0x3p-10f);  // tie -> 2^-8
  t.kv_c[7] = bf16_of(-448.0f);
  t.k_pe[0] = 0xFFFF;  // RoPE bits are copied, NaN included
  t.k_pe[1] = 0x7F80;
  t.k_pe[63] = 0x1234;
  const auto e = quantize_entry(t.kv_c.data(), t.k_pe.data());
  for (int tile = 0; tile < 4; ++tile) {
    EXPECT_EQ(read_u32_le(&e[static_cast<size_t>(kScaleAt + 4 * tile)]), 0x3F800000u) << tile;  // 1.0f
    EXPECT_EQ(e[static_cast<size_t>(tile * 128)], 0x7E);
  }
  EXPECT_EQ(e[1], 0x38);
  EXPECT_EQ(e[2], 0xB8);
  EXPECT_EQ(e[3], 0x38);
  EXPECT_EQ(e[4], 0x3A);
  EXPECT_EQ(e[5], 0x00);
  EXPECT_EQ(e[6], 0x02);
  EXPECT_EQ(e[7], 0xFE);
  EXPECT_EQ(e[8], 0x00);
  EXPECT_EQ(read_u16_le(&e[kRopeAt + 0]), 0xFFFF);
  EXPECT_EQ(read_u16_le(&e[kRopeAt + 2]), 0x7F80);
  EXPECT_EQ(read_u16_le(&e[kRopeAt + 126]), 0x1234);
  EXPECT_EQ(read_u16_le(&e[kRopeAt + 4]), 0x0000);
}

TEST(QuantizeEntry, ScalesPerTileInLittleEndianF32) {
  Token t;
  // Tile t has amax 448 * 2^t -> scale 2^t exactly: f32 bits 0x3F800000 + t * 0x00800000.
  const float amax[4] = {448.0f, 896.0f, 1792.0f, 3584.0f};
  for (int tile = 0; tile < 4; ++tile) t.kv_c[static_cast<size_t>(tile * 128 + 5)] = bf16_of(-amax[tile]);
  t.kv_c[128 + 6] = bf16_of(3.0f);  // 3 / 2 = 1.5 -> 0x3C
  const auto e = quantize_entry(t.kv_c.data(), t.k_pe.data());
  EXPECT_EQ(e[kScaleAt + 0], 0x00);  // byte order of 1.0f = 0x3F800000: 00 00 80 3F
  EXPECT_EQ(e[kScaleAt + 1], 0x00);
  EXPECT_EQ(e[kScaleAt + 2], 0x80);
  EXPECT_EQ(e[kScaleAt + 3], 0x3F);
  EXPECT_EQ(read_u32_le(&e[kScaleAt + 4]), 0x40000000u);   // 2.0f
  EXPECT_EQ(read_u32_le(&e[kScaleAt + 8]), 0x40800000u);   // 4.0f
  EXPECT_EQ(read_u32_le(&e[kScaleAt + 12]), 0x41000000u);  // 8.0f
  for (int tile = 0; tile < 4; ++tile) EXPECT_EQ(e[static_cast<size_t>(tile * 128 + 5)], 0xFE);
  EXPECT_EQ(e[128 + 6], 0x3C);
}

TEST(QuantizeEntry, ZeroTileUsesFltMinScale) {
  Token t;
  t.kv_c[0] = 0x8000;  // -0 keeps its sign through the division
  const auto e = quantize_entry(t.kv_c.data(), t.k_pe.data());
  for (int tile = 0; tile < 4; ++tile)
    EXPECT_EQ(read_u32_le(&e[static_cast<size_t>(kScaleAt + 4 * tile)]), 0x00800000u);  // FLT_MIN
  EXPECT_EQ(e[0], 0x80);
  for (int i = 1; i < 512; ++i) ASSERT_EQ(e[static_cast<size_t>(i)], 0x00) << i;
}

TEST(QuantizeEntry, ScaleIsAPlainF32DivisionNotAPowerOfTwo) {
  Token t;
  t.kv_c[0] = bf16_of(1.0f);
  const auto e = quantize_entry(t.kv_c.data(), t.k_pe.data());
  // 1/448 = 2^-9 * 8/7; 8/7 = 1.001001..._2, rounded to 23 fraction bits:
  // 00100100100100100100100|1001... -> round up -> 0x124925; biased exponent 118 = 0x76.
  EXPECT_EQ(read_u32_le(&e[kScaleAt]), 0x3B124925u);
  EXPECT_EQ(e[0], 0x7E);  // 1 / scale is just below 448 -> 448
  // Dequant: f32(448 * scale) = 1.0000001 -> bf16 1.0.
  EXPECT_EQ(dequant_entry(e.data())[0], 0x3F80);
}

TEST(QuantizeEntry, DividesRatherThanMultipliesByTheReciprocal) {
  // amax 1.53125 -> scale = 1.53125 / 448 = 7/2048 exactly (f32 0x3B600000). x = 1.3671875 = 175/128:
  // x / scale = 400 exactly, a tie 384 / 416 -> 384 (0x7C). With x * f32(1/scale) the product is
  // 400.00003 and the code would be 0x7D.
  Token t;
  t.kv_c[0] = bf16_of(1.53125f);
  t.kv_c[1] = bf16_of(1.3671875f);
  const auto e = quantize_entry(t.kv_c.data(), t.k_pe.data());
  EXPECT_EQ(read_u32_le(&e[kScaleAt]), 0x3B600000u);
  EXPECT_EQ(e[0], 0x7E);
  EXPECT_EQ(e[1], 0x7C);
  // Dequant: 384 * 7/2048 = 1.3125 (bf16 0x3FA8).
  EXPECT_EQ(dequant_entry(e.data())[1], 0x3FA8);
}

TEST(DequantEntry, HandBuiltEntry) {
  std::array<uint8_t, kEntry> e{};
  const uint32_t scales[4] = {0x3F000000u /*0.5*/, 0x3DCCCCCDu /*0.1f*/, 0xFFFFFFFFu /*NaN*/, 0x43E00000u /*448*/};
  write_scales(e, scales);
  e[0] = 0x38;    // 1.0 * 0.5 = 0.5
  e[1] = 0xFE;    // -448 * 0.5 = -224 (0xC360)
  e[2] = 0x7F;    // NaN
  e[3] = 0x01;    // 2^-9 * 0.5 = 2^-10 (0x3A80)
  e[128] = 0x3C;  // 1.5 * 0.1f: f32 0.15000000596 -> bf16 0x3E1A
  e[256] = 0x38;  // any code times a NaN scale is NaN
  e[384] = 0x7E;  // 448 * 448 = 200704 = 1.53125 * 2^17 (0x4844)
  e[385] = 0x80;  // -0 * 448 = -0
  e[kRopeAt + 0] = 0xCD;
  e[kRopeAt + 1] = 0xAB;  // RoPE[0] = 0xABCD
  e[kRopeAt + 126] = 0xFF;
  e[kRopeAt + 127] = 0xFF;  // RoPE[63] = 0xFFFF, copied bit for bit
  const auto d = dequant_entry(e.data());
  EXPECT_EQ(d[0], 0x3F00);
  EXPECT_EQ(d[1], 0xC360);
  EXPECT_TRUE(bf16_is_nan(d[2]));
  EXPECT_EQ(d[3], 0x3A80);
  EXPECT_EQ(d[4], 0x0000);
  EXPECT_EQ(d[128], 0x3E1A);
  for (int i = 256; i < 384; ++i) ASSERT_TRUE(bf16_is_nan(d[static_cast<size_t>(i)])) << i;
  EXPECT_EQ(d[384], 0x4844);
  EXPECT_EQ(d[385], 0x8000);
  EXPECT_EQ(d[512], 0xABCD);
  EXPECT_EQ(d[575], 0xFFFF);
  EXPECT_EQ(d[513], 0x0000);
}

TEST(DequantEntry, UnusedBytesReadAsNaN) {
  std::array<uint8_t, kEntry> e;
  e.fill(0xFF);
  const auto d = dequant_entry(e.data());
  for (int i = 0; i < 512; ++i) ASSERT_TRUE(bf16_is_nan(d[static_cast<size_t>(i)])) << i;
  for (int i = 512; i < 576; ++i) ASSERT_EQ(d[static_cast<size_t>(i)], 0xFFFF) << i;
}

// ScaleRounding::kBf16 rounds the scale to bf16 first and the exact product once to bf16; kF32 is
// docs/semantics.md §1.2. bf16 has 7 fraction bits: its quantum in [1, 2) is 2^-7 = 0.0078125.
TEST(DequantEntry, ScaleRoundedToBf16First) {
  std::array<uint8_t, kEntry> e{};
  // Tile 0: 1 + 2^-8 + 2^-10 = 1.0048828125 (f32 0x3F80A000), past the bf16 midpoint 1 + 2^-8, so
  // bf16_rne gives 1 + 2^-7 = 1.0078125. Tile 1: 1.25 (0x3FA00000), a bf16 value: both rules agree.
  const uint32_t scales[4] = {0x3F80A000u, 0x3FA00000u, 0x3F800000u, 0x3F800000u};
  write_scales(e, scales);
  e[0] = 0x3C;    // 1.5
  e[1] = 0xBC;    // -1.5
  e[2] = 0x3E;    // 1.75
  e[128] = 0x3C;  // 1.5
  e[129] = 0x3E;  // 1.75
  e[kRopeAt] = 0x34;
  e[kRopeAt + 1] = 0x12;  // RoPE[0] = 0x1234
  const auto f32 = dequant_entry(e.data(), ScaleRounding::kF32);
  const auto bf16 = dequant_entry(e.data(), ScaleRounding::kBf16);
  // 1.5 * 1.0048828125 = 1.50732421875 = 192.9375 quanta -> 193: 1.5078125 (0x3FC1).
  // 1.5 * 1.0078125 = 1.51171875 = 193.5 quanta, a tie -> 194 (even): 1.515625 (0x3FC2).
  EXPECT_EQ(f32[0], 0x3FC1);
  EXPECT_EQ(bf16[0], 0x3FC2);
  EXPECT_EQ(f32[1], 0xBFC1);  // the same magnitudes, negative
  EXPECT_EQ(bf16[1], 0xBFC2);
  // 1.75 * 1.0048828125 = 1.758544921875 = 225.09375 quanta -> 225: 1.7578125 (0x3FE1).
  // 1.75 * 1.0078125 = 1.763671875 = 225.75 quanta -> 226: 1.765625 (0x3FE2).
  EXPECT_EQ(f32[2], 0x3FE1);
  EXPECT_EQ(bf16[2], 0x3FE2);
  // 1.5 * 1.25 = 1.875 (0x3FF0); 1.75 * 1.25 = 2.1875 = 2 * (1 + 12/128) (0x400C): exact either way.
  EXPECT_EQ(f32[128], 0x3FF0);
  EXPECT_EQ(bf16[128], 0x3FF0);
  EXPECT_EQ(f32[129], 0x400C);
  EXPECT_EQ(bf16[129], 0x400C);
  EXPECT_EQ(bf16[3], 0x0000);  // code 0 times any scale
  EXPECT_EQ(bf16[512], 0x1234);  // RoPE copied under both rules
  EXPECT_EQ(f32[512], 0x1234);
  // The default is §1.2.
  EXPECT_EQ(dequant_entry(e.data()), f32);
}

TEST(EntryRoundTrip, WithinE4m3RelativeError) {
  std::mt19937 rng(3);
  std::normal_distribution<float> latent(0.0f, 0.1f);
  for (int token = 0; token < 200; ++token) {
    Token t;
    for (auto& v : t.kv_c) v = bf16_round(latent(rng));  // bf16_round tested above
    for (int i = 0; i < 64; ++i) t.k_pe[static_cast<size_t>(i)] = static_cast<uint16_t>(token * 64 + i);
    const auto e = quantize_entry(t.kv_c.data(), t.k_pe.data());
    const auto d = dequant_entry(e.data());
    for (int tile = 0; tile < 4; ++tile) {
      double amax = 0;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(bf16_value(t.kv_c[static_cast<size_t>(tile * 128 + i)])));
      const double scale = amax / 448;
      for (int i = tile * 128; i < tile * 128 + 128; ++i) {
        const double x = bf16_value(t.kv_c[static_cast<size_t>(i)]);
        const double y = bf16_value(d[static_cast<size_t>(i)]);
        if (std::fabs(x) >= scale * 0x1p-6) {
          // e4m3 half-ulp (2^-4 relative) plus the fp32 / bf16 roundings (< 2^-8).
          ASSERT_LE(std::fabs(y - x), (0x1p-4 + 0x1p-8) * std::fabs(x)) << token << " " << i;
        } else {
          // Subnormal range: half the subnormal quantum 2^-9, plus the bf16 rounding.
          ASSERT_LE(std::fabs(y - x), scale * 0x1p-10 * 1.01 + 0x1p-8 * std::fabs(x)) << token << " " << i;
        }
      }
    }
    for (int i = 0; i < 64; ++i) ASSERT_EQ(d[static_cast<size_t>(512 + i)], t.k_pe[static_cast<size_t>(i)]);
  }
}

// ================================ Pack =========================================================

TEST(Pack, WritesEntriesAtPaddedSlotsAndSkipsInvalidSlots) {
  CacheGeometry geo;
  geo.num_blocks = 3;
  geo.block_size = 2;
  geo.page_stride_bytes = 2 * kEntry + 32;  // padded pages
  // One spare page past the pool: a slot >= capacity that is not skipped lands there (visibly)
  // rather than past the buffer.
  std::vector<uint8_t> cache(static_cast<size_t>(geo.bytes() + geo.page_stride_bytes), 0xFF);
  // 4 tokens; inputs padded to 5 tokens (the 5th must be ignored).
  std::vector<uint16_t> kv_c(5 * 512, 0x0000), k_pe(5 * 64, 0x0000);
  for (int tok = 0; tok < 5; ++tok) {
    for (int tile = 0; tile < 4; ++tile) kv_c[static_cast<size_t>(tok * 512 + tile * 128)] = 0x43E0;  // scale 1
    kv_c[static_cast<size_t>(tok * 512 + 1)] = bf16_of(static_cast<float>(tok + 1));  // 1..5: exact e4m3
    k_pe[static_cast<size_t>(tok * 64)] = static_cast<uint16_t>(0xA000 + tok);
  }
  const std::vector<int64_t> slots = {5, -1, 0, 6};  // 6 == capacity: skipped
  pack(kv_c, k_pe, slots, geo, cache);

  std::vector<bool> written(cache.size(), false);
  auto check_entry = [&](int64_t slot, int tok, uint8_t code_1) {
    const size_t at = static_cast<size_t>((slot / 2) * geo.page_stride_bytes + (slot % 2) * kEntry);
    for (int i = 0; i < kEntry; ++i) written[at + static_cast<size_t>(i)] = true;
    EXPECT_EQ(cache[at + 0], 0x7E);
    EXPECT_EQ(cache[at + 1], code_1);
    EXPECT_EQ(cache[at + 2], 0x00);
    EXPECT_EQ(cache[at + 128], 0x7E);
    EXPECT_EQ(read_u32_le(&cache[at + kScaleAt]), 0x3F800000u);
    EXPECT_EQ(read_u32_le(&cache[at + kScaleAt + 12]), 0x3F800000u);
    EXPECT_EQ(read_u16_le(&cache[at + kRopeAt]), 0xA000 + tok);
    EXPECT_EQ(read_u16_le(&cache[at + kRopeAt + 2]), 0x0000);
  };
  check_entry(5, 0, 0x38);  // token 0: 1.0 -> 0 0111 000; slot 5 = block 2, offset 1
  check_entry(0, 2, 0x44);  // token 2: 3.0 = 1.5 * 2 -> 0 1000 100
  for (size_t i = 0; i < cache.size(); ++i) {
    if (!written[i]) {
      ASSERT_EQ(cache[i], 0xFF) << "byte " << i << " was modified";
    }
  }
}

// Tokens sharing a slot: the last one's entry remains, as in token order; and the thread count
// changes no byte (pack's threads write only the slots whose last writer they hold). 40 tokens
// over 20 slots in padded pages, with repeats, negative and out-of-range slots.
TEST(Pack, SharedSlotsKeepTheLastTokenOnAnyThreadCount) {
  const CacheGeometry geo{4, 5, 5 * kEntry + 16};
  const int tokens = 40;
  std::mt19937 gen(1234);
  std::normal_distribution<float> value(0.0f, 0.5f);
  std::vector<uint16_t> kv_c(static_cast<size_t>(tokens) * 512), k_pe(static_cast<size_t>(tokens) * 64);
  for (auto& x : kv_c) x = bf16_round(value(gen));
  for (auto& x : k_pe) x = bf16_round(value(gen));
  std::vector<int64_t> slots(static_cast<size_t>(tokens));
  for (int i = 0; i < tokens; ++i) slots[static_cast<size_t>(i)] = (i * 7) % 23 - 2;  // -2 .. 20: 20 == capacity
  std::vector<uint8_t> expected(static_cast<size_t>(geo.bytes()), 0xEE);
  for (int64_t slot = 0; slot < 20; ++slot) {
    int last = -1;
    for (int i = 0; i < tokens; ++i) {
      if (slots[static_cast<size_t>(i)] == slot) last = i;
    }
    if (last < 0) continue;
    const auto entry = quantize_entry(&kv_c[static_cast<size_t>(last) * 512], &k_pe[static_cast<size_t>(last) * 64]);
    std::memcpy(&expected[static_cast<size_t>((slot / 5) * geo.page_stride_bytes + (slot % 5) * kEntry)], entry.data(),
                kEntry);
  }
  for (unsigned threads : {0u, 1u, 2u, 3u, 7u, 40u, 100u}) {
    std::vector<uint8_t> cache(static_cast<size_t>(geo.bytes()), 0xEE);
    pack(kv_c, k_pe, slots, geo, cache, threads);
    EXPECT_TRUE(cache == expected) << threads << " threads";
  }
}

TEST(Pack, RejectsShortInputsAndShortCache) {
  CacheGeometry geo{2, 4, 4 * kEntry};
  std::vector<uint8_t> cache(static_cast<size_t>(geo.bytes()), 0xFF);
  std::vector<uint16_t> kv_c(512), k_pe(64);
  EXPECT_THROW(pack(kv_c, k_pe, {0, 1}, geo, cache), std::invalid_argument);
  std::vector<uint8_t> small(cache.size() - 1);
  EXPECT_THROW(pack(kv_c, k_pe, {0}, geo, small), std::invalid_argument);
  CacheGeometry bad{2, 4, 4 * kEntry - 16};
  EXPECT_THROW(pack(kv_c, k_pe, {0}, bad, cache), std::invalid_argument);
  EXPECT_NO_THROW(pack(kv_c, k_pe, {}, geo, cache));
}

// ================================ Gather =======================================================

// A cache whose every slot s holds a recognisable entry: scale 1 in every tile, element 0 = 448,
// element 1 = (s % 8) + 1 (exact in e4m3 and bf16), RoPE[0] = s, RoPE[1] = 0x5A5A.
struct MarkedCache {
  CacheGeometry geo;
  std::vector<uint8_t> bytes;
};
MarkedCache marked_cache(int64_t num_blocks, int32_t block_size, int64_t pad) {
  MarkedCache c;
  c.geo = {num_blocks, block_size, block_size * kEntry + pad};
  c.bytes.assign(static_cast<size_t>(c.geo.bytes()), 0xFF);
  const int64_t n = num_blocks * block_size;
  std::vector<uint16_t> kv_c(static_cast<size_t>(n) * 512, 0), k_pe(static_cast<size_t>(n) * 64, 0);
  std::vector<int64_t> slots(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    for (int tile = 0; tile < 4; ++tile) kv_c[static_cast<size_t>(s * 512 + tile * 128)] = 0x43E0;
    kv_c[static_cast<size_t>(s * 512 + 1)] = bf16_of(static_cast<float>(s % 8 + 1));
    k_pe[static_cast<size_t>(s * 64)] = static_cast<uint16_t>(s);
    k_pe[static_cast<size_t>(s * 64 + 1)] = 0x5A5A;
    slots[static_cast<size_t>(s)] = s;
  }
  pack(kv_c, k_pe, slots, c.geo, c.bytes);
  return c;
}

void expect_row_from_slot(const std::vector<uint16_t>& dst, int64_t row, int64_t slot) {
  const uint16_t* d = &dst[static_cast<size_t>(row * 576)];
  EXPECT_EQ(d[512], slot) << "row " << row << " read the wrong slot";
  EXPECT_EQ(d[513], 0x5A5A) << "row " << row;
  EXPECT_EQ(d[0], 0x43E0) << "row " << row;
  EXPECT_EQ(d[1], bf16_of(static_cast<float>(slot % 8 + 1))) << "row " << row;
  EXPECT_EQ(d[2], 0x0000) << "row " << row;
  EXPECT_EQ(d[128], 0x43E0) << "row " << row;
  EXPECT_EQ(d[575], 0x0000) << "row " << row;
}

void expect_nan_row(const std::vector<uint16_t>& dst, int64_t row) {
  for (int i = 0; i < 576; ++i) ASSERT_EQ(dst[static_cast<size_t>(row * 576 + i)], 0x7FC0) << "row " << row << " elem " << i;
}

BlockTable make_table(std::vector<std::vector<int32_t>> rows, int32_t width, int64_t stride, int32_t pad_value) {
  BlockTable bt;
  bt.num_reqs = static_cast<int32_t>(rows.size());
  bt.width = width;
  bt.stride = stride;
  bt.data.assign(rows.size() * static_cast<size_t>(stride), pad_value);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < rows[r].size(); ++c) bt.data[r * static_cast<size_t>(stride) + c] = rows[r][c];
  return bt;
}

TEST(Gather, SeqStartsCrossBlocksAndZeroLengthRequestsAreSkipped) {
  const MarkedCache c = marked_cache(8, 4, 48);
  // Padding columns hold block 0, which is valid: a read past the width would show as slot 0..3.
  const BlockTable bt = make_table({{5, 2, 7}, {0, 3}, {6, 1, 4}}, 3, 5, 0);
  const std::vector<int32_t> ws = {0, 3, 3};  // request 1 has no rows
  const std::vector<int32_t> ss = {2, 100, 3};
  const auto dst = gather(c.bytes, c.geo, bt, ws, ss, 8);
  ASSERT_EQ(dst.size(), 8u * 576);
  expect_row_from_slot(dst, 0, 5 * 4 + 2);  // r0 p2: block 5 off 2
  expect_row_from_slot(dst, 1, 5 * 4 + 3);  // r0 p3
  expect_row_from_slot(dst, 2, 2 * 4 + 0);  // r0 p4: crosses into logical block 1 -> phys 2
  expect_row_from_slot(dst, 3, 6 * 4 + 3);  // r2 p3 (row 3 belongs to r2, not the empty r1)
  expect_row_from_slot(dst, 4, 1 * 4 + 0);  // r2 p4
  expect_row_from_slot(dst, 5, 1 * 4 + 1);
  expect_row_from_slot(dst, 6, 1 * 4 + 2);
  expect_row_from_slot(dst, 7, 1 * 4 + 3);
}

TEST(Gather, WithoutSeqStartsPositionsStartAtZero) {
  const MarkedCache c = marked_cache(4, 2, 0);
  const BlockTable bt = make_table({{3, 1}, {2, 0}}, 2, 2, 0);
  const auto dst = gather(c.bytes, c.geo, bt, {0, 3}, std::nullopt, 5);
  expect_row_from_slot(dst, 0, 6);  // r0 p0 -> block 3 off 0
  expect_row_from_slot(dst, 1, 7);
  expect_row_from_slot(dst, 2, 2);  // r0 p2 -> block 1 off 0
  expect_row_from_slot(dst, 3, 4);  // r1 p0 -> block 2 off 0
  expect_row_from_slot(dst, 4, 5);
}

TEST(Gather, InvalidSourcesGiveNaNRows) {
  // The buffer holds 5 marked blocks but the geometry declares 4: a missing num_blocks check then
  // reads block 4's marked entries (a visible failure) instead of memory past the buffer.
  const MarkedCache c = marked_cache(5, 2, 16);
  CacheGeometry geo = c.geo;
  geo.num_blocks = 4;
  // r0: ws 2 (rows 0, 1 precede every request); r1: negative seq start; r2: physical block 4 is
  // past the pool, then -1, then past the width; r3: starts past the width. The padding column
  // (index 3) holds block 0, valid, so a read past the width would show as slot 0 or 1.
  const BlockTable bt = make_table({{1, 2}, {3, 0}, {2, 4, -1}, {3, -1, -1}}, 3, 4, 0);
  const std::vector<int32_t> ws = {2, 4, 7, 13};
  const std::vector<int32_t> ss = {0, -1, 1, 6};
  const auto dst = gather(c.bytes, geo, bt, ws, ss, 16);
  expect_nan_row(dst, 0);            // before ws[0]
  expect_nan_row(dst, 1);
  expect_row_from_slot(dst, 2, 2);   // r0 p0 -> block 1
  expect_row_from_slot(dst, 3, 3);
  expect_nan_row(dst, 4);            // r1 p -1
  expect_row_from_slot(dst, 5, 6);   // r1 p0 -> block 3
  expect_row_from_slot(dst, 6, 7);
  expect_row_from_slot(dst, 7, 5);   // r2 p1 -> block 2 off 1
  expect_nan_row(dst, 8);            // r2 p2 -> block 4 >= num_blocks
  expect_nan_row(dst, 9);
  expect_nan_row(dst, 10);           // r2 p4 -> block -1
  expect_nan_row(dst, 11);
  expect_nan_row(dst, 12);           // r2 p6 -> logical block 3 >= width 3
  expect_nan_row(dst, 13);           // r3 p6..8 -> logical blocks 3, 3, 4 >= width
  expect_nan_row(dst, 14);
  expect_nan_row(dst, 15);
}

TEST(Gather, PastTheBlockTableWidthIsInvalidEvenIfTheStrideHoldsAValidBlock) {
  const MarkedCache c = marked_cache(4, 2, 0);
  const BlockTable bt = make_table({{3, 1, 2}}, 2, 3, 0);  // column 2 (block 2) is beyond width 2
  const auto dst = gather(c.bytes, c.geo, bt, {0}, std::vector<int32_t>{2}, 3);
  expect_row_from_slot(dst, 0, 2);  // p2 -> logical 1 -> block 1
  expect_row_from_slot(dst, 1, 3);
  expect_nan_row(dst, 2);           // p4 -> logical 2 >= width
}

TEST(Gather, ZeroRowsAndNoRequests) {
  const MarkedCache c = marked_cache(2, 2, 0);
  const BlockTable bt = make_table({{0}}, 1, 1, 0);
  EXPECT_TRUE(gather(c.bytes, c.geo, bt, {0}, std::nullopt, 0).empty());
  const BlockTable none = make_table({}, 1, 1, 0);
  const auto dst = gather(c.bytes, c.geo, none, {}, std::nullopt, 2);
  expect_nan_row(dst, 0);
  expect_nan_row(dst, 1);
}

TEST(Gather, UnwrittenSlotsReadAsNaNNotAsZero) {
  CacheGeometry geo{2, 2, 2 * kEntry};
  std::vector<uint8_t> cache(static_cast<size_t>(geo.bytes()), 0xFF);
  const BlockTable bt = make_table({{1}}, 1, 1, 0);
  const auto dst = gather(cache, geo, bt, {0}, std::nullopt, 1);
  for (int i = 0; i < 512; ++i) ASSERT_TRUE(bf16_is_nan(dst[static_cast<size_t>(i)])) << i;
  for (int i = 512; i < 576; ++i) ASSERT_EQ(dst[static_cast<size_t>(i)], 0xFFFF) << i;
}

TEST(Gather, RejectsBrokenContracts) {
  const MarkedCache c = marked_cache(2, 2, 0);
  const BlockTable bt = make_table({{0}, {1}}, 1, 1, 0);
  EXPECT_THROW(gather(c.bytes, c.geo, bt, {2, 0}, std::nullopt, 3), std::invalid_argument);  // decreasing
  EXPECT_THROW(gather(c.bytes, c.geo, bt, {0, 1}, std::vector<int32_t>{0}, 3), std::invalid_argument);
  EXPECT_THROW(gather(c.bytes, c.geo, bt, {0, 1, 2}, std::nullopt, 3), std::invalid_argument);  // > num_reqs
  EXPECT_THROW(gather(c.bytes, c.geo, bt, {0}, std::nullopt, -1), std::invalid_argument);
}

// ================================ Convert ======================================================

ConvertInputs base_convert(std::vector<int32_t> req_id, std::vector<int32_t> indices, int32_t topk, BlockTable bt,
                           int32_t block_size) {
  ConvertInputs in;
  in.req_id = std::move(req_id);
  in.indices = std::move(indices);
  in.topk = topk;
  in.block_table = std::move(bt);
  in.block_size = block_size;
  return in;
}

TEST(Convert, BlockTableFormulaAndInvalidEntries) {
  // B = 4. req0: blocks [3, -1, 5], req1: [2, 0, 1]; the padding column holds 9.
  const BlockTable bt = make_table({{3, -1, 5}, {2, 0, 1}}, 3, 4, 9);
  auto in = base_convert({0, 1, 2, -1},
                         {0, 5, 9, -1, 12, 3,      // req0
                          4, 11, 0, 8, -5, 2,      // req1
                          0, 1, 2, 3, 4, 5,        // req 2: out of range
                          0, 1, 2, 3, 4, 5},       // req -1
                         6, bt, 4);
  const auto got = convert(in);
  // req0: 0 -> 3*4+0; 5 -> block -1; 9 -> 5*4+1; -1; 12 -> logical 3 >= width; 3 -> 3*4+3.
  // req1: 4 -> 0*4+0; 11 -> 1*4+3; 0 -> 2*4+0; 8 -> 1*4+0; -5; 2 -> 2*4+2.
  const std::vector<int32_t> want = {12, -1, 21, -1, -1, 15,
                                     0, 7, 8, 4, -1, 10,
                                     -1, -1, -1, -1, -1, -1,
                                     -1, -1, -1, -1, -1, -1};
  EXPECT_EQ(got.out, want);
  EXPECT_EQ(got.valid_count, (std::vector<int32_t>{3, 5, 0, 0}));
}

TEST(Convert, RefusesReqIdLongerThanIndices) {
  // docs/semantics.md §6 failure mode 1: req_id covers the whole batch, indices only the decode rows.
  const BlockTable bt = make_table({{0}, {1}}, 1, 1, 0);
  EXPECT_THROW(convert(base_convert({0, 0, 1}, {0, 1, 2, 3}, 2, bt, 4)), std::invalid_argument);
  EXPECT_NO_THROW(convert(base_convert({0, 0}, {0, 1, 2, 3}, 2, bt, 4)));
  const auto empty = convert(base_convert({}, {}, 2, bt, 4));
  EXPECT_TRUE(empty.out.empty());
  EXPECT_TRUE(empty.valid_count.empty());
}

TEST(Convert, PrefillWorkspaceRows) {
  const BlockTable bt = make_table({{3}, {2}}, 1, 1, 0);
  auto in = base_convert({0, 1, 1, 1},
                         {1, 2, -1, 5,        // decode token: block table
                          0, 3, -1, 200,      // prefill 0: workspace start 10, not bounded by width
                          7, 0, 1, -1,        // prefill 1: start 50
                          0, 1, 2, 3},        // prefill 2 does not exist: whole row invalid
                         4, bt, 4);
  in.prefill_req = std::vector<int32_t>{-1, 0, 1, 2};
  in.prefill_workspace_starts = std::vector<int32_t>{10, 50};
  const auto got = convert(in);
  const std::vector<int32_t> want = {13, 14, -1, -1,  // 5 -> logical 1 >= width 1
                                     10, 13, -1, 210,
                                     57, 50, 51, -1,
                                     -1, -1, -1, -1};
  EXPECT_EQ(got.out, want);
  EXPECT_EQ(got.valid_count, (std::vector<int32_t>{2, 3, 3, 0}));

  // DCP does not apply to workspace rows; it does to the block-table row.
  in.dcp_world_size = 2;
  in.dcp_rank = 1;
  const auto dcp = convert(in);
  const std::vector<int32_t> want_dcp = {12, -1, -1, 14,  // 1 -> local 0; 2 not owned; 5 -> local 2
                                         10, 13, -1, 210,
                                         57, 50, 51, -1,
                                         -1, -1, -1, -1};
  EXPECT_EQ(dcp.out, want_dcp);
}

TEST(Convert, DcpTwoRanksInterleaveOne) {
  // Rank rho owns pos with pos % 2 == rho; local = pos / 2. Block table (rank-local): [3, 5], B = 4.
  const BlockTable bt = make_table({{3, 5}}, 2, 2, 0);
  const std::vector<int32_t> idx = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, -1};
  auto in = base_convert({0}, idx, 13, bt, 4);
  in.dcp_world_size = 2;
  in.dcp_rank = 0;
  const auto r0 = convert(in);
  // 0,2,4,6 -> local 0..3 -> 12..15; 8 -> local 4 -> block 5 -> 20; 16 -> local 8 -> logical 2 >= width.
  EXPECT_EQ(r0.out, (std::vector<int32_t>{12, -1, 13, -1, 14, -1, 15, -1, 20, -1, -1, -1, -1}));
  EXPECT_EQ(r0.valid_count, (std::vector<int32_t>{5}));
  in.dcp_rank = 1;
  const auto r1 = convert(in);
  EXPECT_EQ(r1.out, (std::vector<int32_t>{-1, 12, -1, 13, -1, 14, -1, 15, -1, 20, -1, -1, -1}));
  EXPECT_EQ(r1.valid_count, (std::vector<int32_t>{5}));
}

TEST(Convert, DcpFourRanksInterleaveTwo) {
  // owner = (pos / 2) % 4; local = (pos / 8) * 2 + pos % 2. Block table [3, 5, 7], B = 4.
  const BlockTable bt = make_table({{3, 5, 7}}, 3, 3, 0);
  const std::vector<int32_t> idx = {0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 24, 26, 33, 7};
  auto in = base_convert({0}, idx, 15, bt, 4);
  in.dcp_world_size = 4;
  in.dcp_interleave = 2;
  in.dcp_rank = 0;
  // rank 0: 0,1 -> local 0,1; 8,9 -> 2,3; 16,17 -> 4,5 (block 5); 24 -> 6; 33 -> 9 (block 7 off 1).
  EXPECT_EQ(convert(in).out,
            (std::vector<int32_t>{12, 13, -1, -1, 14, 15, -1, -1, 20, 21, -1, 22, -1, 29, -1}));
  in.dcp_rank = 1;
  // rank 1: 2,3 -> local 0,1; 10,11 -> 2,3; 18 -> 4; 26 -> 6.
  const auto r1 = convert(in);
  EXPECT_EQ(r1.out, (std::vector<int32_t>{-1, -1, 12, 13, -1, -1, 14, 15, -1, -1, 20, -1, 22, -1, -1}));
  EXPECT_EQ(r1.valid_count, (std::vector<int32_t>{6}));
  in.dcp_rank = 3;
  // rank 3: only 7 -> local 1.
  const auto r3 = convert(in);
  EXPECT_EQ(r3.out, (std::vector<int32_t>{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 13}));
  EXPECT_EQ(r3.valid_count, (std::vector<int32_t>{1}));
}

TEST(Convert, RejectsBadDcpParameters) {
  const BlockTable bt = make_table({{0}}, 1, 1, 0);
  auto in = base_convert({0}, {0}, 1, bt, 4);
  in.dcp_world_size = 2;
  in.dcp_interleave = 3;  // B % I != 0
  EXPECT_THROW(convert(in), std::invalid_argument);
  in.dcp_interleave = 1;
  in.dcp_rank = 2;
  EXPECT_THROW(convert(in), std::invalid_argument);
}

// ================================ Layout =======================================================

TEST(Layout, CanonicalDtypes) {
  EXPECT_EQ(canonical_sparse_cache_dtype("fp8"), "fp8_ds_mla");
  EXPECT_EQ(canonical_sparse_cache_dtype("fp8_e4m3"), "fp8_ds_mla");
  EXPECT_EQ(canonical_sparse_cache_dtype("fp8_ds_mla"), "fp8_ds_mla");
  EXPECT_EQ(canonical_sparse_cache_dtype("auto"), "auto");
  EXPECT_EQ(canonical_sparse_cache_dtype("bf16"), "auto");
  EXPECT_EQ(canonical_sparse_cache_dtype("int8"), std::nullopt);
  EXPECT_EQ(canonical_sparse_cache_dtype(""), std::nullopt);
}

TEST(Layout, BytesPerToken) {
  EXPECT_EQ(bytes_per_token("auto"), 1152);
  EXPECT_EQ(bytes_per_token("fp8"), 576);
  EXPECT_EQ(bytes_per_token("fp8_e4m3"), 576);
  EXPECT_EQ(bytes_per_token("fp8_ds_mla"), 656);
  EXPECT_EQ(bytes_per_token("nonsense"), 0);
  EXPECT_EQ(page_bytes("fp8_ds_mla", 64), 41984);
  EXPECT_EQ(page_bytes("auto", 64), 73728);
  // docs/semantics.md §6 failure mode 5: a view sized by the head size does not cover a fp8_ds_mla page.
  EXPECT_NE(page_bytes("fp8", 64), page_bytes("fp8_ds_mla", 64));
}

}  // namespace
}  // namespace mla::ref
