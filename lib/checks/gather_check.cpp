// Check "gather" (docs/semantics.md §2): for each resolved gather case of the scenario (explicit starts, and
// chunked-context cases: every request's chunk i from i * chunk_rows, as dense prefill gathers its
// context; the forward pipeline's own workspace-derived chunks are covered end to end by the
// "forward" check), the backend gathers + upconverts from the reference's
// packed cache; the rows must equal the reference bit for bit (NaN == NaN), the poisoned output
// fully written, guards and the cache untouched.
// Injections: ignore-seq-starts passes no seq_starts; flat-fp8-gather reads the cache through the
// plain-fp8 gather (576 flat bytes per 656-byte entry, one global scale).
#include "kernels/common/ds_mla_entry.h"
#include "lib/checks/buffer_set.h"
#include "lib/checks/check_context.h"
#include "lib/checks/compare.h"

namespace mla {

namespace {

CheckResult gather_one(const CheckContext& ctx, const ResolvedGather& g) {
  const Batch& b = ctx.batch;
  BufferSet bufs(ctx.backend);
  GatherParams p;
  p.cache = cache_view(b.layout, bufs.input(ctx.cache.ref_cache));
  set_block_table(b.layout, bufs.input(b.layout.block_table), p);
  p.workspace_starts = bufs.input(g.workspace_starts);
  if (g.seq_starts) p.seq_starts = bufs.input(*g.seq_starts);
  p.num_rows = g.num_rows;
  p.dst_row_stride = DsMlaEntry::kLatentDims;
  const size_t elements = static_cast<size_t>(g.num_rows) * DsMlaEntry::kLatentDims;
  GuardedBuffer& dst = bufs.output<uint16_t>(elements, kPoisonByte);
  p.dst = dst.as<uint16_t>();

  must(ctx.backend.gather(p));
  must(ctx.backend.synchronize());

  std::vector<uint16_t> got;
  must(dst.download(got));
  const std::vector<uint16_t> ref =
      ref::gather(ctx.cache.ref_cache, reference_geometry(b.layout), reference_block_table(b.layout), g.workspace_starts, g.seq_starts, g.num_rows);
  DumpSink* dump = ctx.hooks.dump;
  const int64_t R = b.layout.num_reqs;
  dump_array(dump, "cache", DumpRole::kInput, "the packed pool, pages of page_stride bytes",
             {b.layout.num_blocks, b.layout.page_stride_bytes}, ctx.cache.ref_cache);
  dump_array(dump, "block_table", DumpRole::kInput, "physical page of each request's logical block; -1: none",
             {R, b.layout.block_table_stride}, b.layout.block_table);
  dump_array(dump, "workspace_starts", DumpRole::kInput, "each request's first output row", {R}, g.workspace_starts);
  if (g.seq_starts) dump_array(dump, "seq_starts", DumpRole::kInput, "each request's first source position", {R}, *g.seq_starts);
  dump_param(dump, "block_size", b.layout.block_size);
  dump_param(dump, "block_table_width", b.layout.block_table_width);
  dump_param(dump, "num_rows", static_cast<double>(g.num_rows));
  dump_array(dump, "dst", DumpRole::kOutput, "gathered rows: 512 latent + 64 rotary values, bf16 bits", {g.num_rows, 576}, got);
  dump_array(dump, "dst", DumpRole::kReference, "the reference's rows, bf16 bits", {g.num_rows, 576}, ref);
  CheckResult r;
  r.metrics = compare_bf16_exact(ref, got);
  bufs.audit(r.metrics);
  r.metrics.extra["rows"] = static_cast<double>(g.num_rows);
  finalize(r);
  return r;
}
}  // namespace

std::vector<CheckResult> run_gather_checks(const CheckContext& ctx) {
  std::vector<CheckResult> out;
  for (const auto& g : ctx.batch.gathers)
    out.push_back(hooked_check(ctx.hooks, "gather/" + g.name, "gather", [&] { return gather_one(ctx, g); }));
  if (out.empty()) {
    out.push_back(skipped_check("gather", "gather",
                                "the scenario has no gather case (no explicit case and no request with cached context)"));
  }
  return out;
}

}  // namespace mla
