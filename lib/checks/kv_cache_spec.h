// The KV-cache spec a sparse-MLA backend derives for one layer: canonical cache dtype, bytes per
// token, page size, and the view laid over a page pool (docs/semantics.md §1; failure mode 6.5). This is the
// production-side rule the "layout" check holds against the reference's own.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace mla {

struct KvCacheSpec {
  std::string dtype;              // canonical: "auto", "fp8", "fp8_ds_mla"
  int32_t bytes_per_token = 0;    // per layer
  int64_t page_bytes = 0;         // block_size * bytes_per_token
  std::array<int64_t, 3> view_shape{};  // [num_blocks, block_size, bytes_per_token] of the pool view
};

// Canonical dtype for the sparse backend: every quantized dtype ("fp8", "fp8_e4m3") becomes
// "fp8_ds_mla"; "bf16" becomes "auto". Unknown -> nullopt.
std::optional<std::string> canonical_sparse_cache_dtype(const std::string& requested);

// Bytes per token of a canonical dtype (auto 1152, fp8 576, fp8_ds_mla 656); 0 if unknown.
int32_t cache_bytes_per_token(const std::string& canonical_dtype);

// size_view_by_head_size reproduces failure mode 6.5: the view is sized by the head size (576)
// instead of the dtype's entry size.
KvCacheSpec sparse_kv_cache_spec(const std::string& requested_dtype, int32_t block_size, int64_t num_blocks,
                                 bool size_view_by_head_size = false);

}  // namespace mla
