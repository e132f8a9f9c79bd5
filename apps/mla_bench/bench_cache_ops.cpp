#include "apps/mla_bench/bench_cache_ops.h"

#include <functional>
#include <map>
#include <new>
#include <utility>

#include <benchmark/benchmark.h>

#include "apps/mla_bench/bench_inputs.h"
#include "apps/mla_bench/bench_common.h"
#include "lib/batch/rng.h"

namespace mla::bench {
namespace {

// Streams of the sweep seed (fixed numbers: changing one changes the data).
constexpr uint64_t kStreamLatentPool = 1;
constexpr uint64_t kStreamPack = 2;
constexpr uint64_t kStreamGather = 3;
constexpr uint64_t kStreamConvert = 4;
// Distinct latent rows / cache entries; larger inputs reuse them cyclically (at other addresses).
constexpr int64_t kPoolRows = 65536;

// The inputs of one benchmark on the backend, and the call that runs it.
class Prepared {
 public:
  virtual ~Prepared() = default;
  virtual Status run(Backend& backend) = 0;
};

class PreparedPack final : public Prepared {
 public:
  DeviceBuffer kv, slots, cache;
  PackParams params;
  Status run(Backend& backend) override { return backend.pack(params); }
};

class PreparedGather final : public Prepared {
 public:
  DeviceBuffer cache, block_table, workspace_starts, seq_starts, dst;
  GatherParams params;
  Status run(Backend& backend) override { return backend.gather(params); }
};

class PreparedConvert final : public Prepared {
 public:
  DeviceBuffer req_id, indices, block_table, out, valid_count;
  ConvertParams params;
  Status run(Backend& backend) override { return backend.convert(params); }
};


struct BenchState {
  BenchEnv* env = nullptr;
  PreparedCache<Prepared> prepared;
  std::vector<bf16_t> latent_pool;   // [kPoolRows, 576]
  std::vector<uint8_t> entry_pool;   // [kPoolRows, 656], packed by the backend
  int runtime_errors = 0;
};

BenchState& state() {
  static BenchState s;
  return s;
}

const std::vector<bf16_t>& latent_pool() {
  BenchState& s = state();
  if (s.latent_pool.empty()) {
    Rng rng = Rng(s.env->sweep.seed).fork(kStreamLatentPool);
    s.latent_pool = make_latent_rows(kPoolRows, rng);
  }
  return s.latent_pool;
}

Status prepare_pack(Backend& b, const CacheShape& shape, std::unique_ptr<Prepared>* out) {
  auto p = std::make_unique<PreparedPack>();
  Rng rng = Rng(state().env->sweep.seed).fork(kStreamPack).fork(static_cast<uint64_t>(shape.size));
  const PackInputs in = make_pack_inputs(shape.size, shape.block_size, latent_pool(), rng);
  check_alloc(p->kv.upload(b, in.kv));
  check_alloc(p->slots.upload(b, in.slot_mapping));
  check_alloc(p->cache.allocate(b, static_cast<size_t>(in.layout.num_blocks * in.page_stride_bytes)));
  p->params.kv_c = p->kv.as<bf16_t>();
  p->params.kv_c_row_stride = kKvCols;
  p->params.k_pe = p->kv.as<bf16_t>() + DsMlaEntry::kNopeDims;
  p->params.k_pe_row_stride = kKvCols;
  p->params.slot_mapping = p->slots.as<int64_t>();
  p->params.num_tokens = in.num_tokens;
  p->params.cache.data = p->cache.as<uint8_t>();
  p->params.cache.num_blocks = in.layout.num_blocks;
  p->params.cache.block_size = in.layout.block_size;
  p->params.cache.page_stride_bytes = in.page_stride_bytes;
  *out = std::move(p);
  return Status();
}

Status prepare_gather(Backend& b, const CacheShape& shape, std::unique_ptr<Prepared>* out) {
  BenchState& s = state();
  if (s.entry_pool.empty()) {
    Status st = pack_input_entries(b, s.env->harness, latent_pool(), &s.entry_pool);
    if (!st.ok()) return Status::error("packing the gather entry pool: " + st.message());
  }
  auto p = std::make_unique<PreparedGather>();
  Rng rng = Rng(s.env->sweep.seed)
                .fork(kStreamGather)
                .fork(static_cast<uint64_t>(shape.size) * 1000003u + static_cast<uint64_t>(shape.block_size) * 2u +
                      (shape.seq_starts ? 1u : 0u));
  const GatherInputs in = make_gather_inputs(shape.size, shape.block_size, shape.seq_starts, rng);
  check_alloc(p->cache.upload(b, assemble_cache(in.layout, in.page_stride_bytes, s.entry_pool)));
  check_alloc(p->block_table.upload(b, in.layout.block_table));
  check_alloc(p->workspace_starts.upload(b, in.workspace_starts));
  if (shape.seq_starts) check_alloc(p->seq_starts.upload(b, in.seq_starts));
  check_alloc(p->dst.allocate(b, static_cast<size_t>(in.num_rows) * DsMlaEntry::kLatentDims * sizeof(bf16_t)));
  GatherParams& g = p->params;
  g.cache.data = p->cache.as<uint8_t>();
  g.cache.num_blocks = in.layout.num_blocks;
  g.cache.block_size = in.layout.block_size;
  g.cache.page_stride_bytes = in.page_stride_bytes;
  g.block_table = p->block_table.as<int32_t>();
  g.num_reqs = in.layout.num_reqs;
  g.block_table_width = in.layout.bt_width;
  g.block_table_stride = in.layout.bt_stride;
  g.workspace_starts = p->workspace_starts.as<int32_t>();
  g.seq_starts = shape.seq_starts ? p->seq_starts.as<int32_t>() : nullptr;
  g.dst = p->dst.as<bf16_t>();
  g.dst_row_stride = DsMlaEntry::kLatentDims;
  g.num_rows = in.num_rows;
  *out = std::move(p);
  return Status();
}

Status prepare_convert(Backend& b, const CacheShape& shape, std::unique_ptr<Prepared>* out) {
  auto p = std::make_unique<PreparedConvert>();
  Rng rng = Rng(state().env->sweep.seed)
                .fork(kStreamConvert)
                .fork(static_cast<uint64_t>(shape.size) * 1000003u + static_cast<uint64_t>(shape.topk));
  const ConvertInputs in = make_convert_inputs(shape.size, shape.topk, shape.block_size, rng);
  check_alloc(p->req_id.upload(b, in.req_id));
  check_alloc(p->indices.upload(b, in.indices));
  check_alloc(p->block_table.upload(b, in.layout.block_table));
  check_alloc(p->out.allocate(b, static_cast<size_t>(in.rows * in.topk) * sizeof(int32_t)));
  check_alloc(p->valid_count.allocate(b, static_cast<size_t>(in.rows) * sizeof(int32_t)));
  ConvertParams& c = p->params;
  c.req_id = p->req_id.as<int32_t>();
  c.num_tokens = in.rows;
  c.indices = p->indices.as<int32_t>();
  c.indices_rows = in.rows;
  c.topk = in.topk;
  c.indices_row_stride = in.topk;
  c.block_table = p->block_table.as<int32_t>();
  c.num_reqs = in.layout.num_reqs;
  c.block_table_width = in.layout.bt_width;
  c.block_table_stride = in.layout.bt_stride;
  c.block_size = in.layout.block_size;
  c.out = p->out.as<int32_t>();
  c.out_row_stride = in.topk;
  c.valid_count = p->valid_count.as<int32_t>();
  *out = std::move(p);
  return Status();
}

// Builds (or reuses: Google Benchmark calls the function once per run and repetition) the inputs
// of `shape`, then runs the operation once, untimed. nullptr: the benchmark was skipped.
Prepared* prepare(benchmark::State& st, const CacheShape& shape) {
  BenchState& s = state();
  Backend& b = *s.env->backend;
  return s.prepared.get(
      st, &s.runtime_errors, shape.name(),
      [&](std::unique_ptr<Prepared>* p) -> Status {
        switch (shape.op) {
          case CacheOp::kPack: return prepare_pack(b, shape, p);
          case CacheOp::kGather: return prepare_gather(b, shape, p);
          case CacheOp::kConvert: return prepare_convert(b, shape, p);
        }
        return Status::error("unknown operation");
      },
      [&](Prepared& p) {
        Status status = p.run(b);
        if (status.ok()) status = b.synchronize();
        return status;
      });
}

void run_benchmark(benchmark::State& st, const CacheShape& shape) {
  BenchState& s = state();
  BenchEnv& env = *s.env;
  Prepared* prepared = prepare(st, shape);
  if (prepared == nullptr) return;
  const double timed = time_and_count(st, env, [&](Backend& b) { return prepared->run(b); }, &s.runtime_errors,
                                      shape.bytes(), shape.items(), shape.label());
  if (st.error_occurred()) return;
  const auto iters = static_cast<int64_t>(st.iterations());
  if (timed > 0.0 && env.roofline.copy_bytes_per_second > 0.0) {
    const double achieved = static_cast<double>(iters) * static_cast<double>(shape.bytes()) / timed;
    st.counters["pct_of_copy_bw"] = benchmark::Counter(100.0 * achieved / env.roofline.copy_bytes_per_second);
    // The same bytes copied at this size (measured once per size, after the shape's timing).
    static std::map<int64_t, double> sized_copy;
    auto it = sized_copy.find(shape.bytes());
    if (it == sized_copy.end()) {
      double rate = 0.0;
      const Status c = measure_sized_copy(*env.backend, *env.timer, *env.flusher,
                                          static_cast<std::size_t>(shape.bytes()), &rate);
      if (!c.ok()) {
        ++s.runtime_errors;
        st.SkipWithError(("same-size copy: " + c.message()).c_str());
        return;
      }
      it = sized_copy.emplace(shape.bytes(), rate).first;
    }
    if (it->second > 0.0) {
      st.counters["same_size_copy_bytes_per_second"] = benchmark::Counter(it->second);
      st.counters["pct_of_same_size_copy"] = benchmark::Counter(100.0 * achieved / it->second);
    }
  }
  if (shape.op == CacheOp::kConvert && shape.bytes() <= kLatencyCounterMaxBytes && timed > 0.0 &&
      env.roofline.empty_launch_seconds > 0.0) {
    const double per_iter = timed / static_cast<double>(iters);
    st.counters["pct_of_empty_launch"] = benchmark::Counter(100.0 * env.roofline.empty_launch_seconds / per_iter);
  }
}

}  // namespace

int64_t CacheShape::bytes() const {
  switch (op) {
    case CacheOp::kPack: return size * kPackBytesPerToken;
    case CacheOp::kGather: return size * kGatherBytesPerRow;
    case CacheOp::kConvert: return size * topk * kConvertBytesPerElement + size * kConvertBytesPerRow;
  }
  return 0;
}

int64_t CacheShape::items() const { return op == CacheOp::kConvert ? size * topk : size; }

const char* CacheShape::op_name() const {
  switch (op) {
    case CacheOp::kPack: return "pack";
    case CacheOp::kGather: return "gather";
    case CacheOp::kConvert: return "convert";
  }
  return "";
}

std::string CacheShape::name() const {
  switch (op) {
    case CacheOp::kPack:
      return "pack/B:" + std::to_string(block_size) + "/tokens:" + std::to_string(size);
    case CacheOp::kGather:
      return "gather/B:" + std::to_string(block_size) + "/seq_starts:" + (seq_starts ? "on" : "off") +
             "/rows:" + std::to_string(size);
    case CacheOp::kConvert:
      return "convert/B:" + std::to_string(block_size) + "/K:" + std::to_string(topk) + "/rows:" + std::to_string(size);
  }
  return "";
}

std::string CacheShape::label() const {
  switch (op) {
    case CacheOp::kPack: return "bytes/token=1816 (read kv_c 1024 + k_pe 128 + slot 8, write 656)";
    case CacheOp::kGather: return "bytes/row=1808 (read 656, write 1152)";
    case CacheOp::kConvert: return "bytes=8/elem (read 4, write 4) + 8/row (req_id, valid_count)";
  }
  return "";
}

bool CacheShape::over_host_caps(const HostLimits& caps) const {
  if (op == CacheOp::kConvert) return size * topk > caps.max_convert_elements;
  return size > caps.max_tokens;
}

std::vector<CacheShape> cache_shapes(const Sweep& sw) {
  std::vector<CacheShape> shapes;
  for (int32_t b : sw.pack_block_sizes)
    for (int64_t n : sw.pack_tokens) shapes.push_back({CacheOp::kPack, n, b, false, 0});
  for (int32_t b : sw.gather_block_sizes)
    for (bool ss : sw.gather_seq_starts)
      for (int64_t n : sw.gather_rows) shapes.push_back({CacheOp::kGather, n, b, ss, 0});
  for (int32_t k : sw.convert_topk)
    for (int64_t n : sw.convert_rows) shapes.push_back({CacheOp::kConvert, n, sw.convert_block_size, false, k});
  return shapes;
}

RegisterResult register_cache_benchmarks(BenchEnv* env, const RegisterOptions& options) {
  state().env = env;
  const Sweep& sw = env->sweep;
  return register_shapes(
      cache_shapes(sw), env->timer->on_device(), options.host_caps,
      [&](const CacheShape& shape) { return shape.over_host_caps(sw.host); }, run_benchmark);
}

int benchmark_runtime_errors() { return state().runtime_errors; }

void release_benchmark_state() {
  BenchState& s = state();
  s.prepared.release();
  s.entry_pool.clear();
}

}  // namespace mla::bench
