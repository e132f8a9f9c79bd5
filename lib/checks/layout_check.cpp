// Check "layout" (docs/semantics.md §1, failure mode 6.5): bytes per token of every cache dtype, the canonical
// dtype of the sparse backend, the page size at the scenario's block size, and whether the pool
// view covers the pages it is laid over — the production rules (lib/kv_cache_spec) against the
// reference's. Backend-independent.
#include <sstream>

#include "lib/checks/check_context.h"
#include "lib/checks/kv_cache_spec.h"

namespace mla {

std::vector<CheckResult> run_layout_check(const CheckContext& ctx) {
  return {hooked_check(ctx.hooks, "layout", "layout", [&] {
    const Scenario& s = ctx.scenario;
    const Batch& b = ctx.batch;
    CheckResult r;
    std::ostringstream why;
    auto rule = [&](bool ok, const std::string& what) {
      ++r.metrics.elements;
      if (!ok) {
        ++r.metrics.mismatches;
        why << (r.metrics.mismatches > 1 ? "; " : "") << what;
      }
    };
    for (const char* dtype : {"auto", "bf16", "fp8", "fp8_e4m3", "fp8_ds_mla"}) {
      const auto mine = canonical_sparse_cache_dtype(dtype).value_or("?");
      const auto theirs = ref::canonical_sparse_cache_dtype(dtype).value_or("?");
      rule(mine == theirs, std::string("canonical dtype of ") + dtype + ": " + mine + " vs reference " + theirs);
    }
    for (const char* dtype : {"auto", "fp8", "fp8_ds_mla"})
      rule(cache_bytes_per_token(dtype) == ref::bytes_per_token(dtype),
           std::string("bytes per token of ") + dtype + ": " + std::to_string(cache_bytes_per_token(dtype)) +
               " vs reference " + std::to_string(ref::bytes_per_token(dtype)));

    const int32_t B = s.model.block_size;
    const bool inject = ctx.injection == Injection::kPageSize576;
    const KvCacheSpec spec = sparse_kv_cache_spec(s.cache.dtype, B, b.layout.num_blocks, inject);
    if (inject && ctx.hooks.probe != nullptr) {
      const KvCacheSpec real = sparse_kv_cache_spec(s.cache.dtype, B, b.layout.num_blocks, false);
      if (real.page_bytes != spec.page_bytes || real.view_shape != spec.view_shape) ctx.hooks.probe->applied();
    }
    const std::string canonical = ref::canonical_sparse_cache_dtype(s.cache.dtype).value_or("?");
    const int64_t ref_page = ref::page_bytes(canonical, B);
    rule(spec.page_bytes == ref_page, "page bytes at block size " + std::to_string(B) + ": " +
                                          std::to_string(spec.page_bytes) + " vs reference " + std::to_string(ref_page));
    // The view [num_blocks, B, entry] must describe exactly the pages' token bytes.
    const int64_t view_page = spec.view_shape[1] * spec.view_shape[2];
    rule(view_page == ref_page, "cache view [" + std::to_string(spec.view_shape[0]) + ", " +
                                    std::to_string(spec.view_shape[1]) + ", " + std::to_string(spec.view_shape[2]) +
                                    "] covers " + std::to_string(view_page) + " bytes of each " +
                                    std::to_string(ref_page) + "-byte page");
    if (canonical == "fp8_ds_mla")
      rule(b.layout.page_stride_bytes == ref_page + s.cache.page_padding_bytes,
           "pool page stride " + std::to_string(b.layout.page_stride_bytes) + " vs reference page " +
               std::to_string(ref_page) + " + padding " + std::to_string(s.cache.page_padding_bytes));
    r.metrics.bit_exact = r.metrics.mismatches == 0;
    r.metrics.extra["page_bytes"] = static_cast<double>(ref_page);
    r.reason = why.str();
    finalize(r);
    return r;
  })};
}

}  // namespace mla
