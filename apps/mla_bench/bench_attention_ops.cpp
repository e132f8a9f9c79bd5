#include "apps/mla_bench/bench_attention_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include <benchmark/benchmark.h>

#include "apps/mla_bench/bench_inputs.h"
#include "apps/mla_bench/bench_common.h"
#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "lib/batch/attention_data.h"
#include "lib/batch/batch.h"
#include "lib/checks/buffer_set.h"
#include "lib/checks/check_context.h"
#include "lib/pipeline/forward_pipeline.h"
#include "lib/backends/forwarding_backend.h"
#include "lib/batch/rng.h"
#include "lib/scenario/scenario.h"
#include "lib/pipeline/sparse_mqa_plan.h"
#include "lib/batch/topk_indices.h"

namespace mla::bench {
namespace {

// Streams of the sweep seed (fixed numbers, distinct from the cache benchmarks' 1..4).
constexpr uint64_t kStreamSparse = 11;
constexpr uint64_t kStreamDense = 12;
constexpr uint64_t kStreamGemm = 13;
constexpr uint64_t kStreamEntryPool = 14;
constexpr int64_t kEntryPoolRows = 16384;  // distinct packed cache entries, reused cyclically

constexpr int kGemmWarmup = 2;
constexpr int kGemmSamplesDevice = 9;
constexpr int kGemmSamplesHost = 5;

// Outputs above this magnitude are unwritten (the forward pipeline's poison is ~1.5e16) or wrong.
constexpr float kMaxSaneOutput = 1e6f;

const float kScale = static_cast<float>(1.0 / std::sqrt(192.0));

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Uniform in [-amplitude, amplitude), 16 random bits per value (four values per draw).
void fill_uniform_bf16(std::vector<bf16_t>& v, Rng& rng, float amplitude) {
  for (size_t i = 0; i < v.size(); i += 4) {
    const uint64_t u = rng.next_u64();
    for (size_t j = 0; j < 4 && i + j < v.size(); ++j) {
      const float x = static_cast<float>((u >> (16 * j)) & 0xFFFF) * (1.0f / 32768.0f) - 1.0f;
      v[i + j] = f32_to_bf16_rne(x * amplitude);
    }
  }
}


// Host view of results: bf16 values all finite and below kMaxSaneOutput in magnitude.
bool bf16_sane(const std::vector<bf16_t>& v, size_t* bad_index) {
  for (size_t i = 0; i < v.size(); ++i) {
    const float x = bf16_to_f32(v[i]);
    if (!std::isfinite(x) || std::fabs(x) > kMaxSaneOutput) {
      *bad_index = i;
      return false;
    }
  }
  return true;
}

std::string gflop(double flops) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", flops / 1e9);
  return buf;
}

// Distinct slots in [0, num_slots) among `count` indices.
int64_t count_unique_slots(const int32_t* idx, int64_t count, int64_t num_slots) {
  std::vector<uint64_t> seen(static_cast<size_t>((num_slots + 63) / 64), 0);
  int64_t unique = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t s = idx[i];
    if (s < 0 || s >= num_slots) continue;
    uint64_t& word = seen[static_cast<size_t>(s / 64)];
    const uint64_t bit = uint64_t{1} << (s % 64);
    if (!(word & bit)) {
      word |= bit;
      ++unique;
    }
  }
  return unique;
}

// --- Cost of one backend call (the models of bench_attention_ops.h) ---------------------------

enum class FlopKind { kNone, kGemm, kSparse, kDense };

struct Cost {
  double flops = 0.0;
  double bytes = 0.0;
  FlopKind kind = FlopKind::kNone;
};

Cost gemm_cost(const GemmParams& p) {
  const double batch = p.batch;
  const double a = static_cast<double>(p.m) * p.k * (p.stride_a ? batch : 1.0);
  const double b = static_cast<double>(p.k) * p.n * (p.stride_b ? batch : 1.0);
  const double c = static_cast<double>(p.m) * p.n * batch;
  return {2.0 * p.m * p.n * p.k * batch, 2.0 * (a + b + c), FlopKind::kGemm};
}

Cost sparse_cost(int64_t tokens, int32_t heads, int32_t topk, int64_t unique_slots) {
  const AttentionCost c = sparse_mqa_cost(tokens, heads, topk, unique_slots);
  return {c.flops, c.bytes, FlopKind::kSparse};
}

Cost dense_cost(const int32_t* cu_q, const int32_t* cu_k, int32_t num_reqs, int32_t heads, bool causal) {
  const AttentionCost c = dense_mha_cost(cu_q, cu_k, num_reqs, heads, causal);
  return {c.flops, c.bytes, FlopKind::kDense};
}

// --- The recording backend (forward) -----------------------------------------------------------

// Forwards every call to `inner`; while recording, keeps each kernel launch (params copied, host
// arrays they point to copied too) with its cost, so that the step can be replayed without the
// allocations and copies around it.
class RecordingBackend final : public ForwardingBackend {
 public:
  struct Launch {
    const char* op;
    std::function<Status(Backend&)> run;
    Cost cost;
  };

  explicit RecordingBackend(Backend& inner) : ForwardingBackend(inner) {}

  Status pack(const PackParams& p) override {
    return call_and_record("pack", p, {0.0, static_cast<double>(p.num_tokens) * kPackBytesPerToken, FlopKind::kNone},
                   [](Backend& b, const PackParams& q) { return b.pack(q); });
  }
  Status gather(const GatherParams& p) override {
    return call_and_record("gather", p, {0.0, static_cast<double>(p.num_rows) * kGatherBytesPerRow, FlopKind::kNone},
                   [](Backend& b, const GatherParams& q) { return b.gather(q); });
  }
  Status convert(const ConvertParams& p) override {
    const double bytes = static_cast<double>(p.num_tokens) * p.topk * kConvertBytesPerElement +
                         static_cast<double>(p.num_tokens) * kConvertBytesPerRow;
    return call_and_record("convert", p, {0.0, bytes, FlopKind::kNone},
                   [](Backend& b, const ConvertParams& q) { return b.convert(q); });
  }
  Status gemm(const GemmParams& p) override {
    return call_and_record("gemm", p, gemm_cost(p), [](Backend& b, const GemmParams& q) { return b.gemm(q); });
  }
  Status sparse_mqa(const SparseMqaParams& p) override {
    // The converted indices are on the backend (written by the convert before): read them back
    // once to count the distinct cache entries the launch reads.
    int64_t unique = 0;
    if (recording_ && p.num_tokens > 0) {
      std::vector<int32_t> idx(static_cast<size_t>(p.num_tokens * p.indices_row_stride));
      MLA_RETURN_IF_ERROR(inner().copy_to_host(idx.data(), p.indices, idx.size() * sizeof(int32_t)));
      std::vector<int32_t> used;
      used.reserve(static_cast<size_t>(p.num_tokens) * p.topk);
      for (int64_t t = 0; t < p.num_tokens; ++t) {
        const int32_t* row = &idx[static_cast<size_t>(t * p.indices_row_stride)];
        used.insert(used.end(), row, row + p.topk);
      }
      unique = count_unique_slots(used.data(), static_cast<int64_t>(used.size()), p.cache.num_slots());
    }
    return call_and_record("sparse_mqa", p, sparse_cost(p.num_tokens, p.num_heads, p.topk, unique),
                   [](Backend& b, const SparseMqaParams& q) { return b.sparse_mqa(q); });
  }
  Status dense_mha(const DenseMhaParams& p) override {
    if (!recording_) return inner().dense_mha(p);
    MLA_RETURN_IF_ERROR(p.validate());  // the host arrays are read below
    // The host copies of cu_seqlens live in the caller's frame: keep our own.
    auto cu_q = std::make_shared<std::vector<int32_t>>(p.cu_seqlens_q_host, p.cu_seqlens_q_host + p.num_reqs + 1);
    auto cu_k = std::make_shared<std::vector<int32_t>>(p.cu_seqlens_k_host, p.cu_seqlens_k_host + p.num_reqs + 1);
    DenseMhaParams copy = p;
    copy.cu_seqlens_q_host = cu_q->data();
    copy.cu_seqlens_k_host = cu_k->data();
    const Cost cost = dense_cost(cu_q->data(), cu_k->data(), p.num_reqs, p.num_heads, p.causal);
    MLA_RETURN_IF_ERROR(inner().dense_mha(copy));
    launches_.push_back({"dense_mha", [copy, cu_q, cu_k](Backend& b) { return b.dense_mha(copy); }, cost});
    return Status();
  }
  Status merge(const MergeParams& p) override {
    const double bytes = static_cast<double>(p.rows) * (6.0 * p.width + 12.0);
    return call_and_record("merge", p, {0.0, bytes, FlopKind::kNone},
                   [](Backend& b, const MergeParams& q) { return b.merge(q); });
  }

  void stop_recording() { recording_ = false; }
  const std::vector<Launch>& launches() const { return launches_; }

  // Every recorded launch, in order, on the real backend.
  Status replay() {
    for (const Launch& l : launches_) MLA_RETURN_IF_ERROR(l.run(inner()));
    return Status();
  }

 private:
  template <typename P, typename F>
  Status call_and_record(const char* op, const P& p, const Cost& cost, F call) {
    MLA_RETURN_IF_ERROR(call(inner(), p));
    if (recording_) launches_.push_back({op, [p, call](Backend& b) { return call(b, p); }, cost});
    return Status();
  }

  bool recording_ = true;
  std::vector<Launch> launches_;
};

// --- Prepared inputs -----------------------------------------------------------------------------

// The inputs of one benchmark on the backend, the call that runs it, and its models.
class Prepared {
 public:
  virtual ~Prepared() = default;
  virtual Status run(Backend& backend) = 0;
  double flops = 0.0;
  int64_t bytes = 0;
  int64_t items = 0;  // query tokens
  std::string label;
  std::vector<std::pair<std::string, double>> constants;  // extra per-shape counters
};

class PreparedSparse final : public Prepared {
 public:
  DeviceBuffer q, indices, cache, out_lat, lse;  // q [T, H, 576]
  std::unique_ptr<BufferSet> plan_buffers;  // the work partition (attach_plan)
  SparseMqaParams params;
  Status run(Backend& backend) override { return backend.sparse_mqa(params); }
};

class PreparedDense final : public Prepared {
 public:
  DeviceBuffer q_nope, q_pe, k_nope, k_pe, v, cu_q, cu_k, out, lse;
  std::vector<int32_t> cu_q_host, cu_k_host;
  DenseMhaParams params;
  Status run(Backend& backend) override { return backend.dense_mha(params); }
};

class PreparedForward final : public Prepared {
 public:
  std::unique_ptr<RecordingBackend> recorder;  // declared before bufs: outlives it
  std::unique_ptr<BufferSet> bufs;
  Status run(Backend&) override { return recorder->replay(); }
};

struct AttentionState {
  BenchEnv* env = nullptr;
  const GemmCeiling* gemm = nullptr;
  PreparedCache<Prepared> prepared;
  std::vector<uint8_t> entry_pool;  // [kEntryPoolRows, 656], packed by the backend
  int runtime_errors = 0;
  bool released_cache_state = false;
};

AttentionState& state() {
  static AttentionState s;
  return s;
}

const std::vector<uint8_t>& entry_pool(Backend& b) {
  AttentionState& s = state();
  if (s.entry_pool.empty()) {
    Rng rng = Rng(s.env->sweep.seed).fork(kStreamEntryPool);
    const Status st = pack_input_entries(b, s.env->harness, make_latent_rows(kEntryPoolRows, rng), &s.entry_pool);
    if (!st.ok()) throw std::runtime_error("packing the cache entry pool: " + st.message());
  }
  return s.entry_pool;
}

Status prepare_sparse(Backend& b, const SparseMqaShape& sh, std::unique_ptr<Prepared>* out) {
  AttentionState& s = state();
  const int32_t B = s.env->sweep.sparse_block_size;
  const int32_t H = sh.heads, K = sh.topk;
  const int64_t T = int64_t{sh.batch} * sh.query_tokens;
  Rng rng = sparse_mqa_rng(s.env->sweep.seed, sh);
  auto p = std::make_unique<PreparedSparse>();
  const SparseMqaIndices picked = make_sparse_mqa_indices(sh, B, rng);
  const PagedLayout& layout = picked.layout;
  const std::vector<int32_t>& slots = picked.slots;
  const int64_t page_stride = int64_t{B} * DsMlaEntry::kBytes;
  // The cache: every slot some token reads holds a packed entry; every other byte is 0xFF (NaN in
  // every field), so a stray read shows in the output check below.
  const std::vector<uint8_t>& pool = entry_pool(b);
  const size_t pool_entries = pool.size() / DsMlaEntry::kBytes;
  const int64_t unique = picked.distinct;
  {
    std::vector<uint8_t> cache(static_cast<size_t>(layout.num_blocks * page_stride), kUnusedByte);
    for (int32_t slot : slots) {
      if (slot < 0) continue;
      uint8_t* dst = &cache[static_cast<size_t>((slot / B) * page_stride + (slot % B) * DsMlaEntry::kBytes)];
      std::memcpy(dst, &pool[(static_cast<size_t>(slot) % pool_entries) * DsMlaEntry::kBytes], DsMlaEntry::kBytes);
    }
    check_alloc(p->cache.upload(b, cache));
  }
  {
    // The absorbed query as engines hold it, [T, H, 576] (the NoPE part, then the RoPE part of
    // each head): the params' two parts are views of it, so an adapter gets it without a copy.
    std::vector<bf16_t> nope(static_cast<size_t>(T * H * kDc)), rope(static_cast<size_t>(T * H * kDr));
    fill_uniform_bf16(nope, rng, 1.0f);
    fill_uniform_bf16(rope, rng, 1.0f);
    std::vector<bf16_t> q(static_cast<size_t>(T * H * kDl));
    for (int64_t th = 0; th < T * H; ++th) {
      std::copy_n(&nope[static_cast<size_t>(th * kDc)], kDc, &q[static_cast<size_t>(th * kDl)]);
      std::copy_n(&rope[static_cast<size_t>(th * kDr)], kDr, &q[static_cast<size_t>(th * kDl + kDc)]);
    }
    check_alloc(p->q.upload(b, q));
  }
  check_alloc(p->indices.upload(b, slots));
  check_alloc(p->out_lat.allocate(b, static_cast<size_t>(T * H * DsMlaEntry::kNopeDims) * sizeof(bf16_t)));
  check_alloc(p->lse.allocate(b, static_cast<size_t>(T * H) * sizeof(float)));

  SparseMqaParams& m = p->params;
  m = packed_sparse_mqa_params(p->q.as<bf16_t>(), T, H, p->indices.as<int32_t>(), K,
                               {p->cache.as<uint8_t>(), layout.num_blocks, B, page_stride}, p->out_lat.as<bf16_t>(),
                               p->lse.as<float>());
  // A forced split count asks the plan for that many items per token (it clamps to the column blocks).
  const SparseMqaPlan plan = sh.splits > 0
                                ? plan_sparse_mqa(static_cast<int32_t>(T), K, static_cast<int32_t>(T) * sh.splits)
                                : plan_sparse_mqa_on_device(static_cast<int32_t>(T), H, K, plan_multiprocessors(b));
  p->plan_buffers = std::make_unique<BufferSet>(b);
  try {
    attach_plan(*p->plan_buffers, plan, m);
  } catch (const BackendError& e) {
    throw CapacityError{std::string("work partition: ") + e.what()};
  }

  const AttentionCost cost = sparse_mqa_cost(T, H, K, unique);
  p->flops = cost.flops;
  p->bytes = static_cast<int64_t>(cost.bytes);
  p->items = T;
  char frac[32];
  std::snprintf(frac, sizeof frac, "%.3f", static_cast<double>(unique) / static_cast<double>(T * K));
  p->label = "FLOP=2*H*K*1088/token; bytes=656*" + std::to_string(unique) + " distinct entries (" + frac +
             " of T*K) + (1152+1028)*H/token; " + std::to_string(plan.items.size()) + " work items (" +
             std::to_string(plan.items.size() / static_cast<size_t>(std::max<int64_t>(T, 1))) + " per token, " +
             (sh.splits > 0 ? "forced" : "the plan's choice") + ")";
  *out = std::move(p);
  return Status();
}

Status prepare_dense(Backend& b, const DenseMhaShape& sh, std::unique_ptr<Prepared>* out) {
  AttentionState& s = state();
  const int32_t H = sh.heads;
  const int64_t N = sh.tokens;
  DenseMhaSeqlens seqlens = dense_mha_seqlens(sh);
  const int64_t nk = seqlens.cu_k.back();
  Rng rng = Rng(s.env->sweep.seed)
                .fork(kStreamDense)
                .fork(static_cast<uint64_t>(N) * 1000003u + static_cast<uint64_t>(H) * 101u +
                      static_cast<uint64_t>(sh.requests));
  // Self-attention keeps the stream it always had (same inputs as before the key count was a
  // parameter); an explicit key count gets its own.
  if (sh.keys_per_request > 0) rng = rng.fork(static_cast<uint64_t>(sh.keys_per_request));
  auto p = std::make_unique<PreparedDense>();
  // Queries uniform in [-1, 1]; keys and values in [-0.4, 0.4] (the spread of up-projected
  // N(0, 0.1^2) latents by N(0, 0.1^2) weights). q [N, H, 192], k [nk, H, 192] (k_pe shared by
  // the heads), v [nk, H, 128]: with self-attention (N == nk) drawn in the same order as always.
  {
    std::vector<bf16_t> x(static_cast<size_t>(N * H * kDn));
    fill_uniform_bf16(x, rng, 1.0f);
    check_alloc(p->q_nope.upload(b, x));
    x.assign(static_cast<size_t>(nk * H * kDn), 0);
    fill_uniform_bf16(x, rng, 0.4f);
    check_alloc(p->k_nope.upload(b, x));
    fill_uniform_bf16(x, rng, 0.4f);
    check_alloc(p->v.upload(b, x));
    x.assign(static_cast<size_t>(N * H * kDr), 0);
    fill_uniform_bf16(x, rng, 1.0f);
    check_alloc(p->q_pe.upload(b, x));
    x.assign(static_cast<size_t>(nk * kDr), 0);
    fill_uniform_bf16(x, rng, 0.4f);
    check_alloc(p->k_pe.upload(b, x));
  }
  p->cu_q_host = std::move(seqlens.cu_q);
  p->cu_k_host = std::move(seqlens.cu_k);
  check_alloc(p->cu_q.upload(b, p->cu_q_host));
  check_alloc(p->cu_k.upload(b, p->cu_k_host));
  check_alloc(p->out.allocate(b, static_cast<size_t>(N * H * kDv) * sizeof(bf16_t)));
  check_alloc(p->lse.allocate(b, static_cast<size_t>(N * H) * sizeof(float)));

  DenseMhaParams& d = p->params;
  d.q_nope = p->q_nope.as<bf16_t>();
  d.q_nope_stride = int64_t{H} * kDn;
  d.q_pe = p->q_pe.as<bf16_t>();
  d.q_pe_stride = int64_t{H} * kDr;
  d.k_nope = p->k_nope.as<bf16_t>();
  d.k_nope_stride = int64_t{H} * kDn;
  d.k_pe = p->k_pe.as<bf16_t>();
  d.k_pe_stride = kDr;
  d.v = p->v.as<bf16_t>();
  d.v_stride = int64_t{H} * kDv;
  d.cu_seqlens_q = p->cu_q.as<int32_t>();
  d.cu_seqlens_k = p->cu_k.as<int32_t>();
  d.cu_seqlens_q_host = p->cu_q_host.data();
  d.cu_seqlens_k_host = p->cu_k_host.data();
  d.num_reqs = sh.requests;
  d.num_heads = H;
  d.total_q = N;
  d.total_k = nk;
  d.causal = sh.causal;
  d.scale = kScale;
  d.out = p->out.as<bf16_t>();
  d.lse = p->lse.as<float>();

  const AttentionCost cost = dense_mha_cost(p->cu_q_host.data(), p->cu_k_host.data(), sh.requests, H, sh.causal);
  p->flops = cost.flops;
  p->bytes = static_cast<int64_t>(cost.bytes);
  p->items = N;
  p->label = std::string(sh.causal ? "causal" : "unmasked");
  if (sh.keys_per_request > 0) {
    p->label += (sh.causal ? " bottom-right, " : ", ") + std::to_string(sh.keys_per_request) + " keys/request";
  }
  p->label += "; FLOP=2*H*320/pair, " + std::to_string(static_cast<int64_t>(cost.flops / (2.0 * H * 320))) +
              " pairs; bytes=(640+4)*H/query + 512*H+128/key";
  *out = std::move(p);
  return Status();
}

Status prepare_forward(Backend& b, const ForwardBatch& fb, int32_t block_size, std::unique_ptr<Prepared>* out) {
  AttentionState& s = state();
  Scenario sc;
  sc.name = "mla-bench forward " + fb.name;
  sc.seed = s.env->sweep.seed;
  sc.model.heads = fb.heads;
  sc.model.topk = fb.topk;
  sc.model.block_size = block_size;
  sc.batch.seq_lens = fb.seq_lens;
  sc.batch.query_lens = fb.query_lens;
  sc.batch.decode_threshold = fb.decode_threshold;
  sc.checks = {CheckKind::kForward};
  if (auto e = validate_scenario(sc)) return Status::error("forward batch " + fb.name + ": " + e->to_string());
  const Batch batch = materialise(sc);
  ForwardResult result;
  auto p = std::make_unique<PreparedForward>();
  p->recorder = std::make_unique<RecordingBackend>(b);
  {
    const AttentionData data = [&] {
      const CacheData cache = make_cache_data(sc, batch, /*large_tiles=*/false);
      return make_attention_data(sc, batch, cache);
    }();
    ForwardConfig cfg;
    cfg.decode_threshold = fb.decode_threshold;
    cfg.force_sparse = fb.force_sparse;
    cfg.scale = static_cast<float>(sc.model.scale);
    cfg.plan_multiprocessors = plan_multiprocessors(b);
    p->bufs = std::make_unique<BufferSet>(*p->recorder);
    try {
      result = run_forward(*p->recorder, *p->bufs, batch, data, cfg);
    } catch (const UnsupportedError& e) {
      return Status::unsupported(e.what());  // an operation of the step the backend lacks: a skip
    } catch (const BackendError& e) {
      const std::string what = e.what();
      if (what.find("alloc") != std::string::npos) throw CapacityError{what};
      return Status::error("run_forward: " + what);
    }
  }
  p->recorder->stop_recording();
  size_t bad = 0;
  if (!bf16_sane(result.out, &bad)) {
    return Status::error("run_forward: output element " + std::to_string(bad) + " is " +
                         std::to_string(bf16_to_f32(result.out[bad])) + " (not finite, or unwritten poison)");
  }

  ForwardFlops launched;
  double bytes = 0.0;
  for (const auto& l : p->recorder->launches()) {
    bytes += l.cost.bytes;
    switch (l.cost.kind) {
      case FlopKind::kGemm: launched.gemm += l.cost.flops; break;
      case FlopKind::kSparse: launched.sparse_attention += l.cost.flops; break;
      case FlopKind::kDense: launched.dense_attention += l.cost.flops; break;
      case FlopKind::kNone: break;
    }
  }
  const ForwardFlops model = forward_flops_model(fb);
  p->flops = launched.total();
  p->bytes = static_cast<int64_t>(bytes);
  p->items = batch.num_tokens;
  const int64_t dense_tokens = batch.num_tokens - result.num_sparse_tokens;
  p->label = std::to_string(result.num_sparse_tokens) + " sparse + " + std::to_string(dense_tokens) + " dense tok";
  if (result.prefills_dense && dense_tokens > 0) {
    p->label += " (context chunks: " + std::to_string(result.context_chunks) + ")";
  }
  p->label += "; GFLOP sparse " + gflop(launched.sparse_attention) + " dense " + gflop(launched.dense_attention) +
              " gemm " + gflop(launched.gemm) + "; " + std::to_string(p->recorder->launches().size()) + " launches";
  if (std::fabs(model.total() - launched.total()) > 1e-9 * std::max(1.0, model.total())) {
    p->label += "; NOTE launched FLOPs differ from the model (" + gflop(model.total()) + " GFLOP)";
  }
  p->constants = {{"launches", static_cast<double>(p->recorder->launches().size())},
                  {"gemm_flop_share", launched.total() > 0 ? launched.gemm / launched.total() : 0.0}};
  *out = std::move(p);
  return Status();
}

// Checks the outputs of the untimed first run: finite everywhere (unused cache bytes are NaN, so
// a read of a slot nobody selected shows here). The forward run checks its own output.
Status check_outputs(Backend& b, Prepared& prepared) {
  const DeviceBuffer* out = nullptr;
  const DeviceBuffer* lse = nullptr;
  if (auto* sp = dynamic_cast<PreparedSparse*>(&prepared)) {
    out = &sp->out_lat;
    lse = &sp->lse;
  } else if (auto* dn = dynamic_cast<PreparedDense*>(&prepared)) {
    out = &dn->out;
    lse = &dn->lse;
  } else {
    return Status();
  }
  (void)b;
  std::vector<bf16_t> o;
  MLA_RETURN_IF_ERROR(out->download(&o));
  size_t bad = 0;
  if (!bf16_sane(o, &bad)) {
    return Status::error("output element " + std::to_string(bad) + " is " + std::to_string(bf16_to_f32(o[bad])) +
                         " (not finite or out of range: a stray read or an unwritten output)");
  }
  std::vector<float> l;
  MLA_RETURN_IF_ERROR(lse->download(&l));
  for (size_t i = 0; i < l.size(); ++i) {
    if (!std::isfinite(l[i])) return Status::error("lse element " + std::to_string(i) + " is not finite");
  }
  return Status();
}

Prepared* prepare(benchmark::State& st, const AttentionShape& shape) {
  AttentionState& s = state();
  if (!s.released_cache_state) {
    release_benchmark_state();  // the last cache-path benchmark's inputs
    s.released_cache_state = true;
  }
  Backend& b = *s.env->backend;
  return s.prepared.get(
      st, &s.runtime_errors, shape.name(),
      [&](std::unique_ptr<Prepared>* p) -> Status {
        switch (shape.op) {
          case AttentionOp::kSparse: return prepare_sparse(b, shape.sparse, p);
          case AttentionOp::kDense: return prepare_dense(b, shape.dense, p);
          case AttentionOp::kForward: return prepare_forward(b, shape.forward, s.env->sweep.forward_block_size, p);
          case AttentionOp::kRoute: return prepare_forward(b, shape.route.batch, s.env->sweep.routes_block_size, p);
        }
        return Status::error("unknown operation");
      },
      [&](Prepared& p) {
        Status status = p.run(b);  // warm-up (the forward: its first replay)
        if (status.ok()) status = b.synchronize();
        if (status.ok()) status = check_outputs(b, p);
        return status;
      });
}

void run_benchmark(benchmark::State& st, const AttentionShape& shape) {
  AttentionState& s = state();
  BenchEnv& env = *s.env;
  Prepared* prepared = prepare(st, shape);
  if (prepared == nullptr) return;
  const double timed = time_and_count(st, env, [&](Backend& b) { return prepared->run(b); }, &s.runtime_errors,
                                      prepared->bytes, prepared->items, prepared->label);
  if (st.error_occurred()) return;
  const auto iters = static_cast<int64_t>(st.iterations());
  if (timed <= 0.0) return;
  const double per_call = timed / static_cast<double>(iters);
  const double flops_per_second = prepared->flops / per_call;
  const double bytes_per_second = static_cast<double>(prepared->bytes) / per_call;
  st.counters["flops_per_second"] = benchmark::Counter(flops_per_second);
  st.counters["flop_per_byte"] = benchmark::Counter(prepared->flops / std::max<double>(1.0, prepared->bytes));
  double floor_seconds = 0.0;
  if (s.gemm != nullptr && s.gemm->flops_per_second > 0.0) {
    st.counters["pct_of_gemm_rate"] = benchmark::Counter(100.0 * flops_per_second / s.gemm->flops_per_second);
    floor_seconds = prepared->flops / s.gemm->flops_per_second;
  }
  if (env.roofline.copy_bytes_per_second > 0.0) {
    st.counters["pct_of_copy_bw"] = benchmark::Counter(100.0 * bytes_per_second / env.roofline.copy_bytes_per_second);
    floor_seconds = std::max(floor_seconds, static_cast<double>(prepared->bytes) / env.roofline.copy_bytes_per_second);
  }
  if (floor_seconds > 0.0) st.counters["pct_of_roofline"] = benchmark::Counter(100.0 * floor_seconds / per_call);
  for (const auto& [name, value] : prepared->constants) st.counters[name] = benchmark::Counter(value);
}

}  // namespace

int64_t causal_pairs(int64_t nq, int64_t nk) {
  // Query i sees min(nk, max(0, i + nk - nq + 1)) keys.
  int64_t pairs = 0;
  for (int64_t i = 0; i < nq; ++i) pairs += std::clamp<int64_t>(i + nk - nq + 1, 0, nk);
  return pairs;
}

std::vector<int64_t> equal_split(int64_t total, int64_t parts) {
  parts = std::max<int64_t>(1, parts);
  std::vector<int64_t> lens(static_cast<size_t>(parts));
  for (int64_t i = 0; i < parts; ++i) lens[static_cast<size_t>(i)] = total / parts + (i < total % parts ? 1 : 0);
  return lens;
}

SparseMqaParams packed_sparse_mqa_params(const bf16_t* q, int64_t tokens, int32_t heads, const int32_t* slots,
                                         int32_t topk, const PagedCacheView& cache, bf16_t* out_lat, float* lse) {
  SparseMqaParams m;
  m.q_nope_lat = q;
  m.q_nope_token_stride = int64_t{heads} * kDl;
  m.q_nope_head_stride = kDl;
  m.q_pe = q + kDc;
  m.q_pe_token_stride = int64_t{heads} * kDl;
  m.q_pe_head_stride = kDl;
  m.num_tokens = tokens;
  m.num_heads = heads;
  m.indices = slots;
  m.indices_row_stride = topk;
  m.topk = topk;
  m.cache = cache;
  m.scale = kScale;
  m.out_lat = out_lat;
  m.lse = lse;
  return m;
}

AttentionCost sparse_mqa_cost(int64_t tokens, int32_t heads, int32_t topk, int64_t distinct_entries) {
  AttentionCost c;
  c.flops = static_cast<double>(tokens) * heads * topk * kSparseFlopsPerSlot;
  c.bytes = static_cast<double>(distinct_entries) * DsMlaEntry::kBytes +
            static_cast<double>(tokens) * heads * (kSparseQBytesPerHead + kSparseOutBytesPerHead);
  return c;
}

AttentionCost dense_mha_cost(const int32_t* cu_q, const int32_t* cu_k, int32_t num_reqs, int32_t heads, bool causal) {
  double pairs = 0.0;
  for (int32_t r = 0; r < num_reqs; ++r) {
    const int64_t nq = cu_q[r + 1] - cu_q[r], nk = cu_k[r + 1] - cu_k[r];
    pairs += static_cast<double>(causal ? causal_pairs(nq, nk) : nq * nk);
  }
  const double total_q = cu_q[num_reqs], total_k = cu_k[num_reqs];
  AttentionCost c;
  c.pairs = pairs;
  c.flops = pairs * heads * kDenseFlopsPerPair;
  c.bytes = total_q * heads * kDenseQBytesPerHead + total_k * (heads * kDenseKvBytesPerHead + kDenseKpeBytes);
  return c;
}

double sparse_mqa_flops(const SparseMqaShape& s) {
  return sparse_mqa_cost(int64_t{s.batch} * s.query_tokens, s.heads, s.topk, 0).flops;
}

Rng sparse_mqa_rng(uint64_t seed, const SparseMqaShape& sh) {
  return Rng(seed).fork(kStreamSparse).fork(static_cast<uint64_t>(sh.batch) * 1000003u +
                                            static_cast<uint64_t>(sh.query_tokens) * 10007u +
                                            static_cast<uint64_t>(sh.heads) * 101u + static_cast<uint64_t>(sh.topk) * 7u +
                                            static_cast<uint64_t>(sh.seq_len) * 1315423911u);
}

SparseMqaIndices make_sparse_mqa_indices(const SparseMqaShape& sh, int32_t block_size, Rng& rng) {
  const int32_t K = sh.topk, Q = sh.query_tokens;
  const int64_t T = int64_t{sh.batch} * Q;
  SparseMqaIndices out;
  // Requests of seq_len tokens in shuffled pages; token i of request r's Q new tokens is at
  // position seq_len - Q + i and picks K distinct visible positions (-1 when fewer are visible).
  out.layout = make_layout(std::vector<int64_t>(static_cast<size_t>(sh.batch), sh.seq_len), block_size,
                           /*spare_blocks=*/4, /*extra_columns=*/1, /*stride_padding=*/0, rng);
  out.slots.resize(static_cast<size_t>(T * K));
  std::vector<int32_t> row(static_cast<size_t>(K));
  for (int32_t r = 0; r < sh.batch; ++r) {
    for (int32_t i = 0; i < Q; ++i) {
      const int64_t t = int64_t{r} * Q + i;
      pick_visible_topk(rng, sh.seq_len - Q + i, K, row.data());
      for (int32_t j = 0; j < K; ++j) {
        out.slots[static_cast<size_t>(t * K + j)] = row[j] < 0 ? -1 : static_cast<int32_t>(out.layout.slot(r, row[j]));
      }
    }
  }
  out.distinct = count_unique_slots(out.slots.data(), static_cast<int64_t>(out.slots.size()),
                                    out.layout.num_blocks * block_size);
  return out;
}

std::string dense_mha_name(const DenseMhaShape& s) {
  std::string name = "dense_mha/H:" + std::to_string(s.heads) + "/reqs:" + std::to_string(s.requests) +
                     "/tokens:" + std::to_string(s.tokens);
  if (s.keys_per_request > 0) name += "/keys:" + std::to_string(s.keys_per_request);
  if (!s.causal) name += "/mask:none";
  return name;
}

std::string route_name(bool sparse, const RouteShape& r) {
  return std::string("route/") + (sparse ? "sparse" : "dense") + "/H:" + std::to_string(r.batch.heads) +
         "/K:" + std::to_string(r.batch.topk) + "/prefill:" + std::to_string(r.prefill_len);
}

DenseMhaSeqlens dense_mha_seqlens(const DenseMhaShape& s) {
  const std::vector<int64_t> lens = equal_split(s.tokens, s.requests);
  DenseMhaSeqlens out;
  out.cu_q.assign(lens.size() + 1, 0);
  out.cu_k.assign(lens.size() + 1, 0);
  for (size_t r = 0; r < lens.size(); ++r) {
    out.cu_q[r + 1] = out.cu_q[r] + static_cast<int32_t>(lens[r]);
    out.cu_k[r + 1] = out.cu_k[r] + static_cast<int32_t>(s.keys_per_request > 0 ? s.keys_per_request : lens[r]);
  }
  return out;
}

AttentionCost dense_mha_cost(const DenseMhaShape& s) {
  const DenseMhaSeqlens seqlens = dense_mha_seqlens(s);
  return dense_mha_cost(seqlens.cu_q.data(), seqlens.cu_k.data(), s.requests, s.heads, s.causal);
}

const char* AttentionShape::op_name() const {
  switch (op) {
    case AttentionOp::kSparse: return "sparse_mqa";
    case AttentionOp::kDense: return "dense_mha";
    case AttentionOp::kForward: return "forward";
    case AttentionOp::kRoute: return "route";
  }
  return "";
}

std::string AttentionShape::name() const {
  switch (op) {
    case AttentionOp::kSparse:
      return "sparse_mqa/batch:" + std::to_string(sparse.batch) + "/q:" + std::to_string(sparse.query_tokens) +
             "/H:" + std::to_string(sparse.heads) + "/K:" + std::to_string(sparse.topk) +
             "/seq:" + std::to_string(sparse.seq_len) +
             (sparse.splits > 0 ? "/splits:" + std::to_string(sparse.splits) : std::string());
    case AttentionOp::kDense: return dense_mha_name(dense);
    case AttentionOp::kForward:
      return "forward/" + forward.name + "/H:" + std::to_string(forward.heads) + "/K:" + std::to_string(forward.topk);
    case AttentionOp::kRoute: return route_name(route.batch.force_sparse, route);
  }
  return "";
}

double AttentionShape::model_flops() const {
  switch (op) {
    case AttentionOp::kSparse: return sparse_mqa_flops(sparse);
    case AttentionOp::kDense: return dense_mha_cost(dense).flops;
    case AttentionOp::kForward: return forward_flops_model(forward).total();
    case AttentionOp::kRoute: return forward_flops_model(route.batch).total();
  }
  return 0.0;
}

bool AttentionShape::over_host_caps(const HostLimits& caps) const {
  return model_flops() > static_cast<double>(caps.max_attention_flops);
}

namespace {

// One AttentionShape of kind `op` per shape of `from`, held in `member`.
template <typename Shape>
void append_shapes(std::vector<AttentionShape>& out, AttentionOp op, Shape AttentionShape::*member,
                   const std::vector<Shape>& from) {
  for (const Shape& s : from) {
    AttentionShape sh;
    sh.op = op;
    sh.*member = s;
    out.push_back(sh);
  }
}

}  // namespace

std::vector<AttentionShape> attention_shapes(const Sweep& sw) {
  std::vector<AttentionShape> shapes;
  append_shapes(shapes, AttentionOp::kSparse, &AttentionShape::sparse, sw.sparse_shapes);
  append_shapes(shapes, AttentionOp::kDense, &AttentionShape::dense, sw.dense_shapes);
  append_shapes(shapes, AttentionOp::kForward, &AttentionShape::forward, sw.forward_batches);
  append_shapes(shapes, AttentionOp::kRoute, &AttentionShape::route, sw.route_shapes);
  return shapes;
}

ForwardFlops forward_flops_model(const ForwardBatch& fb) {
  ForwardFlops f;
  const double H = fb.heads;
  const double proj = 2.0 * H * kDn * kDc;  // one [.,128] x [128,512] (or transpose) per head and row
  Batch light;
  light.num_reqs = static_cast<int32_t>(fb.seq_lens.size());
  light.seq_lens = fb.seq_lens;
  const int32_t nd = count_decodes(fb.query_lens, fb.decode_threshold);
  int64_t total = 0, decode_tokens = 0;
  for (size_t r = 0; r < fb.query_lens.size(); ++r) {
    total += fb.query_lens[r];
    if (static_cast<int32_t>(r) < nd) decode_tokens += fb.query_lens[r];
  }
  const bool dense = !fb.force_sparse && prefills_fit_topk(light, nd, fb.topk);
  f.sparse_tokens = dense ? decode_tokens : total;
  f.dense_tokens = total - f.sparse_tokens;
  f.sparse_attention = static_cast<double>(f.sparse_tokens) * H * fb.topk * kSparseFlopsPerSlot;
  f.gemm = static_cast<double>(f.sparse_tokens) * 2.0 * proj;  // absorption and W_UV
  if (dense) {
    for (size_t r = static_cast<size_t>(nd); r < fb.seq_lens.size(); ++r) {
      const int64_t q = fb.query_lens[r], ctx = fb.seq_lens[r] - fb.query_lens[r];
      f.gemm += static_cast<double>(q + ctx) * 2.0 * proj;  // K and V up-projection of every key row
      f.dense_attention += static_cast<double>(causal_pairs(q, q) + q * ctx) * H * kDenseFlopsPerPair;
    }
  }
  return f;
}

namespace {

// C = A B through backend.gemm, timed by `timer` (the backend's): the ceiling's measurement. A
// backend without gemm returns the unsupported status of its first call.
Status time_gemm_ceiling(Backend& backend, DeviceTimer& timer, GemmCeiling* out) {
  *out = GemmCeiling();
  const int64_t n = timer.on_device() ? kGemmCeilingSizeDevice : kGemmCeilingSizeHost;
  const int samples = timer.on_device() ? kGemmSamplesDevice : kGemmSamplesHost;
  Rng rng = Rng(1).fork(kStreamGemm);
  std::vector<bf16_t> host(static_cast<size_t>(n * n));
  DeviceBuffer a, b, c;
  fill_uniform_bf16(host, rng, 1.0f);  // never zeros (METHOD: zeros can run faster)
  MLA_RETURN_IF_ERROR(a.upload(backend, host));
  fill_uniform_bf16(host, rng, 1.0f);
  MLA_RETURN_IF_ERROR(b.upload(backend, host));
  MLA_RETURN_IF_ERROR(c.allocate(backend, host.size() * sizeof(bf16_t)));
  GemmParams g;
  g.a = a.as<bf16_t>();
  g.lda = n;
  g.b = b.as<bf16_t>();
  g.ldb = n;
  g.c = c.as<bf16_t>();
  g.ldc = n;
  g.m = g.n = g.k = n;
  g.batch = 1;
  std::vector<double> t;
  for (int i = 0; i < kGemmWarmup + samples; ++i) {
    MLA_RETURN_IF_ERROR(timer.start());
    MLA_RETURN_IF_ERROR(backend.gemm(g));
    double s = 0.0;
    MLA_RETURN_IF_ERROR(timer.stop(&s));
    if (i >= kGemmWarmup) t.push_back(s);
  }
  const double med = median(t);
  if (!(med > 0.0)) return Status::error("GEMM ceiling: the timed calls took no time");
  out->size = n;
  out->samples = samples;
  out->flops_per_second = 2.0 * static_cast<double>(n) * n * n / med;
  const std::string sz = std::to_string(n);
  out->method = "Backend::gemm bf16 " + sz + "x" + sz + "x" + sz + " (fp32 accumulation), 2mnk / median of " +
                std::to_string(samples) + (timer.on_device() ? " event-timed calls" : " calls (steady_clock)") +
                " after " + std::to_string(kGemmWarmup) + " warm-ups";
  out->backend = backend.info().name;
  return Status();
}

}  // namespace

Status measure_gemm_ceiling(Backend& backend, DeviceTimer& timer, HarnessBackend& harness, GemmCeiling* out) {
  const Status own = time_gemm_ceiling(backend, timer, out);
  if (!own.is_unsupported()) return own;
  // The ceiling is the device's, not the implementation's: a backend without gemm (an adapter
  // that lacks it) has it measured by the harness's own backend of the same device, the base that
  // --adapter-fallback runs the lacking operations on, with a timer on that backend's stream.
  Backend* base = nullptr;
  if (const Status st = harness.get(&base); !st.ok()) return Status::error(own.message() + "; " + st.message());
  std::unique_ptr<DeviceTimer> harness_timer;
  MLA_RETURN_IF_ERROR(DeviceTimer::create(*base, &harness_timer));
  MLA_RETURN_IF_ERROR(time_gemm_ceiling(*base, *harness_timer, out));
  out->method += "; on the harness's own " + out->backend + " backend: " + own.message();
  return Status();
}

RegisterResult register_attention_benchmarks(BenchEnv* env, const GemmCeiling* gemm, const RegisterOptions& options) {
  AttentionState& s = state();
  s.env = env;
  s.gemm = gemm;
  const Sweep& sw = env->sweep;
  return register_shapes(
      attention_shapes(sw), env->timer->on_device(), options.host_caps,
      [&](const AttentionShape& shape) { return shape.over_host_caps(sw.host); }, run_benchmark);
}

int attention_runtime_errors() { return state().runtime_errors; }

void release_attention_state() {
  AttentionState& s = state();
  s.prepared.release();
  s.entry_pool.clear();
}

int32_t plan_multiprocessors(Backend& backend) {
  const NativeDevice device = backend.native_device();
  return device.multiprocessors > 0 ? device.multiprocessors : 132;
}

}  // namespace mla::bench
