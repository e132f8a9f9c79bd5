// Attention checks (docs/semantics.md §4, 5, 8): each kernel alone against the reference (sparse_mqa,
// dense_mha), the whole mixed-batch forward against the reference (forward), the two routes
// against each other (equivalence), N simulated decode-context-parallel ranks merged against one
// rank (dcp), and two runs bit for bit (determinism).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/common/bf16.h"
#include "lib/batch/attention_data.h"
#include "lib/checks/buffer_set.h"
#include "lib/checks/attention_check_context.h"
#include "lib/checks/compare.h"
#include "lib/checks/dcp_parts.h"
#include "lib/dcp/merge_tree.h"
#include "lib/dcp/shard.h"
#include "lib/pipeline/attention_call.h"
#include "lib/pipeline/forward_pipeline.h"
#include "lib/pipeline/sparse_mqa_plan.h"
#include "lib/batch/rng.h"
#include "lib/batch/topk_indices.h"
#include "reference/attention_reference.h"
#include "reference/forward_reference.h"

namespace mla {

namespace {

constexpr uint64_t kStreamKernelInputs = 31;

int32_t float_bits(float v) {
  int32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits;
}

std::vector<uint16_t> to_bf16(const std::vector<double>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16_rne(static_cast<float>(v[i]));
  return out;
}

// Output and LSE compared separately; the LSE's failures count in the verdict and its figures
// (elements, mismatches, worst position and values) go to lse_* extras.
Metrics compare_out_and_lse(const std::vector<double>& ref_out, const std::vector<double>& got_out, const Tolerance& out_tol,
                            const std::vector<double>& ref_lse, const std::vector<double>& got_lse, const Tolerance& lse_tol) {
  Metrics m = compare_tolerance(ref_out, got_out, out_tol);
  const Metrics l = compare_tolerance(ref_lse, got_lse, lse_tol);
  m.elements += l.elements;
  m.mismatches += l.mismatches;
  m.nonfinite_mismatches += l.nonfinite_mismatches;
  m.extra["lse_elements"] = static_cast<double>(l.elements);
  m.extra["lse_mismatches"] = static_cast<double>(l.mismatches + l.nonfinite_mismatches);
  m.extra["lse_max_abs_err"] = l.max_abs_err;
  m.extra["lse_max_rel_err"] = l.max_rel_err;
  m.extra["lse_worst_index"] = static_cast<double>(l.worst_index);
  m.extra["lse_worst_ref"] = l.worst_ref;
  m.extra["lse_worst_got"] = l.worst_got;
  return m;
}

// The absorbed query in bf16 (what the sparse kernel receives), split into its two parts, and the
// same values in double for the reference.
struct LatentQuery {
  std::vector<uint16_t> nope;  // [T, H, 512]
  std::vector<uint16_t> pe;    // [T, H, 64]
  std::vector<double> both;    // [T, H, 576] the bf16 values, widened
};
LatentQuery latent_query(const AttentionData& d, int64_t T) {
  const int32_t H = d.heads;
  const std::vector<uint16_t> q_lat = to_bf16(ref::absorb_q(d.q_nope, d.q_pe, d.w_uk));
  LatentQuery q;
  q.nope.resize(static_cast<size_t>(T) * H * kDc);
  q.pe.resize(static_cast<size_t>(T) * H * kDr);
  for (int64_t th = 0; th < T * H; ++th) {
    std::copy_n(&q_lat[th * kDl], kDc, &q.nope[th * kDc]);
    std::copy_n(&q_lat[th * kDl + kDc], kDr, &q.pe[th * kDr]);
  }
  q.both = widen_bf16(q_lat);
  return q;
}

// Global slots of the indexer's picks (through the reference conversion) with invalid entries the
// kernel must skip: -1, INT_MIN, and slots past the pool. Pinned slots are used as written, and
// pinned picks are converted without invalid entries mixed in.
std::vector<int32_t> sparse_indices(const AttentionCheckContext& ctx) {
  const Batch& b = ctx.batch;
  if (ctx.scenario.attention.sparse_mqa_slots) return pinned_rows(*ctx.scenario.attention.sparse_mqa_slots, ctx.data.topk);
  ref::ConvertInputs in;
  in.req_id = b.req_id_per_token;
  in.indices = ctx.data.topk_pos;
  in.topk = ctx.data.topk;
  in.block_table = reference_block_table(b.layout);
  in.block_size = b.layout.block_size;
  std::vector<int32_t> slots = ref::convert(in).out;
  if (ctx.scenario.attention.topk_positions) return slots;
  Rng rng = Rng(ctx.scenario.seed).fork(kStreamKernelInputs);
  const int64_t capacity = b.layout.num_slots();
  for (auto& s : slots) {
    const uint64_t u = rng.below(64);
    if (u == 0) s = -1;
    else if (u == 1) s = INT32_MIN;
    else if (u == 2) s = static_cast<int32_t>(capacity + static_cast<int64_t>(rng.below(1000)));
  }
  return slots;
}

struct SparseRun {
  std::vector<uint16_t> out_lat;
  std::vector<float> lse;
  int64_t work_items = 0;
  int64_t partials = 0;
};

// One sparse-MQA launch over T tokens on a given cache, with a plan of target_items.
SparseRun run_sparse_kernel(Backend& be, BufferSet& bufs, const LatentQuery& q, int64_t T, int32_t H,
                            const std::vector<int32_t>& slots, int32_t K, const std::vector<uint8_t>& cache,
                            const PagedLayout& layout, float scale, int32_t target_items) {
  const SparseMqaPlan plan = plan_sparse_mqa(static_cast<int32_t>(T), K, target_items);
  SparseMqaCall call;
  call.tokens = T;
  call.heads = H;
  call.topk = K;
  call.scale = scale;
  call.q_nope_lat = bufs.input(q.nope);
  call.q_pe = bufs.input(q.pe);
  call.indices = bufs.input(slots);
  call.cache = cache_view(layout, bufs.input(cache));
  GuardedBuffer& out = bufs.output<bf16_t>(static_cast<size_t>(T) * H * kDc, kPoisonByte);
  GuardedBuffer& lse = bufs.output<float>(static_cast<size_t>(T) * H, kPoisonByte);
  call.out_lat = out.as<bf16_t>();
  call.lse = lse.as<float>();
  SparseMqaParams p = sparse_mqa_params(call);
  attach_plan(bufs, plan, p);
  must(be.sparse_mqa(p));
  must(be.synchronize());
  SparseRun r;
  must(out.download(r.out_lat));
  must(lse.download(r.lse));
  r.work_items = static_cast<int64_t>(plan.items.size());
  r.partials = plan.num_partials;
  return r;
}

}  // namespace

Tolerance with_merges(Tolerance t, int64_t merges) {
  if (t.cos >= 0.0) t.cos += static_cast<double>(merges) * std::ldexp(1.0, -18) / 3.0;
  return t;
}

ForwardConfig forward_config(const AttentionCheckContext& ctx) {
  ForwardConfig cfg;
  cfg.decode_threshold = ctx.scenario.batch.decode_threshold;
  cfg.force_sparse = ctx.scenario.attention.force_sparse;
  cfg.workspace_rows = ctx.scenario.attention.workspace_rows;
  cfg.scale = static_cast<float>(ctx.scenario.model.scale);
  cfg.num_decodes = ctx.scenario.batch.num_decodes.value_or(-1);
  cfg.injection = ctx.injection;
  cfg.probe = ctx.hooks.probe;
  return cfg;
}

std::string no_dense_route(const Batch& b, int32_t topk) {
  if (b.num_decodes == b.num_reqs) return "the batch has no prefill";
  if (!prefills_fit_topk(b, b.num_decodes, topk))
    return "a prefill is longer than top-k: the batch has no dense route to compare";
  return "";
}

// The forward step's inputs (forward, equivalence and determinism give the step the same ones).
void dump_forward_inputs(const AttentionCheckContext& ctx) {
  DumpSink* dump = ctx.hooks.dump;
  if (dump == nullptr) return;
  const Batch& b = ctx.batch;
  const AttentionData& d = ctx.data;
  const int64_t T = b.num_tokens, H = d.heads, K = d.topk;
  dump_array(dump, "q_nope", DumpRole::kInput, "query NoPE part per new token, bf16 bits", {T, H, kDn}, d.q_nope);
  dump_array(dump, "q_pe", DumpRole::kInput, "rotary query per new token, bf16 bits", {T, H, kDr}, d.q_pe);
  dump_array(dump, "kv_c", DumpRole::kInput, "this step's latent of each new token, bf16 bits", {T, kDc}, d.new_kv_c);
  dump_array(dump, "k_pe", DumpRole::kInput, "this step's rotary key of each new token, bf16 bits", {T, kDr}, d.new_k_pe);
  dump_array(dump, "slot_mapping", DumpRole::kInput, "cache slot of each new token", {T}, d.new_slots);
  dump_array(dump, "w_uk", DumpRole::kInput, "W_UK per head [Dn, Dc], bf16 bits", {H, kDn, kDc}, d.w_uk);
  dump_array(dump, "w_uv", DumpRole::kInput, "W_UV per head [Dv, Dc], bf16 bits", {H, kDv, kDc}, d.w_uv);
  dump_array(dump, "topk_positions", DumpRole::kInput, "request-local positions each token attends to (sparse route)",
             {T, K}, d.topk_pos);
  dump_array(dump, "req_id", DumpRole::kInput, "request of each new token", {T}, b.req_id_per_token);
  dump_array(dump, "block_table", DumpRole::kInput, "physical page of each request's logical block; -1: none",
             {b.num_reqs, b.layout.block_table_stride}, b.layout.block_table);
  dump_array(dump, "cache", DumpRole::kInput, "the pool before the step: context positions packed",
             {b.layout.num_blocks, b.layout.page_stride_bytes}, d.context_cache);
  dump_param(dump, "num_decodes", b.num_decodes);
  dump_param(dump, "block_size", b.layout.block_size);
  dump_param(dump, "scale", ctx.scenario.model.scale);
}

// The routes compute one function only when the sparse route picks every position a prefill
// token sees, once each (docs/semantics.md §4.3). Generated picks do whenever the prefills fit in
// top-k; pinned ones may not: then why, else "".
std::string pinned_picks_differ_from_dense(const AttentionCheckContext& ctx) {
  if (!ctx.scenario.attention.topk_positions) return "";
  const Batch& b = ctx.batch;
  const int32_t K = ctx.data.topk;
  for (int64_t t = b.num_decode_tokens; t < b.num_tokens; ++t) {
    const int32_t r = b.req_id_per_token[static_cast<size_t>(t)];
    const int32_t pos = b.token_pos[static_cast<size_t>(t)];
    std::vector<int32_t> seen;
    for (int32_t j = 0; j < K; ++j) {
      const int32_t p = ctx.data.topk_pos[static_cast<size_t>(t * K + j)];
      if (p >= 0 && p < b.seq_lens[static_cast<size_t>(r)]) seen.push_back(p);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int32_t> visible(static_cast<size_t>(pos) + 1);
    std::iota(visible.begin(), visible.end(), 0);
    if (seen != visible)
      return "the pinned top-k positions of new token " + std::to_string(t) + " (request " + std::to_string(r) +
             ", position " + std::to_string(pos) +
             ") are not every visible position once: the sparse route computes another function than the dense one";
  }
  return "";
}

ref::ScaleRounding reference_dequant(const Backend& backend) {
  switch (backend.sparse_mqa_dequant()) {
    case SparseDequant::kBf16Scale: return ref::ScaleRounding::kBf16;
    case SparseDequant::kF32Scale: break;
  }
  return ref::ScaleRounding::kF32;
}

ref::ForwardInputs reference_forward_inputs(const Scenario& s, const Batch& b, const CacheData& cache,
                                            const AttentionData& d, bool force_sparse, ref::NewTokenKv kv,
                                            ref::ScaleRounding sparse_dequant) {
  ref::ForwardInputs in;
  in.seq_len = b.seq_lens;
  in.query_len = b.query_lens;
  // The reference splits the batch by its own rule, so a wrong split in lib/ cannot hide; a pinned
  // decode count is an input both take.
  in.num_decodes = s.batch.num_decodes ? *s.batch.num_decodes
                                       : ref::count_decode_requests(b.query_lens, s.batch.decode_threshold);
  in.req_id = b.req_id_per_token;
  in.position = b.token_pos;
  in.num_heads = d.heads;
  in.q_nope = d.q_nope;
  in.q_pe = d.q_pe;
  in.w_uk = d.w_uk;
  in.w_uv = d.w_uv;
  in.kv_c = cache.kv_c;
  in.k_pe = cache.k_pe;
  in.geometry = reference_geometry(b.layout);
  in.block_table = reference_block_table(b.layout);
  in.topk_positions = d.topk_pos;
  in.topk = d.topk;
  in.scale = s.model.scale;
  in.force_sparse = force_sparse;
  in.new_token_kv = kv;
  in.sparse_dequant = sparse_dequant;
  return in;
}

std::vector<CheckResult> run_sparse_mqa_check(const AttentionCheckContext& ctx) {
  const int64_t T = ctx.batch.num_tokens;
  const int32_t H = ctx.data.heads, K = ctx.data.topk;
  const int32_t column_blocks = (K + 63) / 64;
  // Inputs and the reference, computed once for both variants (inside the first check, so a
  // failure here is that check's ERROR, not the scenario's).
  LatentQuery q;
  std::vector<int32_t> slots;
  ref::AttentionResult ref_res;
  auto prepare = [&] {
    if (!slots.empty()) return;
    q = latent_query(ctx.data, T);
    slots = sparse_indices(ctx);
    ref_res = ref::sparse_mqa(q.both, H, slots, K, ctx.cache.ref_cache, reference_geometry(ctx.batch.layout),
                              ctx.scenario.model.scale, reference_dequant(ctx.backend));
  };
  // The same call with every token's top-k range split into 64-column items (combine step) and
  // unsplit (one item per token, written directly).
  std::vector<CheckResult> out;
  for (const bool split : {true, false}) {
    out.push_back(hooked_check(ctx.hooks, split ? "sparse_mqa/split" : "sparse_mqa/unsplit", "sparse_mqa", [&] {
      if (split && column_blocks < 2)
        return skipped_check("", "", "top-k " + std::to_string(K) + " is a single 64-column block: nothing to split");
      prepare();
      const int32_t target = split ? static_cast<int32_t>(std::min<int64_t>(T * column_blocks, INT32_MAX)) : 1;
      BufferSet bufs(ctx.backend);
      const SparseRun run = run_sparse_kernel(ctx.backend, bufs, q, T, H, slots, K, ctx.cache.ref_cache,
                                              ctx.batch.layout, static_cast<float>(ctx.scenario.model.scale), target);
      DumpSink* dump = ctx.hooks.dump;
      dump_array(dump, "q_nope_lat", DumpRole::kInput, "absorbed query W_UK^T q_nope, bf16 bits", {T, H, kDc}, q.nope);
      dump_array(dump, "q_pe", DumpRole::kInput, "rotary query, bf16 bits", {T, H, kDr}, q.pe);
      dump_array(dump, "indices", DumpRole::kInput, "global slots per token; invalid ones are skipped", {T, K}, slots);
      dump_array(dump, "cache", DumpRole::kInput, "the packed pool, pages of page_stride bytes",
                 {ctx.batch.layout.num_blocks, ctx.batch.layout.page_stride_bytes}, ctx.cache.ref_cache);
      dump_param(dump, "block_size", ctx.batch.layout.block_size);
      dump_param(dump, "scale", ctx.scenario.model.scale);
      dump_param(dump, "work_items", static_cast<double>(run.work_items));
      dump_array(dump, "out_lat", DumpRole::kOutput, "latent output, bf16 bits", {T, H, kDc}, run.out_lat);
      dump_array(dump, "lse", DumpRole::kOutput, "log-sum-exp of the scores (natural log)", {T, H}, run.lse);
      dump_array(dump, "out_lat", DumpRole::kReference, "the reference's latent output", {T, H, kDc}, ref_res.out);
      dump_array(dump, "lse", DumpRole::kReference, "the reference's LSE", {T, H}, ref_res.lse);
      CheckResult r;
      const AttentionTolerances& tol = ctx.scenario.attention.tolerances;
      r.metrics = compare_out_and_lse(ref_res.out, widen_bf16(run.out_lat), tol.sparse_mqa, ref_res.lse,
                                      widen_f32(run.lse), tol.sparse_lse);
      bufs.audit(r.metrics);
      r.metrics.extra["work_items"] = static_cast<double>(run.work_items);
      r.metrics.extra["partials"] = static_cast<double>(run.partials);
      finalize(r);
      return r;
    }));
  }
  return out;
}

std::vector<CheckResult> run_dense_mha_check(const AttentionCheckContext& ctx) {
  const Batch& b = ctx.batch;
  const int32_t H = ctx.data.heads;
  // Requests with new tokens: causal over [context + new] keys, and unmasked over the context.
  std::vector<CheckResult> out;
  for (const bool causal : {true, false}) {
    out.push_back(hooked_check(ctx.hooks, causal ? "dense_mha/causal" : "dense_mha/context", "dense_mha", [&] {
      std::vector<int32_t> q_lens, k_lens;
      for (int32_t r = 0; r < b.num_reqs; ++r) {
        q_lens.push_back(b.query_lens[static_cast<size_t>(r)]);
        k_lens.push_back(causal ? b.seq_lens[static_cast<size_t>(r)] : b.context_lens[static_cast<size_t>(r)]);
      }
      const int64_t tq = std::accumulate(q_lens.begin(), q_lens.end(), int64_t{0});
      const int64_t tk = std::accumulate(k_lens.begin(), k_lens.end(), int64_t{0});
      if (tk == 0) return skipped_check("", "", "no keys: the batch has no cached context");
      // Inputs distributed as the dense route sees them (docs/semantics.md §8's data): queries uniform in
      // [-1, 1]; K/V the up-projection W kv_c of a latent ~ N(0, 0.1^2) with weights ~ N(0, 0.1^2),
      // i.e. ~ N(0, (0.1 * 0.1 * sqrt(512))^2); RoPE keys as the cache's, ~ N(0, 0.5^2).
      Rng rng = Rng(ctx.scenario.seed).fork(kStreamKernelInputs + (causal ? 1 : 2));
      const double kv_sigma = 0.1 * 0.1 * std::sqrt(512.0);
      auto uniform_bf16 = [&](size_t n) {
        std::vector<uint16_t> v(n);
        for (auto& x : v) x = f32_to_bf16_rne(static_cast<float>(rng.uniform(-1.0, 1.0)));
        return v;
      };
      auto normal_bf16 = [&](size_t n, double sigma) {
        std::vector<uint16_t> v(n);
        for (auto& x : v) x = f32_to_bf16_rne(static_cast<float>(rng.normal(0.0, sigma)));
        return v;
      };
      const auto q_nope = uniform_bf16(static_cast<size_t>(tq) * H * kDn);
      const auto q_pe = uniform_bf16(static_cast<size_t>(tq) * H * kDr);
      const auto k_nope = normal_bf16(static_cast<size_t>(tk) * H * kDn, kv_sigma);
      const auto k_pe = normal_bf16(static_cast<size_t>(tk) * kDr, 0.5);
      const auto v = normal_bf16(static_cast<size_t>(tk) * H * kDv, kv_sigma);

      const std::vector<int32_t> cu_q = prefix_sums(q_lens), cu_k = prefix_sums(k_lens);
      BufferSet bufs(ctx.backend);
      DenseMhaCall call;
      call.heads = H;
      call.causal = causal;
      call.scale = static_cast<float>(ctx.scenario.model.scale);
      call.cu_q_host = &cu_q;
      call.cu_k_host = &cu_k;
      call.cu_q = bufs.input(cu_q);
      call.cu_k = bufs.input(cu_k);
      call.q_nope = bufs.input(q_nope);
      call.q_pe = bufs.input(q_pe);
      call.k_nope = bufs.input(k_nope);
      call.k_pe = bufs.input(k_pe);
      call.k_pe_stride = kDr;
      call.v = bufs.input(v);
      GuardedBuffer& o = bufs.output<bf16_t>(static_cast<size_t>(tq) * H * kDv, kPoisonByte);
      GuardedBuffer& l = bufs.output<float>(static_cast<size_t>(tq) * H, kPoisonByte);
      call.out = o.as<bf16_t>();
      call.lse = l.as<float>();
      must(ctx.backend.dense_mha(dense_mha_params(call)));
      must(ctx.backend.synchronize());
      std::vector<uint16_t> got_o;
      std::vector<float> got_l;
      must(o.download(got_o));
      must(l.download(got_l));

      // Reference: q = [q_nope, q_pe], k = [k_nope, k_pe shared by heads], in double.
      std::vector<double> q(static_cast<size_t>(tq) * H * 192), k(static_cast<size_t>(tk) * H * 192);
      for (int64_t th = 0; th < tq * H; ++th)
        for (int i = 0; i < 192; ++i)
          q[th * 192 + i] = bf16_to_f32(i < kDn ? q_nope[th * kDn + i] : q_pe[th * kDr + i - kDn]);
      for (int64_t t = 0; t < tk; ++t)
        for (int32_t h = 0; h < H; ++h)
          for (int i = 0; i < 192; ++i)
            k[(t * H + h) * 192 + i] = bf16_to_f32(i < kDn ? k_nope[(t * H + h) * kDn + i] : k_pe[t * kDr + i - kDn]);
      const ref::AttentionResult ref_res =
          ref::dense_mha(q, k, widen_bf16(v), H, cu_q, cu_k, causal, ctx.scenario.model.scale);
      DumpSink* dump = ctx.hooks.dump;
      const int64_t R = static_cast<int64_t>(q_lens.size());
      dump_array(dump, "cu_q", DumpRole::kInput, "query rows' prefix sums per request", {R + 1}, cu_q);
      dump_array(dump, "cu_k", DumpRole::kInput, "key rows' prefix sums per request", {R + 1}, cu_k);
      dump_array(dump, "q_nope", DumpRole::kInput, "query NoPE part, bf16 bits", {tq, H, kDn}, q_nope);
      dump_array(dump, "q_pe", DumpRole::kInput, "rotary query, bf16 bits", {tq, H, kDr}, q_pe);
      dump_array(dump, "k_nope", DumpRole::kInput, "key NoPE part, bf16 bits", {tk, H, kDn}, k_nope);
      dump_array(dump, "k_pe", DumpRole::kInput, "rotary key shared by the heads, bf16 bits", {tk, kDr}, k_pe);
      dump_array(dump, "v", DumpRole::kInput, "values, bf16 bits", {tk, H, kDv}, v);
      dump_param(dump, "causal", causal ? 1 : 0);
      dump_param(dump, "scale", ctx.scenario.model.scale);
      dump_array(dump, "out", DumpRole::kOutput, "attention output, bf16 bits", {tq, H, kDv}, got_o);
      dump_array(dump, "lse", DumpRole::kOutput, "log-sum-exp of the scores", {tq, H}, got_l);
      dump_array(dump, "out", DumpRole::kReference, "the reference's output", {tq, H, kDv}, ref_res.out);
      dump_array(dump, "lse", DumpRole::kReference, "the reference's LSE", {tq, H}, ref_res.lse);
      CheckResult r;
      const AttentionTolerances& tol = ctx.scenario.attention.tolerances;
      r.metrics = compare_out_and_lse(ref_res.out, widen_bf16(got_o), tol.dense_mha, ref_res.lse, widen_f32(got_l),
                                      tol.dense_lse);
      bufs.audit(r.metrics);
      finalize(r);
      return r;
    }));
  }
  return out;
}

std::vector<CheckResult> run_forward_check(const AttentionCheckContext& ctx) {
  const ForwardConfig cfg = forward_config(ctx);
  ForwardResult got;
  bool step_done = false;  // got.cache is empty both when the step failed and for a pool of no page
  std::vector<CheckResult> out;
  out.push_back(hooked_check(ctx.hooks, "forward", "forward", [&] {
    BufferSet bufs(ctx.backend);
    got = run_forward(ctx.backend, bufs, ctx.batch, ctx.data, cfg);
    step_done = true;
    const ref::ForwardInputs in = reference_forward_inputs(ctx.scenario, ctx.batch, ctx.cache, ctx.data,
                                                           cfg.force_sparse, ref::NewTokenKv::kBf16,
                                                           reference_dequant(ctx.backend));
    const ref::ForwardOutputs want = ref::forward(in, ctx.cache.ref_cache);
    dump_forward_inputs(ctx);
    const int64_t T = ctx.batch.num_tokens, H = ctx.data.heads;
    dump_array(ctx.hooks.dump, "out", DumpRole::kOutput, "the step's output, bf16 bits", {T, H, kDv}, got.out);
    dump_array(ctx.hooks.dump, "out", DumpRole::kReference, "the reference step's output", {T, H, kDv}, want.out);
    CheckResult r;
    r.metrics = compare_tolerance(want.out, widen_bf16(got.out),
                                  with_merges(ctx.scenario.attention.tolerances.forward, got.context_chunks));
    bufs.audit(r.metrics);
    r.metrics.extra["num_decodes"] = got.num_decodes;
    r.metrics.extra["sparse_tokens"] = static_cast<double>(got.num_sparse_tokens);
    r.metrics.extra["prefills_dense"] = got.prefills_dense ? 1.0 : 0.0;
    r.metrics.extra["context_chunks"] = static_cast<double>(got.context_chunks);
    // The orchestration must agree with the reference's own split and routing rule.
    if (got.num_decodes != in.num_decodes)
      r.reason = "decode split disagrees with the reference: " + std::to_string(got.num_decodes) + " decodes, the rule says " +
                 std::to_string(in.num_decodes);
    else if (got.prefills_dense != want.prefills_dense)
      r.reason = std::string("routing disagrees with the reference: prefills went ") +
                 (got.prefills_dense ? "dense" : "sparse") + ", the rule says " + (want.prefills_dense ? "dense" : "sparse");
    finalize(r);
    if (!r.reason.empty() && r.verdict == Verdict::kPass) r.verdict = Verdict::kFail;
    return r;
  }));
  // A step the backend does not support (an adapter without one of its operations) leaves no cache
  // to judge: the cache check is skipped for the same reason, not reported as an error.
  if (out.front().verdict == Verdict::kSkip) {
    out.push_back(skipped_check("forward/cache", "forward", out.front().reason));
    return out;
  }
  // The cache after the step: context untouched, new tokens packed, unused slots and padding
  // still 0xFF — byte for byte the reference's.
  out.push_back(hooked_check(ctx.hooks, "forward/cache", "forward", [&] {
    if (!step_done) throw BackendError("the forward step did not complete; no cache to compare");
    const std::vector<int64_t> pages{ctx.batch.layout.num_blocks, ctx.batch.layout.page_stride_bytes};
    dump_array(ctx.hooks.dump, "cache", DumpRole::kOutput, "the pool after the step", pages, got.cache);
    dump_array(ctx.hooks.dump, "cache", DumpRole::kReference, "the reference's pool with every token packed", pages,
               ctx.cache.ref_cache);
    CheckResult r;
    r.metrics = compare_bytes_exact(ctx.cache.ref_cache, got.cache);
    finalize(r);
    return r;
  }));
  return out;
}

std::vector<CheckResult> run_equivalence_check(const AttentionCheckContext& ctx) {
  const Batch& b = ctx.batch;
  if (const std::string why = no_dense_route(b, ctx.data.topk); !why.empty())
    return {skipped_check("equivalence", "equivalence", why)};
  if (const std::string why = pinned_picks_differ_from_dense(ctx); !why.empty())
    return {skipped_check("equivalence", "equivalence", why)};
  // The comparison assumes both routes read the cache's values as §1.2 dequantizes them; a backend
  // that declares another rule for its sparse MQA (docs/semantics.md §4.1) reads other values there.
  if (ctx.backend.sparse_mqa_dequant() != SparseDequant::kF32Scale)
    return {skipped_check("equivalence", "equivalence",
                          "the backend's sparse_mqa declares its own dequantization (bf16_scale), the dense route's "
                          "gather §1.2's: the routes read different values")};
  // Prefill rows of the forced-sparse run against the dense run, two ways (docs/semantics.md §4.3).
  const int64_t first = b.num_decode_tokens;
  const int64_t width = int64_t{ctx.data.heads} * kDv;
  auto prefill_rows = [&](const std::vector<uint16_t>& v) {
    return widen_bf16(std::vector<uint16_t>(v.begin() + first * width, v.end()));
  };
  ForwardConfig sparse_cfg = forward_config(ctx);
  sparse_cfg.force_sparse = true;
  std::vector<uint16_t> sparse_out;
  int64_t sparse_routes_all = 0;
  std::vector<CheckResult> out;
  for (const bool from_cache : {true, false}) {
    const std::string id = from_cache ? "equivalence/new_tokens_from_cache" : "equivalence/new_tokens_bf16";
    out.push_back(hooked_check(ctx.hooks, id, "equivalence", [&] {
      BufferSet bufs(ctx.backend);
      if (sparse_out.empty()) {
        const ForwardResult sparse = run_forward(ctx.backend, bufs, b, ctx.data, sparse_cfg);
        sparse_out = sparse.out;
        sparse_routes_all = sparse.num_sparse_tokens;
      }
      ForwardConfig dense_cfg = forward_config(ctx);
      dense_cfg.force_sparse = false;
      dense_cfg.new_tokens_from_cache = from_cache;
      const ForwardResult dense = run_forward(ctx.backend, bufs, b, ctx.data, dense_cfg);
      const AttentionTolerances& tol = ctx.scenario.attention.tolerances;
      if (ctx.hooks.dump != nullptr) {
        dump_forward_inputs(ctx);
        const std::vector<int64_t> shape{b.num_tokens - first, ctx.data.heads, kDv};
        dump_array(ctx.hooks.dump, "out", DumpRole::kOutput, "the dense route's prefill rows, bf16 bits", shape,
                   std::vector<uint16_t>(dense.out.begin() + first * width, dense.out.end()));
        dump_array(ctx.hooks.dump, "out", DumpRole::kReference, "the forced-sparse route's prefill rows, bf16 bits",
                   shape, std::vector<uint16_t>(sparse_out.begin() + first * width, sparse_out.end()));
      }
      CheckResult r;
      r.metrics = compare_tolerance(prefill_rows(sparse_out), prefill_rows(dense.out),
                                    with_merges(from_cache ? tol.equivalence_from_cache : tol.equivalence_bf16,
                                                dense.context_chunks));
      bufs.audit(r.metrics);
      r.metrics.extra["context_chunks"] = static_cast<double>(dense.context_chunks);
      // Two routes or nothing: the dense run must have sent exactly the prefills dense, the
      // forced run every token sparse.
      if (!dense.prefills_dense || dense.num_sparse_tokens != b.num_decode_tokens)
        r.reason = "the dense run did not route the prefills dense (" + std::to_string(dense.num_sparse_tokens) +
                   " tokens went sparse, " + std::to_string(b.num_decode_tokens) + " decode tokens)";
      else if (sparse_routes_all != b.num_tokens)
        r.reason = "the forced-sparse run sent only " + std::to_string(sparse_routes_all) + " of " +
                   std::to_string(b.num_tokens) + " tokens sparse";
      finalize(r);
      if (!r.reason.empty() && r.verdict == Verdict::kPass) r.verdict = Verdict::kFail;
      return r;
    }));
  }
  return out;
}

DcpPartial dcp_rank_partial(const AttentionCheckContext& ctx, BufferSet& bufs, int32_t world, int32_t rank) {
  const Batch& b = ctx.batch;
  const int32_t H = ctx.data.heads, K = ctx.data.topk;
  const int64_t T = b.num_tokens;
  const LatentQuery q = latent_query(ctx.data, T);
  const DcpShard shard = build_dcp_shard(b, ctx.cache, world, rank, ctx.scenario.attention.dcp_interleave);
  // The backend converts this rank's indices and attends over its shard.
  ConvertParams c;
  c.req_id = bufs.input(b.req_id_per_token);
  c.num_tokens = T;
  c.indices = bufs.input(ctx.data.topk_pos);
  c.indices_rows = T;
  c.topk = K;
  c.indices_row_stride = K;
  set_block_table(shard.layout, bufs.input(shard.layout.block_table), c);
  c.block_size = b.layout.block_size;
  GuardedBuffer& local_slots = bufs.output<int32_t>(static_cast<size_t>(T) * K, kPoisonByte);
  c.out = local_slots.as<int32_t>();
  c.out_row_stride = K;
  c.dcp_world_size = world;
  c.dcp_rank = rank;
  c.dcp_interleave = ctx.scenario.attention.dcp_interleave;
  must(ctx.backend.convert(c));
  std::vector<int32_t> rank_slots;
  must(ctx.backend.synchronize());
  must(local_slots.download(rank_slots));
  SparseRun run = run_sparse_kernel(ctx.backend, bufs, q, T, H, rank_slots, K, shard.cache, shard.layout,
                                    static_cast<float>(ctx.scenario.model.scale), 264);
  DcpPartial p;
  p.out_lat = std::move(run.out_lat);
  p.lse = std::move(run.lse);
  return p;
}

DcpPartial simulate_dcp(const AttentionCheckContext& ctx, BufferSet& bufs, int32_t world) {
  const int64_t rows = ctx.batch.num_tokens * ctx.data.heads;
  std::vector<GuardedBuffer*> rank_out, rank_lse;  // each rank's (out, lse), merged below
  for (int32_t rank = 0; rank < world; ++rank) {
    const DcpPartial part = dcp_rank_partial(ctx, bufs, world, rank);
    rank_out.push_back(&bufs.in_out(part.out_lat));
    rank_lse.push_back(&bufs.in_out(part.lse));
  }
  std::vector<bf16_t*> outs;
  std::vector<float*> lses;
  for (size_t r = 0; r < rank_out.size(); ++r) {
    outs.push_back(rank_out[r]->as<bf16_t>());
    lses.push_back(rank_lse[r]->as<float>());
  }
  must(merge_dcp_partials(ctx.backend, outs, lses, rows));
  must(ctx.backend.synchronize());
  DcpPartial merged;
  must(rank_out.front()->download(merged.out_lat));
  must(rank_lse.front()->download(merged.lse));
  return merged;
}

CheckResult judge_dcp_result(const AttentionCheckContext& ctx, int32_t world, const DcpPartial& merged,
                             const BufferSet* audit) {
  const Batch& b = ctx.batch;
  const int32_t H = ctx.data.heads, K = ctx.data.topk, B = b.layout.block_size;
  const int64_t T = b.num_tokens;
  const LatentQuery q = latent_query(ctx.data, T);
  // Single rank: the reference over the whole cache.
  ref::ConvertInputs in;
  in.req_id = b.req_id_per_token;
  in.indices = ctx.data.topk_pos;
  in.topk = K;
  in.block_table = reference_block_table(b.layout);
  in.block_size = B;
  const ref::AttentionResult single =
      ref::sparse_mqa(q.both, H, ref::convert(in).out, K, ctx.cache.ref_cache, reference_geometry(b.layout),
                      ctx.scenario.model.scale, reference_dequant(ctx.backend));
  const AttentionTolerances& tol = ctx.scenario.attention.tolerances;
  DumpSink* dump = ctx.hooks.dump;
  dump_array(dump, "q_nope_lat", DumpRole::kInput, "absorbed query, bf16 bits", {T, H, kDc}, q.nope);
  dump_array(dump, "q_pe", DumpRole::kInput, "rotary query, bf16 bits", {T, H, kDr}, q.pe);
  dump_array(dump, "topk_positions", DumpRole::kInput, "request-local positions each token attends to", {T, K},
             ctx.data.topk_pos);
  dump_param(dump, "dcp_world_size", world);
  dump_param(dump, "dcp_interleave", ctx.scenario.attention.dcp_interleave);
  dump_array(dump, "out_lat", DumpRole::kOutput, "the ranks' results merged, bf16 bits", {T, H, kDc}, merged.out_lat);
  dump_array(dump, "lse", DumpRole::kOutput, "the merged LSE", {T, H}, merged.lse);
  dump_array(dump, "out_lat", DumpRole::kReference, "the reference over the whole cache on one rank", {T, H, kDc}, single.out);
  dump_array(dump, "lse", DumpRole::kReference, "the single rank's LSE", {T, H}, single.lse);
  CheckResult r;
  r.metrics = compare_out_and_lse(single.out, widen_bf16(merged.out_lat), tol.dcp, single.lse, widen_f32(merged.lse),
                                  tol.sparse_lse);
  if (audit != nullptr) audit->audit(r.metrics);
  r.metrics.extra["ranks"] = world;
  finalize(r);
  return r;
}

std::vector<CheckResult> run_dcp_check(const AttentionCheckContext& ctx) {
  const int32_t W = ctx.scenario.attention.dcp_world_size;
  return {hooked_check(ctx.hooks, "dcp/" + std::to_string(W) + "_ranks", "dcp", [&] {
    BufferSet bufs(ctx.backend);
    const DcpPartial merged = simulate_dcp(ctx, bufs, W);
    return judge_dcp_result(ctx, W, merged, &bufs);
  })};
}

std::vector<CheckResult> run_determinism_check(const AttentionCheckContext& ctx) {
  return {hooked_check(ctx.hooks, "determinism", "determinism", [&] {
    const ForwardConfig cfg = forward_config(ctx);
    BufferSet first_bufs(ctx.backend), second_bufs(ctx.backend);
    const ForwardResult a = run_forward(ctx.backend, first_bufs, ctx.batch, ctx.data, cfg);
    const ForwardResult b = run_forward(ctx.backend, second_bufs, ctx.batch, ctx.data, cfg);
    const int64_t T = ctx.batch.num_tokens, H = ctx.data.heads;
    dump_forward_inputs(ctx);
    dump_array(ctx.hooks.dump, "out", DumpRole::kOutput, "the second run's output, bf16 bits", {T, H, kDv}, b.out);
    dump_array(ctx.hooks.dump, "out", DumpRole::kReference, "the first run's output, bf16 bits", {T, H, kDv}, a.out);
    CheckResult r;
    r.metrics = compare_bf16_exact(a.out, b.out);
    first_bufs.audit(r.metrics);
    second_bufs.audit(r.metrics);
    // Two equal outputs prove nothing if nothing wrote them: every element must be finite and
    // not the poison.
    const uint16_t poison = static_cast<uint16_t>(kPoisonByte << 8 | kPoisonByte);
    const int64_t unwritten = std::count_if(a.out.begin(), a.out.end(), [&](uint16_t v) {
      return v == poison || !std::isfinite(bf16_to_f32(v));
    });
    r.metrics.extra["unwritten_or_nonfinite"] = static_cast<double>(unwritten);
    if (unwritten > 0) r.reason = std::to_string(unwritten) + " output elements unwritten (poison) or not finite";
    finalize(r);
    if (!r.reason.empty() && r.verdict == Verdict::kPass) r.verdict = Verdict::kFail;
    return r;
  })};
}

// The merge's edge rows (docs/semantics.md §4.2): every pair of LSEs where at least one side is
// -inf, +inf or NaN, the other finite or not. By the rule the result is exact: the side of weight
// one bit for bit and its LSE (m + ln 1), or out_a with -inf when neither side has weight. The
// side of weight zero carries ordinary values, NaN, +inf or the poison pattern in its out, which
// must not leak. Compared bit for bit against ref::merge_lse; once with a separate output (128
// wide) and once in place over out_a / lse_a (512 wide), as the forward step and dcp merge.
std::vector<CheckResult> run_merge_check(const AttentionCheckContext& ctx) {
  std::vector<CheckResult> out;
  for (const bool in_place : {false, true}) {
    const int32_t width = in_place ? kDc : kDv;
    const std::string id = "merge/width_" + std::to_string(width) + (in_place ? "_in_place" : "");
    out.push_back(hooked_check(ctx.hooks, id, "merge", [&] {
      enum Kind { kFinite, kMinusInf, kPlusInf, kNan };
      const float kinds_value[] = {0.0f, -INFINITY, INFINITY, NAN};
      const uint16_t zero_weight_out[] = {0, kBf16QuietNaN, 0x7F80, static_cast<uint16_t>(kPoisonByte << 8 | kPoisonByte)};
      constexpr int kRowsPerPair = 4;
      Rng rng = Rng(ctx.scenario.seed).fork(kStreamKernelInputs + 5 + (in_place ? 1 : 0));
      std::vector<uint16_t> out_a, out_b;
      std::vector<float> lse_a, lse_b;
      for (int ka = kFinite; ka <= kNan; ++ka)
        for (int kb = kFinite; kb <= kNan; ++kb) {
          if (ka == kFinite && kb == kFinite) continue;  // an ordinary merge: forward and dcp hold it to a tolerance
          for (int rep = 0; rep < kRowsPerPair; ++rep) {
            lse_a.push_back(ka == kFinite ? static_cast<float>(rng.uniform(-8.0, 8.0)) : kinds_value[ka]);
            lse_b.push_back(kb == kFinite ? static_cast<float>(rng.uniform(-8.0, 8.0)) : kinds_value[kb]);
            // A side without weight (non-finite LSE, or both sides without) carries the rep's junk.
            for (int side = 0; side < 2; ++side) {
              const bool weighted = (side == 0 ? ka : kb) == kFinite;
              std::vector<uint16_t>& o = side == 0 ? out_a : out_b;
              for (int32_t e = 0; e < width; ++e)
                o.push_back(weighted || rep == 0 ? f32_to_bf16_rne(static_cast<float>(rng.normal(0.0, 1.0)))
                                                 : zero_weight_out[rep]);
            }
          }
        }
      const int64_t rows = static_cast<int64_t>(lse_a.size());
      BufferSet bufs(ctx.backend);
      MergeParams m;
      GuardedBuffer& a_out = bufs.in_out(out_a);
      GuardedBuffer& a_lse = bufs.in_out(lse_a);
      m.out_a = a_out.as<bf16_t>();
      m.lse_a = a_lse.as<float>();
      m.out_b = bufs.input(out_b);
      m.lse_b = bufs.input(lse_b);
      GuardedBuffer& o = in_place ? a_out : bufs.output<bf16_t>(out_a.size(), kPoisonByte);
      GuardedBuffer& l = in_place ? a_lse : bufs.output<float>(lse_a.size(), kPoisonByte);
      m.out = o.as<bf16_t>();
      m.lse = l.as<float>();
      m.rows = rows;
      m.width = width;
      must(ctx.backend.merge(m));
      must(ctx.backend.synchronize());
      std::vector<uint16_t> got_out;
      std::vector<float> got_lse;
      must(o.download(got_out));
      must(l.download(got_lse));
      const ref::AttentionResult want =
          ref::merge_lse(widen_bf16(out_a), widen_f32(lse_a), widen_bf16(out_b), widen_f32(lse_b), width);
      DumpSink* dump = ctx.hooks.dump;
      dump_array(dump, "out_a", DumpRole::kInput, "first side's rows, bf16 bits", {rows, width}, out_a);
      dump_array(dump, "lse_a", DumpRole::kInput, "first side's LSE", {rows}, lse_a);
      dump_array(dump, "out_b", DumpRole::kInput, "second side's rows, bf16 bits", {rows, width}, out_b);
      dump_array(dump, "lse_b", DumpRole::kInput, "second side's LSE", {rows}, lse_b);
      dump_param(dump, "in_place", in_place ? 1 : 0);
      dump_array(dump, "out", DumpRole::kOutput, "merged rows, bf16 bits", {rows, width}, got_out);
      dump_array(dump, "lse", DumpRole::kOutput, "merged LSE", {rows}, got_lse);
      dump_array(dump, "out", DumpRole::kReference, "ref::merge_lse's rows", {rows, width}, want.out);
      dump_array(dump, "lse", DumpRole::kReference, "ref::merge_lse's LSE", {rows}, want.lse);
      CheckResult r;
      r.metrics = compare_bf16_exact(to_bf16(want.out), got_out);
      // The LSE is exact too (the weighted side's, or -inf): its fp32 bits are compared.
      std::vector<int32_t> want_lse_bits, got_lse_bits;
      for (double v : want.lse) want_lse_bits.push_back(float_bits(static_cast<float>(v)));
      for (float v : got_lse) got_lse_bits.push_back(float_bits(v));
      const Metrics lse = compare_int32_exact(want_lse_bits, got_lse_bits);
      r.metrics.extra["lse_mismatches"] = static_cast<double>(lse.mismatches);
      merge_into(r.metrics, lse);
      bufs.audit(r.metrics);
      r.metrics.extra["rows"] = static_cast<double>(rows);
      finalize(r);
      return r;
    }));
  }
  return out;
}

}  // namespace mla
