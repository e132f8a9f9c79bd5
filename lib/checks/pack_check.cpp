// Check "pack" (docs/semantics.md §1.1): the backend writes every token of the batch into a NaN-filled cache;
// the whole cache must equal the reference's bytes, skipped tokens (slot -1, slot past the pool)
// and unused slots and page padding untouched.
#include "kernels/common/ds_mla_entry.h"
#include "lib/checks/buffer_set.h"
#include "lib/checks/check_context.h"
#include "lib/checks/compare.h"
#include "lib/batch/rng.h"

namespace mla {

namespace {
constexpr uint64_t kStreamPackSkips = 12;

// The token list the backend packs: every cached token, with skipped tokens mixed in (slot -1 or
// a slot past the pool) whose data must not reach the cache, and two padding rows past the end of
// slot_mapping (inputs may be longer than the number of tokens).
struct PackInputs {
  std::vector<uint16_t> kv_c, k_pe;
  std::vector<int64_t> slots;
};

PackInputs make_pack_inputs(const Scenario& s, const Batch& b, const CacheData& d) {
  PackInputs in;
  Rng rng = Rng(s.seed).fork(kStreamPackSkips);
  auto push = [&](const uint16_t* kv, const uint16_t* pe, int64_t slot) {
    in.kv_c.insert(in.kv_c.end(), kv, kv + 512);
    in.k_pe.insert(in.k_pe.end(), pe, pe + 64);
    in.slots.push_back(slot);
  };
  std::vector<uint16_t> junk_kv(512), junk_pe(64);
  for (auto& v : junk_kv) v = 0x4000;  // 2.0: visible if it lands anywhere
  for (auto& v : junk_pe) v = 0x4000;
  const int64_t capacity = b.layout.num_slots();
  for (size_t t = 0; t < b.all_slots.size(); ++t) {
    if (rng.below(8) == 0) push(junk_kv.data(), junk_pe.data(), -1);
    if (rng.below(16) == 0) push(junk_kv.data(), junk_pe.data(), capacity + static_cast<int64_t>(rng.below(64)));
    push(&d.kv_c[t * 512], &d.k_pe[t * 64], b.all_slots[t]);
  }
  return in;
}

std::vector<bool> untouched_mask(const Batch& b) {
  std::vector<bool> mask(static_cast<size_t>(b.layout.cache_bytes()), true);
  for (int64_t slot : b.all_slots) {
    const int64_t base = b.layout.entry_offset(slot);
    for (int i = 0; i < DsMlaEntry::kBytes; ++i) mask[static_cast<size_t>(base + i)] = false;
  }
  return mask;
}
}  // namespace

std::vector<CheckResult> run_pack_check(const CheckContext& ctx) {
  return {hooked_check(ctx.hooks, "pack", "pack", [&] {
    const Batch& b = ctx.batch;
    PackInputs in = make_pack_inputs(ctx.scenario, b, ctx.cache);
    const int64_t n = static_cast<int64_t>(in.slots.size());
    // Two padding rows past the end of slot_mapping, as in production.
    in.kv_c.resize(in.kv_c.size() + 2 * 512, 0x4000);
    in.k_pe.resize(in.k_pe.size() + 2 * 64, 0x4000);

    BufferSet bufs(ctx.backend);
    PackParams p;
    p.kv_c = bufs.input(in.kv_c);
    p.k_pe = bufs.input(in.k_pe);
    p.slot_mapping = bufs.input(in.slots);
    p.num_tokens = n;
    std::vector<uint8_t> initial(static_cast<size_t>(b.layout.cache_bytes()), kUnusedCacheByte);
    GuardedBuffer& cache = bufs.in_out(initial);
    p.cache = cache_view(b.layout, cache.as<uint8_t>());
    must(ctx.backend.pack(p));
    must(ctx.backend.synchronize());

    std::vector<uint8_t> got;
    must(cache.download(got));
    DumpSink* dump = ctx.hooks.dump;
    const std::vector<int64_t> pages{b.layout.num_blocks, b.layout.page_stride_bytes};
    dump_array(dump, "kv_c", DumpRole::kInput, "latent of every packed token (and 2 padding rows past the count)",
               {n + 2, 512}, in.kv_c);
    dump_array(dump, "k_pe", DumpRole::kInput, "rotary part of every packed token (and 2 padding rows)", {n + 2, 64}, in.k_pe);
    dump_array(dump, "slot_mapping", DumpRole::kInput, "cache slot of each token; -1 or past the pool: skipped", {n},
               in.slots);
    dump_param(dump, "block_size", b.layout.block_size);
    dump_array(dump, "cache", DumpRole::kOutput, "the pool after the pack (it started as 0xFF), pages of page_stride bytes",
               pages, got);
    dump_array(dump, "cache", DumpRole::kReference, "the reference's pool", pages, ctx.cache.ref_cache);
    const std::vector<bool> mask = untouched_mask(b);
    CheckResult r;
    r.metrics = compare_bytes_exact(ctx.cache.ref_cache, got, &mask);
    bufs.audit(r.metrics);
    r.metrics.extra["tokens"] = static_cast<double>(n);
    finalize(r);
    return r;
  })};
}

}  // namespace mla
