#include "apps/mla_bench/list_shapes.h"

#include <cmath>
#include <cstdio>

#include "apps/mla_bench/bench_attention_ops.h"
#include "apps/mla_bench/bench_cache_ops.h"
#include "apps/mla_bench/bench_common.h"
#include "apps/mla_bench/bench_dcp.h"
#include "lib/run/report.h"

namespace mla::bench {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written here

// A model value: an integer where it is one (every model here counts whole FLOPs and bytes).
json number(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9.0e15) return static_cast<int64_t>(x);
  return x;
}

json with_names(const std::string& name, const char* op) {
  return json{{"name", name}, {"run_name", name + kManualTimeSuffix}, {"op", op}};
}

json cache_entry(const CacheShape& s, const HostLimits& host) {
  json e = with_names(s.name(), s.op_name());
  switch (s.op) {
    case CacheOp::kPack: e["params"] = {{"block_size", s.block_size}, {"tokens", s.size}}; break;
    case CacheOp::kGather:
      e["params"] = {{"block_size", s.block_size}, {"seq_starts", s.seq_starts}, {"rows", s.size}};
      break;
    case CacheOp::kConvert: e["params"] = {{"block_size", s.block_size}, {"topk", s.topk}, {"rows", s.size}}; break;
  }
  e["items"] = s.items();
  e["bytes"] = s.bytes();
  e["flops"] = 0;
  e["label"] = s.label();
  e["host_capped"] = s.over_host_caps(host);
  return e;
}

json attention_entry(const AttentionShape& s, const Sweep& sweep) {
  json e = with_names(s.name(), s.op_name());
  switch (s.op) {
    case AttentionOp::kSparse: {
      const SparseMqaShape& sh = s.sparse;
      e["params"] = {{"block_size", sweep.sparse_block_size}, {"batch", sh.batch}, {"query_tokens", sh.query_tokens},
                     {"heads", sh.heads}, {"topk", sh.topk}, {"seq_len", sh.seq_len}};
      if (sh.splits > 0) e["params"]["splits"] = sh.splits;
      Rng rng = sparse_mqa_rng(sweep.seed, sh);
      const int64_t distinct = make_sparse_mqa_indices(sh, sweep.sparse_block_size, rng).distinct;
      const int64_t tokens = int64_t{sh.batch} * sh.query_tokens;
      const AttentionCost cost = sparse_mqa_cost(tokens, sh.heads, sh.topk, distinct);
      e["items"] = tokens;
      e["bytes"] = static_cast<int64_t>(cost.bytes);  // as the benchmark's counters take it
      e["flops"] = number(cost.flops);
      e["model"] = {{"distinct_entries", distinct}};
      break;
    }
    case AttentionOp::kDense: {
      const DenseMhaShape& sh = s.dense;
      const DenseMhaSeqlens seqlens = dense_mha_seqlens(sh);
      json q_lens = json::array(), k_lens = json::array();
      for (size_t r = 0; r + 1 < seqlens.cu_q.size(); ++r) {
        q_lens.push_back(seqlens.cu_q[r + 1] - seqlens.cu_q[r]);
        k_lens.push_back(seqlens.cu_k[r + 1] - seqlens.cu_k[r]);
      }
      e["params"] = {{"heads", sh.heads},
                     {"tokens", sh.tokens},
                     {"requests", sh.requests},
                     {"keys_per_request", sh.keys_per_request > 0 ? json(sh.keys_per_request) : json(nullptr)},
                     {"causal", sh.causal},
                     {"query_lens", q_lens},
                     {"key_lens", k_lens}};
      const AttentionCost cost =
          dense_mha_cost(seqlens.cu_q.data(), seqlens.cu_k.data(), sh.requests, sh.heads, sh.causal);
      e["items"] = sh.tokens;
      e["bytes"] = static_cast<int64_t>(cost.bytes);
      e["flops"] = number(cost.flops);
      e["model"] = {{"pairs", number(cost.pairs)}};
      break;
    }
    case AttentionOp::kForward:
    case AttentionOp::kRoute: {
      const bool route = s.op == AttentionOp::kRoute;
      const ForwardBatch& fb = route ? s.route.batch : s.forward;
      if (route) {
        // The route, its prefill length and the name of the other route's benchmark (null above
        // top-k, where only the sparse route is timed).
        e["params"] = {{"route", fb.force_sparse ? "sparse" : "dense"},
                       {"prefill_len", s.route.prefill_len},
                       {"prefills", s.route.prefills},
                       {"heads", fb.heads},
                       {"topk", fb.topk},
                       {"block_size", sweep.routes_block_size},
                       {"decode_threshold", fb.decode_threshold},
                       {"seq_lens", fb.seq_lens},
                       {"query_lens", fb.query_lens}};
        e["pair"] = s.route.prefill_len <= fb.topk ? json(route_name(!fb.force_sparse, s.route)) : json(nullptr);
      } else {
        e["params"] = {{"batch", fb.name},           {"heads", fb.heads},
                       {"topk", fb.topk},            {"block_size", sweep.forward_block_size},
                       {"decode_threshold", fb.decode_threshold}, {"seq_lens", fb.seq_lens},
                       {"query_lens", fb.query_lens}};
      }
      const ForwardFlops f = forward_flops_model(fb);
      int64_t tokens = 0;
      for (int32_t q : fb.query_lens) tokens += q;
      e["items"] = tokens;
      e["bytes"] = nullptr;
      e["flops"] = number(f.total());
      e["model"] = {{"sparse_attention_flops", number(f.sparse_attention)},
                    {"dense_attention_flops", number(f.dense_attention)},
                    {"gemm_flops", number(f.gemm)},
                    {"sparse_tokens", f.sparse_tokens},
                    {"dense_tokens", f.dense_tokens}};
      break;
    }
  }
  e["host_capped"] = s.over_host_caps(sweep.host);
  return e;
}

}  // namespace

json shapes_json(const Sweep& sweep) {
  json shapes = json::array();
  for (const CacheShape& s : cache_shapes(sweep)) shapes.push_back(cache_entry(s, sweep.host));
  for (const AttentionShape& s : attention_shapes(sweep)) shapes.push_back(attention_entry(s, sweep));
  for (const SparseMqaShape& sh : sweep.dcp_shapes)
    for (int32_t ranks : sweep.dcp_ranks) {
      json e = with_names(dcp_benchmark_name(ranks, sh), "dcp");
      e["params"] = {{"block_size", sweep.dcp_block_size}, {"interleave", sweep.dcp_interleave}, {"ranks", ranks},
                     {"batch", sh.batch}, {"query_tokens", sh.query_tokens}, {"heads", sh.heads},
                     {"topk", sh.topk}, {"seq_len", sh.seq_len}};
      e["items"] = int64_t{sh.batch} * sh.query_tokens;
      e["bytes"] = nullptr;
      e["flops"] = number(dcp_step_flops(sh));
      e["host_capped"] = false;
      shapes.push_back(e);
    }
  return json{
      {"schema", kShapesSchema},
      {"producer", {{"tool", "mla-bench"}, {"version", tool_version()}, {"git_revision", tool_git_revision()}}},
      {"sweep",
       {{"name", sweep.name},
        {"source", sweep.source},
        {"description", sweep.description},
        {"seed", sweep.seed},
        {"repetitions", sweep.repetitions},
        {"min_time_s", sweep.min_time_s},
        {"host",
         {{"max_tokens", sweep.host.max_tokens},
          {"max_convert_elements", sweep.host.max_convert_elements},
          {"max_attention_flops", sweep.host.max_attention_flops}}}}},
      {"shapes", shapes},
  };
}

int list_shapes(const Sweep& sweep, bool as_json) {
  const json doc = shapes_json(sweep);
  if (as_json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  std::printf("%-56s %16s %16s\n", "benchmark", "bytes", "FLOPs");
  for (const json& s : doc["shapes"]) {
    const std::string bytes = s["bytes"].is_null() ? "-" : s["bytes"].dump();
    std::printf("%-56s %16s %16s%s\n", s["name"].get<std::string>().c_str(), bytes.c_str(), s["flops"].dump().c_str(),
                s["host_capped"].get<bool>() ? "  (host: over the sweep's caps)" : "");
  }
  return 0;
}

}  // namespace mla::bench
