#include "apps/mla_bench/bench_dcp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <unordered_set>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "apps/mla_bench/bench_attention_ops.h"
#include "apps/mla_bench/bench_common.h"
#include "apps/mla_bench/bench_inputs.h"
#include "apps/mla_bench/device_timer.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/mla_dims.h"
#include "lib/batch/rng.h"
#include "lib/checks/buffer_set.h"
#include "lib/dcp/communicator.h"
#include "lib/dcp/launch_env.h"
#include "lib/dcp/local_launch.h"
#include "lib/dcp/merge_tree.h"
#include "lib/pipeline/sparse_mqa_plan.h"
#include "lib/run/report.h"
#include "lib/run/suite_runner.h"

namespace mla::bench {
namespace {

using json = nlohmann::json;

constexpr uint64_t kStreamDcp = 21;              // of the sweep seed; distinct from the other benchmarks'
constexpr int64_t kEntryPoolRows = 4096;         // distinct packed entries, tiled over every shard
constexpr int64_t kTilePages = 256;              // pages per host-side tile of the cache
constexpr double kCommandTimeoutS = 3600.0;      // a setup of a 128k-token shard takes seconds, a step milliseconds

// --- The worker (one per GPU) --------------------------------------------------------------------

// Frames a worker sends on its control socket: 'X' + bytes, its part of an exchange round (the
// parent answers with every participant's bytes, as a hub does: lib/dcp/exchange.h); 'R' + JSON,
// its reply to the command.
class WorkerExchange final : public Exchange {
 public:
  WorkerExchange(int fd, int rank, int size) : fd_(fd), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status all_gather(const std::string& mine, double timeout_s, std::vector<std::string>* all) override {
    MLA_RETURN_IF_ERROR(send_frame(fd_, "X" + mine));
    all->assign(static_cast<size_t>(size_), std::string());
    for (auto& frame : *all) MLA_RETURN_IF_ERROR(recv_frame(fd_, timeout_s, &frame));
    return Status();
  }

 private:
  int fd_, rank_, size_;
};

// One rank's inputs and buffers for one (shape, rank count).
struct RankStep {
  int ranks = 1;
  int64_t rows = 0;  // T x H
  DeviceBuffer q, req_id, positions, block_table, cache, slots, out, lse, gathered_out, gathered_lse, token, tokens;
  std::unique_ptr<BufferSet> plan_buffers;
  ConvertParams convert;
  SparseMqaParams sparse;
  std::unique_ptr<DeviceTimer> attention, communication, merge;
};

// K distinct positions of [0, visible) in random order (all of them, then -1, when fewer).
void pick_positions(int64_t visible, int32_t k, Rng& rng, int32_t* row) {
  if (visible <= k) {
    for (int32_t j = 0; j < k; ++j) row[j] = j < visible ? j : -1;
  } else {
    std::unordered_set<int64_t> chosen;
    for (int64_t v = visible - k; v < visible; ++v) {  // Floyd's sampling
      const int64_t t = static_cast<int64_t>(rng.below(static_cast<uint64_t>(v + 1)));
      chosen.insert(chosen.count(t) ? v : t);
    }
    int32_t j = 0;
    for (int64_t p : chosen) row[j++] = static_cast<int32_t>(p);
  }
  for (int32_t j = k - 1; j > 0; --j) std::swap(row[j], row[static_cast<int32_t>(rng.below(static_cast<uint64_t>(j + 1)))]);
}

class Worker {
 public:
  Worker(const Sweep& sweep, const BackendChoice& choice, std::string transport, int rank, int fd)
      : sweep_(sweep), transport_(std::move(transport)), rank_(rank), fd_(fd) {
    set_multicast_off();
    std::string why;
    backend_ = make_backend(choice, &why);
    if (!backend_) backend_error_ = "cannot create the " + to_string(choice) + " backend: " + why;
  }

  int serve() {
    for (;;) {
      std::string text;
      if (!recv_frame(fd_, 1e9, &text).ok()) return 0;  // the parent has gone
      json reply;
      try {
        const json cmd = json::parse(text);
        const std::string op = cmd.at("op").get<std::string>();
        if (op == "quit") return 0;
        if (!backend_error_.empty()) throw std::runtime_error(backend_error_);
        if (op == "comm") reply = make_comm(cmd.at("ranks").get<int>());
        else if (op == "setup") reply = setup(cmd.at("ranks").get<int>(), cmd.at("shape").get<size_t>());
        else if (op == "release") reply = release();
        else if (op == "step") reply = step();
        else throw std::runtime_error("unknown command " + op);
      } catch (const CapacityError& e) {
        step_.reset();
        reply = {{"error", "does not fit: " + e.message}, {"capacity", true}};
      } catch (const std::bad_alloc&) {
        step_.reset();
        reply = {{"error", "does not fit: host memory exhausted"}, {"capacity", true}};
      } catch (const std::exception& e) {
        step_.reset();
        reply = {{"error", e.what()}};
      }
      if (!send_frame(fd_, "R" + reply.dump()).ok()) return 0;
    }
  }

 private:
  json make_comm(int ranks) {
    if (comms_.count(ranks)) return {{"ok", true}};
    auto ex = std::make_unique<WorkerExchange>(fd_, rank_, ranks);
    std::unique_ptr<Communicator> comm;
    if (transport_ == "nccl") {
      const Status s = make_nccl_communicator(*ex, *backend_, kCommandTimeoutS, &comm);
      if (!s.ok()) throw std::runtime_error(s.message());
    } else {
      comm = make_socket_communicator(*ex, kCommandTimeoutS);
    }
    exchanges_[ranks] = std::move(ex);
    comms_[ranks] = std::move(comm);
    return {{"ok", true}, {"transport", comms_[ranks]->describe()}};
  }

  json release() {
    step_.reset();
    return {{"ok", true}};
  }

  // This rank's shard of shape `index` among `ranks` ranks (rank_ < ranks), replacing its last.
  json setup(int ranks, size_t index) {
    step_.reset();
    Backend& be = *backend_;
    const SparseMqaShape& sh = sweep_.dcp_shapes.at(index);
    const int32_t B = sweep_.dcp_block_size, I = sweep_.dcp_interleave, H = sh.heads, K = sh.topk;
    const int64_t T = int64_t{sh.batch} * sh.query_tokens, L = sh.seq_len;
    auto st = std::make_unique<RankStep>();
    st->ranks = ranks;
    st->rows = T * H;
    // Every rank draws the same queries and picks (one stream per shape); its pages come from a
    // stream of its own.
    const Rng base = Rng(sweep_.seed).fork(kStreamDcp).fork(index);
    Rng rng = base.fork(1);
    // The shard's block table: (L / R + I) positions per request and a spare page, pages shuffled.
    const int32_t width = static_cast<int32_t>((L / ranks + I + B - 1) / B + 1);
    const int64_t num_blocks = int64_t{sh.batch} * width;
    std::vector<int32_t> table(static_cast<size_t>(num_blocks));
    for (int64_t i = 0; i < num_blocks; ++i) table[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    Rng pages = base.fork(100 + static_cast<uint64_t>(rank_));
    for (int64_t i = num_blocks - 1; i > 0; --i)
      std::swap(table[static_cast<size_t>(i)], table[static_cast<size_t>(pages.below(static_cast<uint64_t>(i + 1)))]);
    check_alloc(st->block_table.upload(be, table));
    // The pool: every slot holds a packed entry (the pool of distinct entries tiled), so any slot a
    // converted index names is a real entry.
    const int64_t page_bytes = int64_t{B} * DsMlaEntry::kBytes;
    if (entry_pool_.empty()) {
      Rng pool_rng = Rng(sweep_.seed).fork(kStreamDcp).fork(0);
      const Status s = pack_entries(be, make_latent_rows(kEntryPoolRows, pool_rng), &entry_pool_);
      if (!s.ok()) throw std::runtime_error("packing the cache entries: " + s.message());
    }
    check_alloc(st->cache.allocate(be, static_cast<size_t>(num_blocks * page_bytes)));
    {
      const int64_t tile_pages = std::min<int64_t>(kTilePages, num_blocks);
      std::vector<uint8_t> tile(static_cast<size_t>(tile_pages * page_bytes));
      for (size_t i = 0; i < tile.size(); ++i) tile[i] = entry_pool_[i % entry_pool_.size()];
      for (int64_t first = 0; first < num_blocks; first += tile_pages) {
        const int64_t n = std::min(tile_pages, num_blocks - first);
        const Status s = be.copy_to_device(st->cache.as<uint8_t>() + first * page_bytes, tile.data(),
                                           static_cast<size_t>(n * page_bytes));
        if (!s.ok()) throw std::runtime_error("filling the cache: " + s.message());
      }
    }
    check_alloc(st->q.upload(be, make_latent_rows(T * H, rng)));  // [T, H, 576]
    std::vector<int32_t> req(static_cast<size_t>(T)), picks(static_cast<size_t>(T * K));
    for (int64_t t = 0; t < T; ++t) {
      req[static_cast<size_t>(t)] = static_cast<int32_t>(t / sh.query_tokens);
      const int64_t visible = L - sh.query_tokens + t % sh.query_tokens + 1;
      pick_positions(visible, K, rng, &picks[static_cast<size_t>(t * K)]);
    }
    check_alloc(st->req_id.upload(be, req));
    check_alloc(st->positions.upload(be, picks));
    check_alloc(st->slots.allocate(be, static_cast<size_t>(T * K) * sizeof(int32_t)));
    check_alloc(st->out.allocate(be, static_cast<size_t>(st->rows * kDc) * sizeof(bf16_t)));
    check_alloc(st->lse.allocate(be, static_cast<size_t>(st->rows) * sizeof(float)));
    check_alloc(st->gathered_out.allocate(be, static_cast<size_t>(ranks * st->rows * kDc) * sizeof(bf16_t)));
    check_alloc(st->gathered_lse.allocate(be, static_cast<size_t>(ranks * st->rows) * sizeof(float)));
    check_alloc(st->token.upload(be, std::vector<int32_t>{rank_}));
    check_alloc(st->tokens.allocate(be, static_cast<size_t>(ranks) * sizeof(int32_t)));

    ConvertParams& c = st->convert;
    c.req_id = st->req_id.as<int32_t>();
    c.num_tokens = T;
    c.indices = st->positions.as<int32_t>();
    c.indices_rows = T;
    c.topk = K;
    c.indices_row_stride = K;
    c.block_table = st->block_table.as<int32_t>();
    c.num_reqs = sh.batch;
    c.block_table_width = width;
    c.block_table_stride = width;
    c.block_size = B;
    c.out = st->slots.as<int32_t>();
    c.out_row_stride = K;
    c.dcp_world_size = ranks;
    c.dcp_rank = rank_;
    c.dcp_interleave = I;

    SparseMqaParams& m = st->sparse;
    m = packed_sparse_mqa_params(st->q.as<bf16_t>(), T, H, st->slots.as<int32_t>(), K,
                                 {st->cache.as<uint8_t>(), num_blocks, B, page_bytes}, st->out.as<bf16_t>(),
                                 st->lse.as<float>());
    st->plan_buffers = std::make_unique<BufferSet>(be);
    attach_plan(*st->plan_buffers,
                plan_sparse_mqa_on_device(static_cast<int32_t>(T), H, K, plan_multiprocessors(be)), m);
    for (auto* t : {&st->attention, &st->communication, &st->merge}) {
      const Status s = DeviceTimer::create(be, t);
      if (!s.ok()) throw std::runtime_error(s.message());
    }
    step_ = std::move(st);
    json r = {{"ok", true}};
    // One step untimed: first-launch costs, and a check that every operation runs.
    const json first = step();
    r["first_step"] = first;
    return r;
  }

  json step() {
    if (!step_) throw std::runtime_error("no inputs: the setup failed or was not done");
    RankStep& st = *step_;
    Backend& be = *backend_;
    Communicator& comm = *comms_.at(st.ranks);
    const auto must = [](const Status& s, const char* what) {
      if (!s.ok()) throw std::runtime_error(std::string(what) + ": " + s.message());
    };
    // The ranks set off together.
    must(comm.all_gather(be, st.token.get(), st.tokens.get(), sizeof(int32_t)), "barrier");
    must(be.synchronize(), "barrier");
    double attention = 0, communication = 0, merge = 0;
    must(st.attention->start(), "timer");
    must(be.convert(st.convert), "convert");
    must(be.sparse_mqa(st.sparse), "sparse_mqa");
    must(st.attention->stop(&attention), "attention");
    must(st.communication->start(), "timer");
    must(comm.all_gather(be, st.out.get(), st.gathered_out.get(), static_cast<size_t>(st.rows * kDc) * sizeof(bf16_t)),
         "gathering the outputs");
    must(comm.all_gather(be, st.lse.get(), st.gathered_lse.get(), static_cast<size_t>(st.rows) * sizeof(float)),
         "gathering the LSEs");
    must(st.communication->stop(&communication), "communication");
    std::vector<bf16_t*> outs;
    std::vector<float*> lses;
    for (int r = 0; r < st.ranks; ++r) {
      outs.push_back(st.gathered_out.as<bf16_t>() + static_cast<size_t>(r * st.rows * kDc));
      lses.push_back(st.gathered_lse.as<float>() + static_cast<size_t>(r * st.rows));
    }
    must(st.merge->start(), "timer");
    must(merge_dcp_partials(be, outs, lses, st.rows), "merge");
    must(st.merge->stop(&merge), "merge");
    return {{"attention_s", attention}, {"communication_s", communication}, {"merge_s", merge}};
  }

  const Sweep& sweep_;
  std::string transport_;
  int rank_, fd_;
  std::unique_ptr<Backend> backend_;
  std::string backend_error_;
  std::vector<uint8_t> entry_pool_;
  std::map<int, std::unique_ptr<WorkerExchange>> exchanges_;  // outlive the communicators made over them
  std::map<int, std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<RankStep> step_;
};

// --- The driver (mla-bench's own process) --------------------------------------------------------

class Driver {
 public:
  explicit Driver(RankProcesses procs) : procs_(std::move(procs)) {}
  ~Driver() { stop(); }
  int workers() const { return static_cast<int>(procs_.fds.size()); }

  // Sends `cmd` to workers [first, end) and collects their replies, relaying the exchange rounds
  // they go through first (they are that round's participants, in rank order).
  Status command(const json& cmd, int first, int end, std::vector<json>* replies) {
    if (!broken_.empty()) return Status::error(broken_);
    const std::string text = cmd.dump();
    for (int r = first; r < end; ++r) MLA_RETURN_IF_ERROR(fail(send_frame(fd(r), text)));
    for (;;) {
      std::vector<std::string> frames;
      int replied = 0;
      for (int r = first; r < end; ++r) {
        frames.emplace_back();
        MLA_RETURN_IF_ERROR(fail(recv_frame(fd(r), kCommandTimeoutS, &frames.back()), "worker " + std::to_string(r)));
        replied += !frames.back().empty() && frames.back()[0] == 'R';
      }
      if (replied == end - first) {
        replies->clear();
        for (const auto& f : frames) replies->push_back(json::parse(f.substr(1)));
        return Status();
      }
      if (replied != 0) return fail(Status::error("the workers lost step: some replied while others wait in an exchange"));
      for (int r = first; r < end; ++r)
        for (const auto& f : frames) MLA_RETURN_IF_ERROR(fail(send_frame(fd(r), f.substr(1))));
    }
  }

  void stop() {
    if (procs_.pids.empty()) return;
    broken_ = "the DCP workers have ended";
    for (int fd : procs_.fds) (void)send_frame(fd, json{{"op", "quit"}}.dump());
    end_local_ranks(procs_, 30.0);
  }

 private:
  Status fail(Status s, const std::string& who = "") {
    if (!s.ok()) broken_ = "the DCP workers stopped answering (" + (who.empty() ? "" : who + ": ") + s.message() + ")";
    return s.ok() ? s : Status::error(broken_);
  }

  int fd(int rank) const { return procs_.fds[static_cast<size_t>(rank)]; }

  RankProcesses procs_;
  std::string broken_;
};

struct DcpShape {
  size_t index = 0;
  int ranks = 1;
  SparseMqaShape shape;
  std::string name() const { return dcp_benchmark_name(ranks, shape); }
};

struct Run {
  Driver* driver = nullptr;
  std::map<int, bool> comm_ready;
  std::optional<std::pair<size_t, int>> prepared;  // (shape, ranks) the workers hold
  std::map<size_t, double> one_rank_time;          // shape -> mean step time on one rank
  int errors = 0;
};

void run_one(benchmark::State& st, Run& run, const DcpShape& s) {
  Driver& d = *run.driver;
  std::vector<json> replies;
  const auto error = [&](const std::string& e, bool count = true) {
    st.SkipWithError(e.c_str());
    if (count) ++run.errors;
  };
  if (!run.comm_ready[s.ranks]) {
    if (const Status c = d.command({{"op", "comm"}, {"ranks", s.ranks}}, 0, s.ranks, &replies); !c.ok())
      return error(c.message());
    for (const json& r : replies)
      if (r.contains("error")) return error("communicator: " + r["error"].get<std::string>());
    run.comm_ready[s.ranks] = true;
  }
  if (run.prepared != std::make_pair(s.index, s.ranks)) {
    run.prepared.reset();
    // The workers outside this run free what they hold; the others build their shards.
    std::vector<json> released;
    if (const Status c = d.command({{"op", "release"}}, s.ranks, d.workers(), &released); !c.ok()) return error(c.message());
    if (const Status c = d.command({{"op", "setup"}, {"ranks", s.ranks}, {"shape", s.index}}, 0, s.ranks, &replies); !c.ok())
      return error(c.message());
    for (size_t r = 0; r < replies.size(); ++r)
      if (replies[r].contains("error"))
        return error("rank " + std::to_string(r) + ": " + replies[r]["error"].get<std::string>(),
                     !replies[r].value("capacity", false));
    run.prepared = std::make_pair(s.index, s.ranks);
  }
  std::vector<double> attention(static_cast<size_t>(s.ranks), 0.0), communication = attention, merge = attention;
  double total = 0.0;
  int64_t iterations = 0;
  for (auto _ : st) {
    if (const Status c = d.command({{"op", "step"}}, 0, s.ranks, &replies); !c.ok()) return error(c.message());
    double slowest = 0.0;
    for (size_t r = 0; r < replies.size(); ++r) {
      if (replies[r].contains("error")) return error("rank " + std::to_string(r) + ": " + replies[r]["error"].get<std::string>());
      const double a = replies[r].at("attention_s"), c = replies[r].at("communication_s"), m = replies[r].at("merge_s");
      attention[r] += a;
      communication[r] += c;
      merge[r] += m;
      slowest = std::max(slowest, a + c + m);
    }
    st.SetIterationTime(slowest);
    total += slowest;
    ++iterations;
  }
  if (iterations == 0) return;
  const auto mean = [&](double v) { return v / static_cast<double>(iterations); };
  double a_max = 0, c_max = 0, m_max = 0;
  for (int r = 0; r < s.ranks; ++r) {
    a_max = std::max(a_max, mean(attention[static_cast<size_t>(r)]));
    c_max = std::max(c_max, mean(communication[static_cast<size_t>(r)]));
    m_max = std::max(m_max, mean(merge[static_cast<size_t>(r)]));
    st.counters["r" + std::to_string(r) + "_attention_s"] = mean(attention[static_cast<size_t>(r)]);
    st.counters["r" + std::to_string(r) + "_communication_s"] = mean(communication[static_cast<size_t>(r)]);
  }
  st.counters["attention_s"] = a_max;
  st.counters["communication_s"] = c_max;
  st.counters["merge_s"] = m_max;
  st.counters["ranks"] = s.ranks;
  const int64_t tokens = int64_t{s.shape.batch} * s.shape.query_tokens;
  st.SetItemsProcessed(st.iterations() * tokens);
  st.counters["flops_per_second"] = benchmark::Counter(dcp_step_flops(s.shape) * static_cast<double>(st.iterations()),
                                                       benchmark::Counter::kIsRate);
  const double step = mean(total);
  if (s.ranks == 1) run.one_rank_time[s.index] = step;
  if (const auto it = run.one_rank_time.find(s.index); it != run.one_rank_time.end() && step > 0)
    st.counters["speedup_vs_1_gpu"] = it->second / step;
}

}  // namespace

std::string dcp_benchmark_name(int ranks, const SparseMqaShape& s) {
  return "dcp/ranks:" + std::to_string(ranks) + "/batch:" + std::to_string(s.batch) + "/q:" + std::to_string(s.query_tokens) +
         "/H:" + std::to_string(s.heads) + "/K:" + std::to_string(s.topk) + "/seq:" + std::to_string(s.seq_len);
}

double dcp_step_flops(const SparseMqaShape& s) { return sparse_mqa_flops(s); }

int run_dcp_sweep(const Sweep& sweep, const BackendChoice& choice) {
  constexpr int kExitOk = 0, kExitUsage = 2, kExitRuntime = 3;
  // The parent never initialises CUDA: its workers are forked from it. The backend is probed in a
  // child process.
  const BackendProbe probe = probe_backend(choice, /*isolate=*/true);
  if (!probe.ok) {
    std::fprintf(stderr, "mla-bench: %s\n", probe.error.c_str());
    return choice.kind == BackendChoice::Kind::kAuto ? kExitRuntime : kExitUsage;
  }
  std::string why;
  const bool nccl = nccl_available(&why);
  if (probe.on_gpu && !nccl) {
    std::fprintf(stderr, "mla-bench: sweep '%s' times NCCL between GPUs: the nccl transport is unavailable: %s\n",
                 sweep.name.c_str(), why.c_str());
    return kExitUsage;
  }
  const std::string transport = probe.on_gpu ? "nccl" : "socket";
  const int wanted = sweep.dcp_ranks.back();
  const int workers = probe.on_gpu ? std::min(wanted, probe.device_count) : wanted;
  if (workers < 1) {
    std::fprintf(stderr, "mla-bench: no GPU for the dcp sweep\n");
    return kExitRuntime;
  }
  std::vector<std::string> left_out;
  std::vector<DcpShape> shapes;
  for (size_t i = 0; i < sweep.dcp_shapes.size(); ++i)
    for (int r : sweep.dcp_ranks) {
      const DcpShape s{i, r, sweep.dcp_shapes[i]};
      if (r <= workers) shapes.push_back(s);
      else left_out.push_back(s.name());
    }
  if (!left_out.empty())
    std::fprintf(stderr, "mla-bench: %zu benchmarks need more than the %d GPUs visible and are not run (%s ... %s)\n",
                 left_out.size(), workers, left_out.front().c_str(), left_out.back().c_str());

  LocalLaunchOptions lo;
  lo.world = workers;
  if (probe.on_gpu) {
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    lo.devices = visible_device_ids(cvd ? std::optional<std::string>(cvd) : std::nullopt, probe.device_count);
    lo.devices.resize(static_cast<size_t>(workers));
  }
  const BackendChoice resolved = probe.resolved;
  RankProcesses procs = start_local_ranks(lo, [&](int rank, int, int fd) {
    Worker w(sweep, resolved, transport, rank, fd);
    return w.serve();
  });
  if (!procs.error.empty()) {
    std::fprintf(stderr, "mla-bench: starting the DCP workers: %s\n", procs.error.c_str());
    return kExitRuntime;
  }
  Driver driver(std::move(procs));
  Run run;
  run.driver = &driver;
  register_shapes(shapes, true, false, [](const DcpShape&) { return false; },
                  [&run](benchmark::State& st, const DcpShape& s) { run_one(st, run, s); });
  benchmark::AddCustomContext("mla_version", std::string(tool_version()) + " (git " + tool_git_revision() + ")");
  benchmark::AddCustomContext("mla_backend", probe.info.name);
  benchmark::AddCustomContext("mla_device", probe.info.device);
  if (!probe.info.runtime.empty()) benchmark::AddCustomContext("mla_runtime", probe.info.runtime);
  if (!probe.info.kernels.empty()) benchmark::AddCustomContext("mla_kernels", probe.info.kernels);
  benchmark::AddCustomContext("mla_sweep", sweep.name + " (" + sweep.source + ")");
  benchmark::AddCustomContext("mla_dcp_transport", transport);
  benchmark::AddCustomContext("mla_dcp_workers", std::to_string(workers) + (probe.on_gpu ? " processes, one per GPU"
                                                                                         : " processes, one per rank"));
  benchmark::AddCustomContext("mla_dcp_interleave", std::to_string(sweep.dcp_interleave));
  benchmark::AddCustomContext("mla_timing", probe.on_gpu ? "per rank: CUDA events around attention, communication and merge "
                                                           "on its stream; iteration = the slowest rank's sum"
                                                         : "per rank: std::chrono around each phase (host)");
  const size_t ran = benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  driver.stop();
  if (ran == 0) {
    std::fprintf(stderr, "mla-bench: no dcp benchmark ran (see the message above)\n");
    return kExitUsage;
  }
  if (run.errors > 0) {
    std::fprintf(stderr, "mla-bench: %d dcp benchmark(s) failed with a runtime error (see error_message above)\n",
                 run.errors);
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace mla::bench
