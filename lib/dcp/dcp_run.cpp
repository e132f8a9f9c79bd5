#include "lib/dcp/dcp_run.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

#include "lib/batch/attention_data.h"
#include "lib/batch/batch.h"
#include "lib/batch/cache_data.h"
#include "kernels/common/mla_dims.h"
#include "lib/checks/check_context.h"
#include "lib/checks/compare.h"
#include "lib/checks/dcp_parts.h"
#include "lib/checks/kv_cache_spec.h"
#include "lib/dcp/merge_tree.h"
#include "lib/dcp/shard.h"
#include "lib/run/hash.h"

namespace mla {

namespace {

using nlohmann::json;

CheckResult verdict_only(const std::string& id, Verdict v, const std::string& reason) {
  CheckResult r;
  r.id = id;
  r.check = "dcp";
  r.verdict = v;
  r.reason = reason;
  return r;
}

// A rank's word at a meeting: its error (empty: none; unsupported: the backend lacks an
// operation, which is a SKIP) and what it has to show.
struct RankWord {
  std::string error;
  bool unsupported = false;
  std::string device;
  std::string hash;
};

Status meet(const DcpRunContext& ctx, const RankWord& mine, std::vector<RankWord>* all) {
  const json j{{"error", mine.error}, {"unsupported", mine.unsupported}, {"device", mine.device}, {"hash", mine.hash}};
  std::vector<std::string> frames;
  MLA_RETURN_IF_ERROR(ctx.exchange.all_gather(j.dump(), ctx.timeout_s, &frames));
  all->clear();
  for (size_t r = 0; r < frames.size(); ++r) {
    RankWord w;
    try {
      const json f = json::parse(frames[r]);
      w.error = f.at("error").get<std::string>();
      w.unsupported = f.at("unsupported").get<bool>();
      w.device = f.at("device").get<std::string>();
      w.hash = f.at("hash").get<std::string>();
    } catch (const std::exception& e) {
      return Status::error("rank " + std::to_string(r) + " sent an unreadable message: " + e.what());
    }
    all->push_back(std::move(w));
  }
  return Status();
}

// The first rank's error of a meeting, and whether every error there is "unsupported".
bool any_error(const std::vector<RankWord>& words, std::string* reason, bool* all_unsupported) {
  bool any = false;
  *all_unsupported = true;
  for (size_t r = 0; r < words.size(); ++r) {
    if (words[r].error.empty()) continue;
    if (!any) *reason = "rank " + std::to_string(r) + ": " + words[r].error;
    any = true;
    *all_unsupported = *all_unsupported && words[r].unsupported;
  }
  return any;
}

std::vector<int32_t> float_bits(const std::vector<float>& v) {
  std::vector<int32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

}  // namespace

std::string dcp_distributed_id(int world) { return "dcp_distributed/" + std::to_string(world) + "_ranks"; }
std::string dcp_distributed_simulated_id(int world) { return dcp_distributed_id(world) + "/vs_simulated"; }

std::string fnv1a_hex(const void* data, std::size_t bytes, uint64_t seed) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a64(data, bytes, seed)));
  return buf;
}

ScenarioResult run_distributed_dcp(const Scenario& s, const DcpRunContext& ctx) {
  const int W = ctx.exchange.size(), rank = ctx.exchange.rank();
  const auto t0 = std::chrono::steady_clock::now();
  ScenarioResult res;
  res.name = s.name;
  res.file = s.file;
  const std::string id = dcp_distributed_id(W), sim_id = dcp_distributed_simulated_id(W);
  const auto finish = [&](std::vector<CheckResult> checks) {
    if (rank == 0) res.checks = std::move(checks);
    res.verdict = scenario_verdict(res);
    res.duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  };
  const auto both = [&](Verdict v, const std::string& reason) {
    return finish({verdict_only(id, v, reason), verdict_only(sim_id, v, reason)});
  };
  // Decided from the scenario and the backend's kind alone: every rank takes the same branch.
  if (ctx.backend.native_device().kind == NativeDevice::Kind::kHost && s.gpu_only())
    return both(Verdict::kSkip, std::string("tagged ") + kGpuOnlyTag + ": too large for the host backend; run it with --backend cuda");
  if (canonical_sparse_cache_dtype(s.cache.dtype).value_or("") != "fp8_ds_mla")
    return both(Verdict::kSkip, "cache dtype '" + s.cache.dtype + "' is not fp8_ds_mla; the kernels under test read and write fp8_ds_mla");
  if (!ctx.backend.supports_attention())
    return both(Verdict::kSkip, "the " + ctx.backend.info().name + " backend has no attention kernels");

  // 1. This rank's partial, alone on its device.
  RankWord mine;
  mine.device = ctx.backend.info().device;
  std::optional<Batch> batch;
  std::optional<CacheData> cache;
  std::optional<AttentionData> data;
  std::optional<AttentionCheckContext> actx;
  BufferSet bufs(ctx.backend);
  DcpPartial part;
  try {
    batch.emplace(materialise(s));
    cache.emplace(make_cache_data(s, *batch, /*large_tiles=*/false));
    data.emplace(make_attention_data(s, *batch, *cache));
    actx.emplace(AttentionCheckContext{ctx.backend, s, *batch, Injection::kNone, *cache, *data, {}});
    part = dcp_rank_partial(*actx, bufs, W, rank);
  } catch (const UnsupportedError& e) {
    mine.error = e.what();
    mine.unsupported = true;
  } catch (const std::exception& e) {
    mine.error = e.what();
  }
  std::vector<RankWord> words;
  std::string reason;
  bool unsupported = false;
  if (const Status met = meet(ctx, mine, &words); !met.ok()) return both(Verdict::kError, met.message());
  if (any_error(words, &reason, &unsupported)) return both(unsupported ? Verdict::kSkip : Verdict::kError, reason);
  std::string devices_differ;
  for (size_t r = 1; r < words.size(); ++r)
    if (words[r].device != words[0].device)
      devices_differ = "rank 0 runs on " + words[0].device + ", rank " + std::to_string(r) + " on " + words[r].device;

  // 2. Every rank's partial on every rank, merged there.
  const int64_t rows = batch->num_tokens * data->heads;
  const size_t out_bytes = static_cast<size_t>(rows) * kDc * sizeof(bf16_t), lse_bytes = static_cast<size_t>(rows) * sizeof(float);
  DcpPartial merged;
  mine = RankWord{};
  try {
    const bf16_t* send_out = bufs.input(part.out_lat);
    const float* send_lse = bufs.input(part.lse);
    GuardedBuffer& recv_out = bufs.output<bf16_t>(static_cast<size_t>(W) * rows * kDc, kPoisonByte);
    GuardedBuffer& recv_lse = bufs.output<float>(static_cast<size_t>(W) * rows, kPoisonByte);
    must(ctx.comm.all_gather(ctx.backend, send_out, recv_out.as<bf16_t>(), out_bytes));
    must(ctx.comm.all_gather(ctx.backend, send_lse, recv_lse.as<float>(), lse_bytes));
    std::vector<bf16_t*> outs;
    std::vector<float*> lses;
    for (int r = 0; r < W; ++r) {
      outs.push_back(recv_out.as<bf16_t>() + static_cast<size_t>(r) * rows * kDc);
      lses.push_back(recv_lse.as<float>() + static_cast<size_t>(r) * rows);
    }
    must(merge_dcp_partials(ctx.backend, outs, lses, rows));
    must(ctx.backend.synchronize());
    must(recv_out.download(merged.out_lat));
    must(recv_lse.download(merged.lse));
    merged.out_lat.resize(static_cast<size_t>(rows) * kDc);
    merged.lse.resize(static_cast<size_t>(rows));
    mine.hash = fnv1a_hex(merged.out_lat.data(), out_bytes, fnv1a64(merged.lse.data(), lse_bytes));
  } catch (const UnsupportedError& e) {
    mine.error = e.what();
    mine.unsupported = true;
  } catch (const std::exception& e) {
    mine.error = e.what();
  }
  if (const Status met = meet(ctx, mine, &words); !met.ok()) return both(Verdict::kError, met.message());
  if (any_error(words, &reason, &unsupported)) return both(unsupported ? Verdict::kSkip : Verdict::kError, reason);
  if (rank != 0) return finish({});

  // 3. Rank 0 judges.
  std::vector<std::string> disagreeing;
  for (size_t r = 1; r < words.size(); ++r)
    if (words[r].hash != words[0].hash) disagreeing.push_back(std::to_string(r));
  const DcpOwnership own = dcp_ownership(batch->seq_lens, W, s.attention.dcp_interleave);
  CheckResult main = timed_check(id, "dcp", [&] {
    CheckResult r = judge_dcp_result(*actx, W, merged, &bufs);
    r.metrics.extra["ranks_disagreeing"] = static_cast<double>(disagreeing.size());
    r.metrics.extra["rank_requests_without_positions"] = static_cast<double>(own.rank_requests_without_positions);
    r.metrics.extra["requests_shorter_than_interleave"] = static_cast<double>(own.requests_shorter_than_interleave);
    if (!disagreeing.empty() && r.verdict == Verdict::kPass) {
      r.verdict = Verdict::kFail;
      std::string list;
      for (const auto& d : disagreeing) list += (list.empty() ? "" : ", ") + d;
      r.reason = "the merged result of rank(s) " + list + " differs from rank 0's bit for bit";
    }
    return r;
  });
  main.notes.push_back("transport: " + ctx.comm.describe() + ", " + std::to_string(W) + " ranks");
  CheckResult sim = timed_check(sim_id, "dcp", [&] {
    if (!devices_differ.empty())
      return verdict_only("", Verdict::kSkip, "the ranks run on different devices (" + devices_differ +
                                                   "): the simulated run on rank 0's device need not match bit for bit");
    BufferSet sim_bufs(ctx.backend);
    const DcpPartial want = simulate_dcp(*actx, sim_bufs, W);
    CheckResult r;
    r.metrics = compare_bf16_exact(want.out_lat, merged.out_lat);
    const Metrics l = compare_int32_exact(float_bits(want.lse), float_bits(merged.lse));
    r.metrics.elements += l.elements;
    r.metrics.mismatches += l.mismatches;
    r.metrics.extra["lse_elements"] = static_cast<double>(l.elements);
    r.metrics.extra["lse_mismatches"] = static_cast<double>(l.mismatches);
    if (l.mismatches > 0) r.metrics.bit_exact = false;
    sim_bufs.audit(r.metrics);
    finalize(r);
    return r;
  });
  return finish({main, sim});
}

}  // namespace mla
