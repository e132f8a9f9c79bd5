// The independent reference for the cache path (docs/semantics.md §1-§3).
//
// Everything here is computed from the definitions, arithmetically in double: a format's value is
// sign * significand * 2^exponent assembled with std::ldexp, and rounding to a format is "scale the
// magnitude so the format's last place is 1, round that to an integer half-to-even, scale back".
// Nothing is shared with kernels/ (which works on bit patterns), so the two can disagree.
//
// Contract violations of the caller (sizes that do not match, a non-monotonic workspace_starts, a
// cache smaller than its geometry) throw std::invalid_argument: the reference refuses rather than
// guesses. Data-dependent invalidity (bad slots, bad block-table entries, bad positions) is part of
// the semantics and handled as docs/semantics.md says (skip, NaN row, -1).
#include "reference/cache_reference.h"

#include <Eigen/Core>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace mla::ref {
namespace {

// --- Format parameters (each format: fraction bits, minimum normal exponent) -------------------
constexpr int kE4m3FracBits = 3;
constexpr int kE4m3MinExp = -6;  // subnormal quantum 2^(-6-3) = 2^-9
constexpr int kE4m3Bias = 7;
constexpr double kE4m3MaxFinite = 448.0;

constexpr int kBf16FracBits = 7;
constexpr int kF32FracBits = 23;
constexpr int kF32MinExp = -126;  // shared by bf16 and fp32 (same exponent range)
constexpr int kF32Bias = 127;
constexpr int kF32MaxExp = 127;

constexpr int kTile = 128;  // elements per scale
constexpr int kNumTiles = kNope / kTile;
constexpr int kScaleOffset = kNope;                   // [512, 528): 4 x f32 LE
constexpr int kRopeOffset = kScaleOffset + 4 * kNumTiles;  // [528, 656): 64 x bf16 LE
static_assert(kRopeOffset + 2 * kRope == kEntryBytes, "entry layout must add up to 656 bytes");
static_assert(kNope + kRope == kLatent, "latent width must be NoPE + RoPE");

constexpr uint16_t kBf16QuietNaN = 0x7FC0;

// Round q >= 0 to an integer, ties to even. Exact in double: q - floor(q) is representable.
double round_half_even(double q) {
  const double lo = std::floor(q);
  const double frac = q - lo;
  if (frac > 0.5) return lo + 1.0;
  if (frac < 0.5) return lo;
  return std::fmod(lo, 2.0) == 0.0 ? lo : lo + 1.0;
}

// Round a finite magnitude a >= 0 to a binary format with `frac_bits` fraction bits and minimum
// normal exponent `min_exp` (gradual underflow below it). No upper bound: the caller handles
// overflow. The result is exact in double (all our formats are far narrower than double).
double round_magnitude(double a, int frac_bits, int min_exp) {
  if (a == 0.0) return 0.0;
  int e2 = 0;
  std::frexp(a, &e2);                            // a = f * 2^e2, f in [0.5, 1)
  const int exponent = std::max(e2 - 1, min_exp);  // a in [2^exponent, 2^(exponent+1)) when normal
  const int ulp_exp = exponent - frac_bits;      // weight of the last significand bit
  const double q = std::ldexp(a, -ulp_exp);      // exact: power-of-two scaling
  return std::ldexp(round_half_even(q), ulp_exp);
}

// Decompose an exactly representable magnitude v > 0 into (biased exponent field, fraction field)
// of a format with the given parameters; exponent field 0 means subnormal.
struct Fields {
  int exponent_field;
  uint32_t fraction_field;
};
Fields decompose(double v, int frac_bits, int min_exp, int bias) {
  int e2 = 0;
  std::frexp(v, &e2);
  const int exponent = e2 - 1;
  if (exponent < min_exp) {  // subnormal: v = m * 2^(min_exp - frac_bits)
    return {0, static_cast<uint32_t>(std::ldexp(v, frac_bits - min_exp))};
  }
  const double significand = std::ldexp(v, frac_bits - exponent);  // in [2^frac_bits, 2^(frac_bits+1))
  return {exponent + bias, static_cast<uint32_t>(significand - std::ldexp(1.0, frac_bits))};
}

// Value of a binary format from its fields (no NaN/inf handling; callers do that first).
double compose(bool negative, int exponent_field, uint32_t fraction_field, int frac_bits, int min_exp,
               int bias) {
  double magnitude;
  if (exponent_field == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction_field), min_exp - frac_bits);
  } else {
    const double significand = std::ldexp(1.0, frac_bits) + static_cast<double>(fraction_field);
    magnitude = std::ldexp(significand, exponent_field - bias - frac_bits);
  }
  return negative ? -magnitude : magnitude;
}

// --- fp32 bit patterns (the scales are stored as f32 little-endian) -----------------------------
double f32_value_from_bits(uint32_t bits) {
  const bool negative = (bits >> 31) != 0;
  const int exponent_field = static_cast<int>((bits >> 23) & 0xFFu);
  const uint32_t fraction_field = bits & 0x7FFFFFu;
  if (exponent_field == 0xFF) {
    if (fraction_field != 0) return std::numeric_limits<double>::quiet_NaN();
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  return compose(negative, exponent_field, fraction_field, kF32FracBits, kF32MinExp, kF32Bias);
}

// x must already be an fp32 value (or NaN / inf).
uint32_t f32_bits_from_value(double x) {
  const uint32_t sign = std::signbit(x) ? 0x80000000u : 0u;
  if (std::isnan(x)) return sign | 0x7FC00000u;
  const double a = std::fabs(x);
  if (std::isinf(a)) return sign | 0x7F800000u;
  if (a == 0.0) return sign;
  const Fields f = decompose(a, kF32FracBits, kF32MinExp, kF32Bias);
  return sign | (static_cast<uint32_t>(f.exponent_field) << 23) | f.fraction_field;
}

uint32_t load_u32_le(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
void store_u32_le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t load_u16_le(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
void store_u16_le(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void require(bool ok, const char* message) {
  if (!ok) throw std::invalid_argument(message);
}

void validate_geometry(const CacheGeometry& geo, size_t cache_size, const char* who) {
  const std::string w(who);
  if (geo.num_blocks < 0) throw std::invalid_argument(w + ": num_blocks < 0");
  if (geo.block_size < 1) throw std::invalid_argument(w + ": block_size must be >= 1");
  if (geo.page_stride_bytes < static_cast<int64_t>(geo.block_size) * kEntryBytes)
    throw std::invalid_argument(w + ": page_stride_bytes < block_size * 656");
  if (cache_size < static_cast<size_t>(geo.bytes()))
    throw std::invalid_argument(w + ": cache smaller than num_blocks * page_stride_bytes");
}

void validate_block_table(const BlockTable& bt, const char* who) {
  const std::string w(who);
  if (bt.num_reqs < 0 || bt.width < 0) throw std::invalid_argument(w + ": negative block-table shape");
  if (bt.stride < bt.width) throw std::invalid_argument(w + ": block-table stride < width");
  if (bt.num_reqs > 0 && bt.width > 0 &&
      bt.data.size() < static_cast<size_t>((bt.num_reqs - 1) * bt.stride + bt.width))
    throw std::invalid_argument(w + ": block-table data shorter than its shape");
}

// Byte offset of slot (block, offset) in the paged cache.
int64_t entry_offset(const CacheGeometry& geo, int64_t block, int64_t offset) {
  return block * geo.page_stride_bytes + offset * kEntryBytes;
}

// An int64 result that must fit an int32 output; -1 (invalid) when it cannot be represented.
int32_t to_slot_or_invalid(int64_t v) {
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) return -1;
  return static_cast<int32_t>(v);
}

}  // namespace

// --- Number formats -------------------------------------------------------------------------

double e4m3_value(uint8_t code) {
  const bool negative = (code & 0x80) != 0;
  const int exponent_field = (code >> 3) & 0xF;
  const uint32_t fraction_field = code & 0x7u;
  if (exponent_field == 0xF && fraction_field == 0x7) return std::numeric_limits<double>::quiet_NaN();
  return compose(negative, exponent_field, fraction_field, kE4m3FracBits, kE4m3MinExp, kE4m3Bias);
}

// Hazards: a NaN encodes as 0x7F whatever its sign; every magnitude above 448 (inf included)
// saturates; a value that rounds to zero keeps its sign (0x80 for negatives), as IEEE rounding does.
uint8_t e4m3_encode(double x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  if (a >= kE4m3MaxFinite) return static_cast<uint8_t>(sign | 0x7E);  // 448 (largest finite)
  // Below 448 the rounded magnitude is at most 448 (the binade [256, 512) has quantum 32).
  const double r = round_magnitude(a, kE4m3FracBits, kE4m3MinExp);
  if (r == 0.0) return sign;
  const Fields f = decompose(r, kE4m3FracBits, kE4m3MinExp, kE4m3Bias);
  return static_cast<uint8_t>(sign | (f.exponent_field << 3) | f.fraction_field);
}

double bf16_value(uint16_t bits) {
  const bool negative = (bits & 0x8000) != 0;
  const int exponent_field = (bits >> 7) & 0xFF;
  const uint32_t fraction_field = bits & 0x7Fu;
  if (exponent_field == 0xFF) {
    if (fraction_field != 0) return std::numeric_limits<double>::quiet_NaN();
    return negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  return compose(negative, exponent_field, fraction_field, kBf16FracBits, kF32MinExp, kF32Bias);
}

// Overflow follows IEEE round-to-nearest: magnitudes that round above the largest finite bf16
// ((2 - 2^-7) * 2^127) become inf, e.g. FLT_MAX -> inf.
uint16_t bf16_round(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0x0000;
  if (std::isnan(x)) return static_cast<uint16_t>(sign | kBf16QuietNaN);
  const double a = std::fabs(x);
  if (std::isinf(a)) return static_cast<uint16_t>(sign | 0x7F80);
  const double r = round_magnitude(a, kBf16FracBits, kF32MinExp);
  if (r == 0.0) return sign;
  const Fields f = decompose(r, kBf16FracBits, kF32MinExp, kF32Bias);
  if (f.exponent_field > kF32MaxExp + kF32Bias) return static_cast<uint16_t>(sign | 0x7F80);
  return static_cast<uint16_t>(sign | (f.exponent_field << 7) | f.fraction_field);
}

double round_to_f32(double x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const double r = round_magnitude(std::fabs(x), kF32FracBits, kF32MinExp);
  const double f32_max = std::ldexp(std::ldexp(1.0, kF32FracBits + 1) - 1.0, kF32MaxExp - kF32FracBits);
  const double magnitude = r > f32_max ? std::numeric_limits<double>::infinity() : r;
  return std::signbit(x) ? -magnitude : magnitude;
}

// --- The entry format ------------------------------------------------------------------------

// Contract: kv_c and k_pe are finite bf16 values (the format is defined for those). Hazards: a
// NaN in a tile makes its amax, scale and every element NaN here; an inf makes the scale inf.
std::array<uint8_t, kEntryBytes> quantize_entry(const uint16_t* kv_c, const uint16_t* k_pe) {
  std::array<uint8_t, kEntryBytes> entry{};
  Eigen::Array<double, kNope, 1> x;
  for (int e = 0; e < kNope; ++e) x(e) = bf16_value(kv_c[e]);

  const double flt_min = std::ldexp(1.0, kF32MinExp);  // FLT_MIN = 2^-126
  for (int t = 0; t < kNumTiles; ++t) {
    const auto tile = x.segment<kTile>(t * kTile);
    // amax of bf16 values is itself an fp32 value; NaN must not vanish into max().
    const double amax = tile.isNaN().any() ? std::numeric_limits<double>::quiet_NaN() : tile.abs().maxCoeff();
    const double quotient = round_to_f32(amax / kE4m3MaxFinite);  // one fp32 division
    const double scale = std::isnan(quotient) ? quotient : std::max(quotient, flt_min);
    // x / scale: one fp32 division per element (not a multiply by the reciprocal).
    const Eigen::Array<double, kTile, 1> scaled = (tile / scale).unaryExpr([](double v) { return round_to_f32(v); });
    for (int i = 0; i < kTile; ++i) entry[static_cast<size_t>(t * kTile + i)] = e4m3_encode(scaled(i));
    store_u32_le(&entry[static_cast<size_t>(kScaleOffset + 4 * t)], f32_bits_from_value(scale));
  }
  for (int i = 0; i < kRope; ++i) store_u16_le(&entry[static_cast<size_t>(kRopeOffset + 2 * i)], k_pe[i]);
  return entry;
}

std::array<uint16_t, kLatent> dequant_entry(const uint8_t* entry, ScaleRounding rounding) {
  std::array<uint16_t, kLatent> out{};
  Eigen::Array<double, kNope, 1> codes_value;
  for (int e = 0; e < kNope; ++e) codes_value(e) = e4m3_value(entry[e]);
  for (int t = 0; t < kNumTiles; ++t) {
    const double stored = f32_value_from_bits(load_u32_le(entry + kScaleOffset + 4 * t));
    const bool bf16_scale = rounding == ScaleRounding::kBf16;
    const double scale = bf16_scale ? bf16_value(bf16_round(stored)) : stored;
    // e4m3 * f32 is exact in double (4 + 24 significant bits), e4m3 * bf16 too (4 + 8): kF32
    // rounds it to f32, then to bf16; kBf16 rounds it to bf16 once.
    const Eigen::Array<double, kTile, 1> product = codes_value.segment<kTile>(t * kTile) * scale;
    for (int i = 0; i < kTile; ++i)
      out[static_cast<size_t>(t * kTile + i)] = bf16_round(bf16_scale ? product(i) : round_to_f32(product(i)));
  }
  for (int i = 0; i < kRope; ++i) out[static_cast<size_t>(kNope + i)] = load_u16_le(entry + kRopeOffset + 2 * i);
  return out;
}

// --- Pack (docs/semantics.md §1.1) ---------------------------------------------------------------------------

void pack(const std::vector<uint16_t>& kv_c, const std::vector<uint16_t>& k_pe,
          const std::vector<int64_t>& slot_mapping, const CacheGeometry& geo, std::vector<uint8_t>& cache,
          unsigned threads) {
  validate_geometry(geo, cache.size(), "pack");
  const size_t n = slot_mapping.size();  // the token count; kv_c / k_pe may be longer (padding)
  require(kv_c.size() >= n * kNope, "pack: kv_c shorter than slot_mapping.size() * 512");
  require(k_pe.size() >= n * kRope, "pack: k_pe shorter than slot_mapping.size() * 64");
  const int64_t capacity = geo.num_blocks * geo.block_size;
  if (threads == 0) threads = n >= kParallelPackTokens ? std::max(1u, std::thread::hardware_concurrency()) : 1u;
  threads = static_cast<unsigned>(std::min<size_t>(threads, std::max<size_t>(n, 1)));
  // Token i writes its slot only if no later token has the same slot: the sequential order's
  // last-writer-wins, so that threads write disjoint entries.
  std::vector<int64_t> last_writer;
  if (threads > 1) {
    last_writer.assign(static_cast<size_t>(capacity), -1);
    for (size_t i = 0; i < n; ++i) {
      const int64_t slot = slot_mapping[i];
      if (slot >= 0 && slot < capacity) last_writer[static_cast<size_t>(slot)] = static_cast<int64_t>(i);
    }
  }
  auto pack_range = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      const int64_t slot = slot_mapping[i];
      if (slot < 0 || slot >= capacity) continue;  // skipped: nothing is written
      if (threads > 1 && last_writer[static_cast<size_t>(slot)] != static_cast<int64_t>(i)) continue;
      const auto entry = quantize_entry(&kv_c[i * kNope], &k_pe[i * kRope]);
      const int64_t at = entry_offset(geo, slot / geo.block_size, slot % geo.block_size);
      std::copy(entry.begin(), entry.end(), cache.begin() + at);
    }
  };
  if (threads <= 1) {
    pack_range(0, n);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (unsigned w = 0; w < threads; ++w) {
    const size_t begin = n * w / threads, end = n * (w + 1) / threads;
    try {
      workers.emplace_back(pack_range, begin, end);
    } catch (const std::system_error&) {
      pack_range(begin, end);  // no thread to be had: this one packs the range (the same bytes)
    }
  }
  for (auto& t : workers) t.join();
}

// --- Gather (docs/semantics.md §2) ---------------------------------------------------------------------------

std::vector<uint16_t> gather(const std::vector<uint8_t>& cache, const CacheGeometry& geo, const BlockTable& bt,
                             const std::vector<int32_t>& workspace_starts,
                             const std::optional<std::vector<int32_t>>& seq_starts, int64_t num_rows) {
  validate_geometry(geo, cache.size(), "gather");
  validate_block_table(bt, "gather");
  require(num_rows >= 0, "gather: num_rows < 0");
  const size_t num_reqs = workspace_starts.size();
  require(num_reqs <= static_cast<size_t>(bt.num_reqs), "gather: more workspace_starts than block-table rows");
  require(std::is_sorted(workspace_starts.begin(), workspace_starts.end()),
          "gather: workspace_starts must be non-decreasing");
  require(!seq_starts || seq_starts->size() == num_reqs, "gather: seq_starts size != workspace_starts size");

  std::vector<uint16_t> dst(static_cast<size_t>(num_rows) * kLatent, kBf16QuietNaN);
  for (int64_t o = 0; o < num_rows; ++o) {
    // r = the largest request with ws[r] <= o; none when o < ws[0] (row stays NaN).
    const auto it = std::upper_bound(workspace_starts.begin(), workspace_starts.end(), o,
                                     [](int64_t row, int32_t start) { return row < start; });
    if (it == workspace_starts.begin()) continue;
    const auto r = static_cast<int32_t>(it - workspace_starts.begin() - 1);
    const int64_t p = o - workspace_starts[static_cast<size_t>(r)] + (seq_starts ? (*seq_starts)[static_cast<size_t>(r)] : 0);
    if (p < 0) continue;
    const int64_t logical_block = p / geo.block_size;
    if (logical_block >= bt.width) continue;
    const int64_t phys = bt.at(r, logical_block);
    if (phys < 0 || phys >= geo.num_blocks) continue;
    const auto row = dequant_entry(&cache[static_cast<size_t>(entry_offset(geo, phys, p % geo.block_size))]);
    std::copy(row.begin(), row.end(), dst.begin() + o * kLatent);
  }
  return dst;
}

// --- Conversion (docs/semantics.md §3) -----------------------------------------------------------------------
namespace {

// Slot of request-local position `pos` through block-table row r; -1 when invalid.
int32_t slot_of_position(const BlockTable& bt, int32_t r, int64_t pos, int32_t block_size) {
  if (pos < 0) return -1;
  const int64_t logical_block = pos / block_size;
  if (logical_block >= bt.width) return -1;
  const int64_t phys = bt.at(r, logical_block);
  if (phys < 0) return -1;
  return to_slot_or_invalid(phys * block_size + pos % block_size);
}

// DCP: -1 when rank `rank` does not own `pos`, else the rank-local position.
int64_t dcp_local_position(int64_t pos, int32_t world, int32_t rank, int32_t interleave) {
  if ((pos / interleave) % world != rank) return -1;
  return (pos / (static_cast<int64_t>(world) * interleave)) * interleave + pos % interleave;
}

}  // namespace

ConvertOutputs convert(const ConvertInputs& in) {
  validate_block_table(in.block_table, "convert");
  require(in.topk >= 0, "convert: topk < 0");
  require(in.block_size >= 1, "convert: block_size must be >= 1");
  const size_t n = in.req_id.size();
  // docs/semantics.md §6 failure mode 1: req_id and indices must describe the same rows.
  require(in.indices.size() == n * static_cast<size_t>(in.topk),
          "convert: indices size != req_id.size() * topk (req_id must be sliced to the rows of indices)");
  require(!in.prefill_req || in.prefill_req->size() == n, "convert: prefill_req size != req_id size");
  require(in.dcp_world_size >= 1, "convert: dcp_world_size must be >= 1");
  require(in.dcp_rank >= 0 && in.dcp_rank < in.dcp_world_size, "convert: dcp_rank outside [0, world)");
  require(in.dcp_interleave >= 1, "convert: dcp_interleave must be >= 1");
  require(in.block_size % in.dcp_interleave == 0, "convert: block_size must be a multiple of dcp_interleave");

  const size_t num_prefills = in.prefill_workspace_starts ? in.prefill_workspace_starts->size() : 0;
  const bool dcp = in.dcp_world_size > 1;
  ConvertOutputs result;
  result.out.assign(n * static_cast<size_t>(in.topk), -1);
  result.valid_count.assign(n, 0);

  for (size_t t = 0; t < n; ++t) {
    const int32_t r = in.req_id[t];
    if (r < 0 || r >= in.block_table.num_reqs) continue;  // whole row invalid
    const int32_t prefill = in.prefill_req ? (*in.prefill_req)[t] : -1;
    if (prefill >= 0 && static_cast<size_t>(prefill) >= num_prefills) continue;  // whole row invalid
    int32_t valid = 0;
    for (int32_t j = 0; j < in.topk; ++j) {
      const int64_t tok = in.indices[t * static_cast<size_t>(in.topk) + static_cast<size_t>(j)];
      int32_t slot = -1;
      if (tok < 0) {
        slot = -1;
      } else if (prefill >= 0) {  // workspace row; no block table, no DCP
        slot = to_slot_or_invalid((*in.prefill_workspace_starts)[static_cast<size_t>(prefill)] + tok);
      } else {
        const int64_t pos = dcp ? dcp_local_position(tok, in.dcp_world_size, in.dcp_rank, in.dcp_interleave) : tok;
        slot = slot_of_position(in.block_table, r, pos, in.block_size);
      }
      result.out[t * static_cast<size_t>(in.topk) + static_cast<size_t>(j)] = slot;
      valid += slot >= 0 ? 1 : 0;
    }
    result.valid_count[t] = valid;
  }
  return result;
}

// --- Layout rules (docs/semantics.md §1) ---------------------------------------------------------------------

std::optional<std::string> canonical_sparse_cache_dtype(const std::string& dtype) {
  if (dtype == "fp8" || dtype == "fp8_e4m3" || dtype == "fp8_ds_mla") return std::string("fp8_ds_mla");
  if (dtype == "auto" || dtype == "bf16") return std::string("auto");
  return std::nullopt;
}

int bytes_per_token(const std::string& dtype) {
  if (dtype == "auto" || dtype == "bf16") return (kNope + kRope) * 2;  // 1152
  if (dtype == "fp8" || dtype == "fp8_e4m3") return kNope + kRope;     // 576
  if (dtype == "fp8_ds_mla") return kEntryBytes;                       // 656
  return 0;
}

}  // namespace mla::ref
