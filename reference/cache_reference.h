// The independent reference for the cache path (docs/semantics.md §1-§3), in double where arithmetic
// happens, sharing no code with kernels/: its own FP8 and bf16 rules, its own index math. It takes
// and returns plain host containers so that it can disagree with any backend.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mla::ref {

// --- Number formats -------------------------------------------------------------------------
double e4m3_value(uint8_t code);            // exact value; NaN for 0x7F / 0xFF
uint8_t e4m3_encode(double x);              // x: an fp32 value; nearest even, saturate to +-448
double bf16_value(uint16_t bits);           // exact value
uint16_t bf16_round(double x);              // x: an fp32 value; nearest even (NaN -> 0x7FC0 with sign)
double round_to_f32(double x);              // nearest-even rounding of a double to fp32

// --- Cache geometry and the entry format -------------------------------------------------------
inline constexpr int kEntryBytes = 656;
inline constexpr int kLatent = 576;
inline constexpr int kNope = 512;
inline constexpr int kRope = 64;

struct CacheGeometry {
  int64_t num_blocks = 0;
  int32_t block_size = 0;
  int64_t page_stride_bytes = 0;  // >= block_size * 656
  int64_t bytes() const { return num_blocks * page_stride_bytes; }
};

// One token -> its 656 bytes (docs/semantics.md §1.1): per-128 tile scale max(amax / 448, FLT_MIN) in fp32,
// e4m3(x / scale) with the division rounded to fp32, RoPE bits copied.
std::array<uint8_t, kEntryBytes> quantize_entry(const uint16_t* kv_c /*512*/, const uint16_t* k_pe /*64*/);
// How a reader turns a value's e4m3 code and its tile's fp32 scale into bf16.
enum class ScaleRounding {
  // docs/semantics.md §1.2: bf16_rne(f32_rne(e4m3 * scale)), one fp32 multiply then one rounding to bf16.
  kF32,
  // The scale first rounded to bf16 (nearest even), then the product (exact: 4 x 8 significant
  // bits) rounded once to bf16: bf16_rne(e4m3 * bf16_rne(scale)). FlashMLA's Hopper sparse FP8
  // decode reads the cache this way (docs/semantics.md §4.1).
  kBf16,
};

// 656 bytes -> 576 bf16: the 512 latent values as `rounding` says (kF32: docs/semantics.md §1.2), RoPE copied.
std::array<uint16_t, kLatent> dequant_entry(const uint8_t* entry, ScaleRounding rounding = ScaleRounding::kF32);

// Pack N tokens into `cache` (already sized geometry.bytes()): slot < 0 or >= capacity skipped;
// where tokens share a slot, the last one's entry is what remains (as if packed in token order).
// kv_c: [N, 512] contiguous, k_pe: [N, 64] contiguous. `threads`: tokens are quantized on that
// many threads (the same bytes for any count; 0: one per hardware thread from kParallelPackTokens
// tokens, else one). The reference's per-value arithmetic is slow (about 70 ns per value on a CI
// core: 18 s on one thread for the 512k tokens of mla-bench's flashmla_decode forward shape).
constexpr size_t kParallelPackTokens = 16384;
void pack(const std::vector<uint16_t>& kv_c, const std::vector<uint16_t>& k_pe,
          const std::vector<int64_t>& slot_mapping, const CacheGeometry& geo, std::vector<uint8_t>& cache,
          unsigned threads = 0);

// Block table as a host matrix with an explicit row stride.
struct BlockTable {
  std::vector<int32_t> data;  // [num_reqs, stride]
  int32_t num_reqs = 0;
  int32_t width = 0;          // used columns
  int64_t stride = 0;         // >= width
  int32_t at(int32_t r, int64_t c) const { return data[static_cast<size_t>(r * stride + c)]; }
};

// docs/semantics.md §2 gather: returns [num_rows, 576] bf16 bits. Rows whose source is invalid (before ws[0],
// negative position, logical block >= width, physical block < 0 or >= num_blocks) are bf16 quiet
// NaN 0x7FC0 in every element.
std::vector<uint16_t> gather(const std::vector<uint8_t>& cache, const CacheGeometry& geo, const BlockTable& bt,
                             const std::vector<int32_t>& workspace_starts,
                             const std::optional<std::vector<int32_t>>& seq_starts, int64_t num_rows);

// docs/semantics.md §3 conversion.
struct ConvertInputs {
  std::vector<int32_t> req_id;   // [N]
  std::vector<int32_t> indices;  // [N, topk] contiguous
  int32_t topk = 0;
  BlockTable block_table;
  int32_t block_size = 0;
  std::optional<std::vector<int32_t>> prefill_req;               // [N], -1 = not a prefill token
  std::optional<std::vector<int32_t>> prefill_workspace_starts;  // [num_prefills]
  int32_t dcp_world_size = 1, dcp_rank = 0, dcp_interleave = 1;
};
struct ConvertOutputs {
  std::vector<int32_t> out;          // [N, topk]
  std::vector<int32_t> valid_count;  // [N]
};
ConvertOutputs convert(const ConvertInputs& in);

// --- Layout rules (docs/semantics.md §1) ---------------------------------------------------------------------
// Canonical cache dtype for the sparse backend: "fp8" and "fp8_e4m3" -> "fp8_ds_mla"; "auto" and
// "bf16" -> "auto"; "fp8_ds_mla" stays. Unknown -> std::nullopt.
std::optional<std::string> canonical_sparse_cache_dtype(const std::string& dtype);
// Bytes per token per layer: auto 1152, fp8 576, fp8_ds_mla 656. Unknown -> 0.
int bytes_per_token(const std::string& dtype);
inline int64_t page_bytes(const std::string& dtype, int32_t block_size) {
  return static_cast<int64_t>(bytes_per_token(dtype)) * block_size;
}

}  // namespace mla::ref
