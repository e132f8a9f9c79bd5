// Check "convert" (docs/semantics.md §3): top-k indices (request-local positions a causal indexer could pick,
// -1 padded, with the scenario's invalid mix written over them) converted to global slots (or
// prefill-workspace rows, or per DCP rank); output and valid counts must equal the reference
// exactly. Rows of indices are the decode tokens (prefills went dense) or all tokens; req_id is
// sliced to those rows, as the fix requires.
// Injection unbounded-convert: the launch covers the full-batch req_id while indices and the
// output hold only the decode rows; the guard after the output is sized to absorb the overrun so
// the run ends in OOB rather than a crash.
#include <optional>

#include "lib/checks/buffer_set.h"
#include "lib/checks/check_context.h"
#include "lib/checks/compare.h"
#include "lib/batch/rng.h"
#include "lib/batch/topk_indices.h"

namespace mla {

namespace {
constexpr uint64_t kStreamIndices = 13;

struct ConvertData {
  int64_t rows = 0;
  std::vector<int32_t> req_id_rows;   // req_id sliced to the rows of indices
  std::vector<int32_t> indices;       // [rows, K]
  std::vector<int32_t> prefill_req;   // [rows] when prefill_workspace
  std::vector<int32_t> prefill_ws;    // [num_prefills]
};

ConvertData make_convert_data(const CheckContext& ctx, const ConvertCase& c, size_t case_index) {
  const Batch& b = ctx.batch;
  const int32_t k = ctx.scenario.model.topk;
  ConvertData d;
  d.rows = c.rows == ConvertRows::kDecode ? b.num_decode_tokens : b.num_tokens;
  // Pinned req_id rows and indices are used as written (validate_scenario checked their counts).
  if (c.req_id) d.req_id_rows = *c.req_id;
  else d.req_id_rows.assign(b.req_id_per_token.begin(), b.req_id_per_token.begin() + d.rows);
  if (c.indices) {
    d.indices = pinned_rows(*c.indices, k);
  } else {
    d.indices.resize(static_cast<size_t>(d.rows) * k);
    Rng rng = Rng(ctx.scenario.seed).fork(kStreamIndices + 1000 * case_index);
    for (int64_t t = 0; t < d.rows; ++t) {
      int32_t* row = &d.indices[static_cast<size_t>(t) * k];
      pick_visible_topk(rng, b.token_pos[static_cast<size_t>(t)], k, row);
      apply_invalid_mix(rng, c.invalid, b, d.req_id_rows[static_cast<size_t>(t)], row, k);
    }
  }
  if (c.prefill_workspace) {
    int32_t start = 0;
    for (int32_t r = b.num_decodes; r < b.num_reqs; ++r) {
      d.prefill_ws.push_back(start);
      start += b.seq_lens[static_cast<size_t>(r)];
    }
    for (int64_t t = 0; t < d.rows; ++t) {
      const int32_t r = d.req_id_rows[static_cast<size_t>(t)];
      d.prefill_req.push_back(r >= b.num_decodes ? r - b.num_decodes : -1);
    }
  }
  return d;
}

CheckResult convert_one(const CheckContext& ctx, const ConvertCase& c, const ConvertData& d, int32_t rank) {
  const Batch& b = ctx.batch;
  const int32_t k = ctx.scenario.model.topk;
  const bool unbounded = ctx.injection == Injection::kUnboundedConvert && d.rows < b.num_tokens;
  if (unbounded && ctx.hooks.probe != nullptr) ctx.hooks.probe->applied();
  // Rows the launch covers: the rows of indices, or (injected bug) the whole batch's req_id.
  const int64_t launch_rows = unbounded ? b.num_tokens : d.rows;
  // Whatever the injection, guards after every per-row buffer cover the whole batch's rows (the
  // largest row count any input implies), so a launch sized by req_id ends in OOB, not a crash.
  const size_t guard = GuardedBuffer::kDefaultGuardBytes + static_cast<size_t>(b.num_tokens - d.rows) * k * sizeof(int32_t);

  BufferSet bufs(ctx.backend);
  ConvertParams p;
  // The buggy caller's req_id: the case's rows followed by the rest of the batch's.
  std::vector<int32_t> full_req_id = d.req_id_rows;
  if (unbounded) full_req_id.insert(full_req_id.end(), b.req_id_per_token.begin() + d.rows, b.req_id_per_token.end());
  p.req_id = bufs.input(unbounded ? full_req_id : d.req_id_rows, guard);
  p.num_tokens = launch_rows;
  p.indices = bufs.input(d.indices, guard);
  p.indices_rows = launch_rows;  // the buggy caller believes indices covers the whole batch
  p.topk = k;
  p.indices_row_stride = k;
  set_block_table(b.layout, bufs.input(b.layout.block_table), p);
  p.block_size = b.layout.block_size;
  GuardedBuffer& out = bufs.output<int32_t>(static_cast<size_t>(d.rows) * k, kPoisonByte, guard);
  GuardedBuffer& counts = bufs.output<int32_t>(static_cast<size_t>(d.rows), kPoisonByte, guard);
  p.out = out.as<int32_t>();
  p.out_row_stride = k;
  p.valid_count = counts.as<int32_t>();
  if (c.prefill_workspace) {
    std::vector<int32_t> prefill_req = d.prefill_req;
    if (unbounded) {
      prefill_req.clear();
      for (int32_t r : full_req_id) prefill_req.push_back(r >= b.num_decodes ? r - b.num_decodes : -1);
    }
    p.prefill_req = bufs.input(prefill_req, guard);
    p.prefill_workspace_starts = bufs.input(d.prefill_ws);
    p.num_prefills = static_cast<int32_t>(d.prefill_ws.size());
  }
  p.dcp_world_size = c.dcp_world_size;
  p.dcp_rank = rank;
  p.dcp_interleave = c.dcp_interleave;
  must(ctx.backend.convert(p));
  must(ctx.backend.synchronize());

  ref::ConvertInputs in;
  in.req_id = d.req_id_rows;
  in.indices = d.indices;
  in.topk = k;
  in.block_table = reference_block_table(b.layout);
  in.block_size = b.layout.block_size;
  if (c.prefill_workspace) {
    in.prefill_req = d.prefill_req;
    in.prefill_workspace_starts = d.prefill_ws;
  }
  in.dcp_world_size = c.dcp_world_size;
  in.dcp_rank = rank;
  in.dcp_interleave = c.dcp_interleave;
  const ref::ConvertOutputs ref_out = ref::convert(in);

  std::vector<int32_t> got_out, got_counts;
  must(out.download(got_out));
  must(counts.download(got_counts));
  DumpSink* dump = ctx.hooks.dump;
  const int64_t R = b.layout.num_reqs;
  dump_array(dump, "req_id", DumpRole::kInput, "request of each row of indices", {d.rows}, d.req_id_rows);
  dump_array(dump, "indices", DumpRole::kInput, "request-local positions picked per row; -1 padded", {d.rows, k}, d.indices);
  dump_array(dump, "block_table", DumpRole::kInput, "physical page of each request's logical block; -1: none",
             {R, b.layout.block_table_stride}, b.layout.block_table);
  if (c.prefill_workspace) {
    dump_array(dump, "prefill_req", DumpRole::kInput, "prefill index of each row; -1: not a prefill row", {d.rows},
               d.prefill_req);
    dump_array(dump, "prefill_workspace_starts", DumpRole::kInput, "each prefill's first workspace row",
               {static_cast<int64_t>(d.prefill_ws.size())}, d.prefill_ws);
  }
  dump_param(dump, "block_size", b.layout.block_size);
  dump_param(dump, "block_table_width", b.layout.block_table_width);
  dump_param(dump, "dcp_world_size", c.dcp_world_size);
  dump_param(dump, "dcp_rank", rank);
  dump_param(dump, "dcp_interleave", c.dcp_interleave);
  dump_array(dump, "out", DumpRole::kOutput, "global slot (or workspace row) per index; -1: invalid", {d.rows, k}, got_out);
  dump_array(dump, "valid_count", DumpRole::kOutput, "valid indices per row", {d.rows}, got_counts);
  dump_array(dump, "out", DumpRole::kReference, "the reference's conversion", {d.rows, k}, ref_out.out);
  dump_array(dump, "valid_count", DumpRole::kReference, "the reference's valid counts", {d.rows}, ref_out.valid_count);
  CheckResult r;
  r.metrics = compare_int32_exact(ref_out.out, got_out);
  merge_into(r.metrics, compare_int32_exact(ref_out.valid_count, got_counts));
  bufs.audit(r.metrics);
  r.metrics.extra["rows"] = static_cast<double>(d.rows);
  int64_t valid = 0;
  for (int32_t v : ref_out.valid_count) valid += v;
  r.metrics.extra["valid_indices"] = static_cast<double>(valid);
  finalize(r);
  return r;
}
}  // namespace

std::vector<CheckResult> run_convert_checks(const CheckContext& ctx) {
  std::vector<CheckResult> out;
  for (size_t i = 0; i < ctx.scenario.converts.size(); ++i) {
    const ConvertCase& c = ctx.scenario.converts[i];
    std::optional<ConvertData> d;  // built inside the first rank's check: a failure there is that check's ERROR
    for (int32_t rank = 0; rank < c.dcp_world_size; ++rank) {
      std::string id = "convert/" + c.name;
      if (c.dcp_world_size > 1) id += "/rank" + std::to_string(rank);
      out.push_back(hooked_check(ctx.hooks, id, "convert", [&] {
        if (!d) d = make_convert_data(ctx, c, i);
        return convert_one(ctx, c, *d, rank);
      }));
    }
  }
  if (out.empty()) out.push_back(skipped_check("convert", "convert", "the scenario has no convert case"));
  return out;
}

}  // namespace mla
