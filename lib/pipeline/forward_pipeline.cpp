#include "lib/pipeline/forward_pipeline.h"

#include <algorithm>
#include <numeric>

#include "lib/pipeline/attention_call.h"
#include "lib/pipeline/sparse_mqa_plan.h"

namespace mla {

namespace {

// C[h] = A[h] * op(W[h]) over the heads: the three projections of docs/semantics.md §4 are all of this shape.
void gemm_heads(Backend& be, const bf16_t* a, int64_t lda, int64_t stride_a, const bf16_t* w, bool transpose_w,
                bf16_t* c, int64_t ldc, int64_t stride_c, int64_t m, int64_t n, int64_t k, int32_t heads) {
  if (m == 0) return;
  GemmParams g;
  g.a = a;
  g.lda = lda;
  g.stride_a = stride_a;
  g.b = w;
  g.ldb = transpose_w ? k : n;
  g.stride_b = static_cast<int64_t>(kDn) * kDc;  // every weight is [128, 512] per head
  g.transpose_b = transpose_w;
  g.c = c;
  g.ldc = ldc;
  g.stride_c = stride_c;
  g.m = m;
  g.n = n;
  g.k = k;
  g.batch = heads;
  must(be.gemm(g));
}

// k_nope[n, H, 128] = rows[:, :512] W_UK[h]^T and v[n, H, 128] = rows[:, :512] W_UV[h]^T.
struct UpProjected {
  bf16_t* k_nope = nullptr;
  bf16_t* v = nullptr;
};
UpProjected up_project(Backend& be, BufferSet& bufs, const bf16_t* rows, int64_t row_stride, int64_t n, int32_t H,
                       const bf16_t* w_uk, const bf16_t* w_uv) {
  UpProjected u;
  const size_t elems = static_cast<size_t>(std::max<int64_t>(n, 1)) * H * kDn;
  u.k_nope = bufs.output<bf16_t>(elems, kPoisonByte).as<bf16_t>();
  u.v = bufs.output<bf16_t>(elems, kPoisonByte).as<bf16_t>();
  gemm_heads(be, rows, row_stride, 0, w_uk, true, u.k_nope, int64_t{H} * kDn, kDn, n, kDn, kDc, H);
  gemm_heads(be, rows, row_stride, 0, w_uv, true, u.v, int64_t{H} * kDv, kDv, n, kDv, kDc, H);
  return u;
}

struct DeviceInputs {
  bf16_t* q_nope;
  bf16_t* q_pe;
  bf16_t* new_kv_c;
  bf16_t* new_k_pe;
  bf16_t* w_uk;
  bf16_t* w_uv;
  int32_t* block_table;
  uint8_t* cache;
  bf16_t* out;  // [T, H, 128]
};

// Gathers, per prefill request, `lens[i]` cached positions starting at starts[i] into rows
// [sum lens, 576]. Requests are the prefills (block-table rows from first_req).
bf16_t* gather_rows(Backend& be, BufferSet& bufs, const Batch& b, const DeviceInputs& dev, int32_t first_req,
                    const std::vector<int32_t>& lens, const std::vector<int32_t>& starts) {
  const std::vector<int32_t> cu = prefix_sums(lens);
  const int64_t rows = cu.back();
  GatherParams g;
  g.cache = cache_view(b.layout, dev.cache);
  set_block_table(b.layout, dev.block_table + static_cast<int64_t>(first_req) * b.layout.block_table_stride, g);
  g.num_reqs = static_cast<int32_t>(lens.size());
  g.workspace_starts = bufs.input(std::vector<int32_t>(cu.begin(), cu.end() - 1));
  g.seq_starts = bufs.input(starts);
  g.num_rows = rows;
  g.dst_row_stride = kDl;
  g.dst = bufs.output<bf16_t>(static_cast<size_t>(std::max<int64_t>(rows, 1)) * kDl, kPoisonByte).as<bf16_t>();
  must(be.gather(g));
  return g.dst;
}

void dense_attention(Backend& be, BufferSet& bufs, const std::vector<int32_t>& q_lens, const std::vector<int32_t>& k_lens,
                     const bf16_t* q_nope, const bf16_t* q_pe, const UpProjected& kv, const bf16_t* k_pe,
                     int64_t k_pe_stride, int32_t H, bool causal, float scale, bf16_t* out, float* lse) {
  const std::vector<int32_t> cu_q = prefix_sums(q_lens), cu_k = prefix_sums(k_lens);
  DenseMhaCall call;
  call.heads = H;
  call.causal = causal;
  call.scale = scale;
  call.cu_q_host = &cu_q;
  call.cu_k_host = &cu_k;
  call.cu_q = bufs.input(cu_q);
  call.cu_k = bufs.input(cu_k);
  call.q_nope = q_nope;
  call.q_pe = q_pe;
  call.k_nope = kv.k_nope;
  call.k_pe = k_pe;
  call.k_pe_stride = k_pe_stride;
  call.v = kv.v;
  call.out = out;
  call.lse = lse;
  must(be.dense_mha(dense_mha_params(call)));
}

// Dense route for requests [nd, R): writes out rows of their tokens.
int64_t run_dense(Backend& be, BufferSet& bufs, const Batch& b, const AttentionData& d, const DeviceInputs& dev,
                  int32_t nd, const ForwardConfig& cfg) {
  const int32_t H = d.heads;
  const int64_t first_tok = std::accumulate(b.query_lens.begin(), b.query_lens.begin() + nd, int64_t{0});
  const std::vector<int32_t> q_lens(b.query_lens.begin() + nd, b.query_lens.end());
  const std::vector<int32_t> ctx_lens(b.context_lens.begin() + nd, b.context_lens.end());
  const int64_t tp = b.num_tokens - first_tok;
  if (tp == 0) return 0;
  const bf16_t* q_nope = dev.q_nope + first_tok * H * kDn;
  const bf16_t* q_pe = dev.q_pe + first_tok * H * kDr;
  bf16_t* out = dev.out + first_tok * H * kDv;
  float* lse = bufs.output<float>(static_cast<size_t>(tp) * H, kPoisonByte).as<float>();

  // New tokens, causal among themselves.
  const bf16_t* rows;
  int64_t row_stride;
  const bf16_t* k_pe;
  int64_t k_pe_stride;
  if (cfg.new_tokens_from_cache) {
    rows = gather_rows(be, bufs, b, dev, nd, q_lens, ctx_lens);
    row_stride = kDl;
    k_pe = rows + kDc;
    k_pe_stride = kDl;
  } else {
    rows = dev.new_kv_c + first_tok * kDc;
    row_stride = kDc;
    k_pe = dev.new_k_pe + first_tok * kDr;
    k_pe_stride = kDr;
  }
  const UpProjected kv_new = up_project(be, bufs, rows, row_stride, tp, H, dev.w_uk, dev.w_uv);
  dense_attention(be, bufs, q_lens, q_lens, q_nope, q_pe, kv_new, k_pe, k_pe_stride, H, true, cfg.scale, out, lse);

  // Cached context in chunks bounded by the workspace; chunk i starts at i * chunk for everyone.
  const int32_t max_ctx = ctx_lens.empty() ? 0 : *std::max_element(ctx_lens.begin(), ctx_lens.end());
  if (max_ctx == 0) return 0;
  const int32_t with_ctx = static_cast<int32_t>(std::count_if(ctx_lens.begin(), ctx_lens.end(), [](int32_t c) { return c > 0; }));
  int64_t chunk = cfg.workspace_rows > 0 ? std::max<int64_t>(1, cfg.workspace_rows / with_ctx) : max_ctx;
  if (chunk >= b.layout.block_size) chunk -= chunk % b.layout.block_size;
  int64_t chunks = 0;
  bf16_t* out_c = bufs.output<bf16_t>(static_cast<size_t>(tp) * H * kDv, kPoisonByte).as<bf16_t>();
  float* lse_c = bufs.output<float>(static_cast<size_t>(tp) * H, kPoisonByte).as<float>();
  // The chunks are the same as a scenario's chunked-context gather cases (lib/batch/batch.h).
  for (const ContextChunk& c : context_chunks(ctx_lens, chunk)) {
    const std::vector<int32_t> starts(c.lens.size(), static_cast<int32_t>(c.start));
    const bf16_t* ctx_rows = gather_rows(be, bufs, b, dev, nd, c.lens, starts);
    const UpProjected kv = up_project(be, bufs, ctx_rows, kDl, c.rows, H, dev.w_uk, dev.w_uv);
    dense_attention(be, bufs, q_lens, c.lens, q_nope, q_pe, kv, ctx_rows + kDc, kDl, H, false, cfg.scale, out_c, lse_c);
    must(be.merge(merge_in_place_params(out, lse, out_c, lse_c, tp * H, kDv)));
    ++chunks;
  }
  return chunks;
}

// Sparse route for tokens [0, ns): writes their out rows.
void run_sparse(Backend& be, BufferSet& bufs, const Batch& b, const AttentionData& d, const DeviceInputs& dev,
                int64_t ns, const ForwardConfig& cfg) {
  if (ns == 0) return;
  const int32_t H = d.heads, K = d.topk;
  const int64_t T = b.num_tokens;
  // Injected bugs size launches by the whole batch. Whatever the injection, the after-guard of
  // every per-token buffer covers all T tokens of the batch (the largest row count any input
  // implies), so a launch sized by the batch instead of the tokens passed ends in OOB, not in a
  // crash or a neighbour's corruption.
  const bool full_convert = cfg.injection == Injection::kUnboundedConvert && ns < T;
  const bool full_plan = cfg.injection == Injection::kFullBatchMetadata && ns < T;
  if ((full_convert || full_plan) && cfg.probe != nullptr) cfg.probe->applied();
  const int64_t convert_rows = full_convert ? T : ns;
  const int64_t plan_tokens = full_plan ? T : ns;
  auto guard_for = [&](size_t row_bytes) {
    return GuardedBuffer::kDefaultGuardBytes + static_cast<size_t>(T - ns) * row_bytes;
  };

  // Index conversion, req_id sliced to the rows of indices.
  const std::vector<int32_t> req_rows(b.req_id_per_token.begin(), b.req_id_per_token.begin() + (full_convert ? T : ns));
  const std::vector<int32_t> pos_rows(d.topk_pos.begin(), d.topk_pos.begin() + ns * K);
  ConvertParams c;
  c.req_id = bufs.input(req_rows);
  c.num_tokens = convert_rows;
  c.indices = bufs.input(pos_rows, guard_for(K * sizeof(int32_t)));
  c.indices_rows = convert_rows;
  c.topk = K;
  c.indices_row_stride = K;
  set_block_table(b.layout, dev.block_table, c);
  c.block_size = b.layout.block_size;
  c.out = bufs.output<int32_t>(static_cast<size_t>(ns) * K, kPoisonByte, guard_for(K * sizeof(int32_t))).as<int32_t>();
  c.out_row_stride = K;
  must(be.convert(c));

  // Absorption: q_nope_lat[t, h] = W_UK[h]^T q_nope[t, h].
  bf16_t* q_lat = bufs.output<bf16_t>(static_cast<size_t>(ns) * H * kDc, kPoisonByte,
                                      guard_for(size_t{2} * H * kDc)).as<bf16_t>();
  gemm_heads(be, dev.q_nope, int64_t{H} * kDn, kDn, dev.w_uk, false, q_lat, int64_t{H} * kDc, kDc, ns, kDc, kDn, H);

  // Scheduler metadata for exactly the tokens passed (failure mode 4 when injected).
  const SparseMqaPlan plan =
      cfg.plan_multiprocessors > 0
          ? plan_sparse_mqa_on_device(static_cast<int32_t>(plan_tokens), H, K, cfg.plan_multiprocessors)
          : plan_sparse_mqa(static_cast<int32_t>(plan_tokens), K, cfg.target_work_items);
  SparseMqaCall call;
  // The injected bug passes validation as the real one did: it states the planned count, which
  // the buffers (ns rows) do not have, and the launch then reads and writes past them.
  call.tokens = plan_tokens;
  call.heads = H;
  call.topk = K;
  call.scale = cfg.scale;
  call.q_nope_lat = q_lat;
  call.q_pe = dev.q_pe;
  call.indices = c.out;
  call.cache = cache_view(b.layout, dev.cache);
  call.out_lat = bufs.output<bf16_t>(static_cast<size_t>(ns) * H * kDc, kPoisonByte,
                                     guard_for(size_t{2} * H * kDc)).as<bf16_t>();
  call.lse = bufs.output<float>(static_cast<size_t>(ns) * H, kPoisonByte, guard_for(sizeof(float) * H)).as<float>();
  SparseMqaParams p = sparse_mqa_params(call);
  attach_plan(bufs, plan, p);
  must(be.sparse_mqa(p));

  // out[t, h] = W_UV[h] out_lat[t, h].
  gemm_heads(be, p.out_lat, int64_t{H} * kDc, kDc, dev.w_uv, true, dev.out, int64_t{H} * kDv, kDv, ns, kDv, kDc, H);
}

}  // namespace

int32_t count_decodes_nonuniform(const std::vector<int32_t>& query_lens, int32_t threshold) {
  int32_t n = 0;
  while (n < static_cast<int32_t>(query_lens.size()) && query_lens[static_cast<size_t>(n)] >= 1 &&
         query_lens[static_cast<size_t>(n)] <= threshold)
    ++n;
  return n;
}

bool prefills_fit_topk(const Batch& b, int32_t num_decodes, int32_t topk) {
  for (int32_t r = num_decodes; r < b.num_reqs; ++r)
    if (b.seq_lens[static_cast<size_t>(r)] > topk) return false;
  return true;
}

ForwardResult run_forward(Backend& be, BufferSet& bufs, const Batch& b, const AttentionData& d, const ForwardConfig& cfg) {
  ForwardResult res;
  const int32_t H = d.heads;
  const int64_t T = b.num_tokens;

  // 1. The split. Failure mode 7 (injected): routing takes the non-uniform rule while the sparse
  //    side keeps the uniform one, so the two disagree on where the prefills start.
  const int32_t nd = cfg.num_decodes >= 0 ? cfg.num_decodes : count_decodes(b.query_lens, cfg.decode_threshold);
  const int32_t nd_routing = cfg.injection == Injection::kSplitMismatch
                                 ? count_decodes_nonuniform(b.query_lens, cfg.decode_threshold)
                                 : nd;
  if (nd_routing != nd && cfg.probe != nullptr) cfg.probe->applied();
  const int64_t nd_tokens = std::accumulate(b.query_lens.begin(), b.query_lens.begin() + nd, int64_t{0});
  res.num_decodes = nd;

  DeviceInputs dev;
  dev.q_nope = bufs.input(d.q_nope);
  dev.q_pe = bufs.input(d.q_pe);
  dev.new_kv_c = bufs.input(d.new_kv_c);
  dev.new_k_pe = bufs.input(d.new_k_pe);
  dev.w_uk = bufs.input(d.w_uk);
  dev.w_uv = bufs.input(d.w_uv);
  dev.block_table = bufs.input(b.layout.block_table);
  GuardedBuffer& cache = bufs.in_out(d.context_cache);
  dev.cache = cache.as<uint8_t>();
  GuardedBuffer& out = bufs.output<bf16_t>(static_cast<size_t>(T) * H * kDv, kPoisonByte);
  dev.out = out.as<bf16_t>();

  // 2. The new tokens enter the cache before attention.
  PackParams pk;
  pk.kv_c = dev.new_kv_c;
  pk.k_pe = dev.new_k_pe;
  pk.slot_mapping = bufs.input(d.new_slots);
  pk.num_tokens = T;
  pk.cache = cache_view(b.layout, dev.cache);
  must(be.pack(pk));

  // 3. Routing, 4. dense prefills, 5. sparse for the rest.
  // (Vacuously dense when the batch has no prefill, as the rule reads; nothing runs dense then.)
  res.prefills_dense = !cfg.force_sparse && prefills_fit_topk(b, nd_routing, d.topk);
  res.num_sparse_tokens = res.prefills_dense ? nd_tokens : T;
  if (res.prefills_dense) res.context_chunks = run_dense(be, bufs, b, d, dev, nd_routing, cfg);
  run_sparse(be, bufs, b, d, dev, res.num_sparse_tokens, cfg);
  must(be.synchronize());
  must(out.download(res.out));
  must(cache.download(res.cache));
  return res;
}

}  // namespace mla
