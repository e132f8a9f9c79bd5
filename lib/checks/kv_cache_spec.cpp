#include "lib/checks/kv_cache_spec.h"

#include "kernels/common/ds_mla_entry.h"

namespace mla {

std::optional<std::string> canonical_sparse_cache_dtype(const std::string& requested) {
  if (requested == "fp8" || requested == "fp8_e4m3" || requested == "fp8_ds_mla") return std::string("fp8_ds_mla");
  if (requested == "auto" || requested == "bf16") return std::string("auto");
  return std::nullopt;
}

int32_t cache_bytes_per_token(const std::string& dtype) {
  if (dtype == "auto") return kBf16CacheBytesPerToken;
  if (dtype == "fp8") return kFlatFp8CacheBytesPerToken;
  if (dtype == "fp8_ds_mla") return DsMlaEntry::kBytes;
  return 0;
}

KvCacheSpec sparse_kv_cache_spec(const std::string& requested_dtype, int32_t block_size, int64_t num_blocks,
                                 bool size_view_by_head_size) {
  KvCacheSpec s;
  s.dtype = canonical_sparse_cache_dtype(requested_dtype).value_or("");
  s.bytes_per_token = cache_bytes_per_token(s.dtype);
  s.page_bytes = static_cast<int64_t>(block_size) * s.bytes_per_token;
  const int64_t view_entry = size_view_by_head_size ? DsMlaEntry::kLatentDims : s.bytes_per_token;
  s.view_shape = {num_blocks, block_size, view_entry};
  return s;
}

}  // namespace mla
