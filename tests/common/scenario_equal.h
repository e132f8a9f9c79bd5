// Field-by-field comparison of two Scenarios for the tests (the writer's round trip, the fuzz
// grammar's determinism): every field load_scenario fills, except `file` (where it was loaded
// from) and `attention_checks_removed` (a run-time choice of mla-check --check). Returns "" when
// equal, else the first field that differs.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "lib/scenario/scenario.h"

namespace mla::test {

namespace detail {

template <typename T>
std::string show(const T& v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

template <typename T>
std::string show(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + show(v[i]);
  return s + "]";
}

// Optional values compare as (present, value); rows of int32 as their flattened rows.
inline std::vector<std::vector<int32_t>> rows_or_empty(const std::optional<std::vector<std::vector<int32_t>>>& r) {
  return r ? *r : std::vector<std::vector<int32_t>>{};
}

template <typename T>
std::string show(const std::vector<std::vector<T>>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + show(v[i]);
  return s + "]";
}

class Diff {
 public:
  template <typename T>
  Diff& field(const std::string& name, const T& a, const T& b) {
    if (first_.empty() && !(a == b)) first_ = name + ": " + show(a) + " != " + show(b);
    return *this;
  }
  Diff& tolerance(const std::string& name, const Tolerance& a, const Tolerance& b) {
    return field(name + ".abs", a.abs, b.abs).field(name + ".rel", a.rel, b.rel).field(name + ".cos", a.cos, b.cos);
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

}  // namespace detail

inline std::string scenario_difference(const Scenario& a, const Scenario& b) {
  detail::Diff d;
  d.field("name", a.name, b.name).field("description", a.description, b.description).field("tags", a.tags, b.tags);
  d.field("seed", a.seed, b.seed);
  d.field("model.heads", a.model.heads, b.model.heads).field("model.topk", a.model.topk, b.model.topk);
  d.field("model.block_size", a.model.block_size, b.model.block_size).field("model.scale", a.model.scale, b.model.scale);
  d.field("cache.dtype", a.cache.dtype, b.cache.dtype).field("cache.num_blocks", a.cache.num_blocks, b.cache.num_blocks);
  d.field("cache.spare_blocks", a.cache.spare_blocks, b.cache.spare_blocks);
  d.field("cache.page_order", std::string(to_string(a.cache.page_order)), std::string(to_string(b.cache.page_order)));
  d.field("cache.page_padding_bytes", a.cache.page_padding_bytes, b.cache.page_padding_bytes);
  d.field("block_table.extra_columns", a.block_table.extra_columns, b.block_table.extra_columns);
  d.field("block_table.stride_padding", a.block_table.stride_padding, b.block_table.stride_padding);
  d.field("block_table.rows (present)", a.block_table.rows.has_value(), b.block_table.rows.has_value());
  d.field("block_table.rows", detail::rows_or_empty(a.block_table.rows), detail::rows_or_empty(b.block_table.rows));
  d.field("cache.fixed_scales.size", a.cache.fixed_scales.size(), b.cache.fixed_scales.size());
  for (size_t i = 0; i < a.cache.fixed_scales.size() && i < b.cache.fixed_scales.size(); ++i) {
    const FixedScale &f = a.cache.fixed_scales[i], &g = b.cache.fixed_scales[i];
    const std::string p = "cache.fixed_scales[" + std::to_string(i) + "].";
    d.field(p + "request", f.request, g.request).field(p + "position", f.position, g.position);
    d.field(p + "tile", f.tile, g.tile).field(p + "scale", f.scale, g.scale);
  }
  d.field("batch.seq_lens", a.batch.seq_lens, b.batch.seq_lens).field("batch.query_lens", a.batch.query_lens, b.batch.query_lens);
  d.field("batch.decode_threshold", a.batch.decode_threshold, b.batch.decode_threshold);
  d.field("batch.num_decodes", a.batch.num_decodes.value_or(-1), b.batch.num_decodes.value_or(-1));
  d.field("generator (present)", a.generator.has_value(), b.generator.has_value());
  if (a.generator && b.generator) {
    const BatchGenerator &g = *a.generator, &h = *b.generator;
    d.field("generator.num_requests", std::vector<int32_t>{g.num_requests_min, g.num_requests_max},
            std::vector<int32_t>{h.num_requests_min, h.num_requests_max});
    d.field("generator.num_decodes", std::vector<int32_t>{g.num_decodes_min, g.num_decodes_max},
            std::vector<int32_t>{h.num_decodes_min, h.num_decodes_max});
    d.field("generator.decode_query_len", g.decode_query_len, h.decode_query_len);
    d.field("generator.seq_len", std::vector<int32_t>{g.seq_len_min, g.seq_len_max},
            std::vector<int32_t>{h.seq_len_min, h.seq_len_max});
    d.field("generator.prefill_query_len", std::vector<int32_t>{g.prefill_query_len_min, g.prefill_query_len_max},
            std::vector<int32_t>{h.prefill_query_len_min, h.prefill_query_len_max});
    d.field("generator.decode_threshold", g.decode_threshold, h.decode_threshold);
  }
  d.field("gathers.size", a.gathers.size(), b.gathers.size());
  for (size_t i = 0; i < a.gathers.size() && i < b.gathers.size(); ++i) {
    const GatherCase &g = a.gathers[i], &h = b.gathers[i];
    const std::string p = "gathers[" + std::to_string(i) + "].";
    d.field(p + "name", g.name, h.name).field(p + "workspace_starts", g.workspace_starts, h.workspace_starts);
    d.field(p + "seq_starts (present)", g.seq_starts.has_value(), h.seq_starts.has_value());
    if (g.seq_starts && h.seq_starts) d.field(p + "seq_starts", *g.seq_starts, *h.seq_starts);
    d.field(p + "num_rows", g.num_rows, h.num_rows);
    d.field(p + "chunked_context_rows", g.chunked_context_rows.value_or(-1), h.chunked_context_rows.value_or(-1));
  }
  d.field("converts.size", a.converts.size(), b.converts.size());
  for (size_t i = 0; i < a.converts.size() && i < b.converts.size(); ++i) {
    const ConvertCase &c = a.converts[i], &e = b.converts[i];
    const std::string p = "converts[" + std::to_string(i) + "].";
    d.field(p + "name", c.name, e.name).field(p + "rows", c.rows == ConvertRows::kAll, e.rows == ConvertRows::kAll);
    d.field(p + "invalid.minus_one", c.invalid.minus_one, e.invalid.minus_one);
    d.field(p + "invalid.int_min", c.invalid.int_min, e.invalid.int_min);
    d.field(p + "invalid.large_positive", c.invalid.large_positive, e.invalid.large_positive);
    d.field(p + "invalid.past_table", c.invalid.past_table, e.invalid.past_table);
    d.field(p + "invalid.negative_block", c.invalid.negative_block, e.invalid.negative_block);
    d.field(p + "prefill_workspace", c.prefill_workspace, e.prefill_workspace);
    d.field(p + "dcp_world_size", c.dcp_world_size, e.dcp_world_size).field(p + "dcp_interleave", c.dcp_interleave, e.dcp_interleave);
    d.field(p + "req_id (present)", c.req_id.has_value(), e.req_id.has_value());
    if (c.req_id && e.req_id) d.field(p + "req_id", *c.req_id, *e.req_id);
    d.field(p + "indices (present)", c.indices.has_value(), e.indices.has_value());
    d.field(p + "indices", detail::rows_or_empty(c.indices), detail::rows_or_empty(e.indices));
  }
  std::vector<std::string> ca, cb;
  for (CheckKind k : a.checks) ca.push_back(to_string(k));
  for (CheckKind k : b.checks) cb.push_back(to_string(k));
  d.field("checks", ca, cb);
  const AttentionConfig &x = a.attention, &y = b.attention;
  d.field("attention.force_sparse", x.force_sparse, y.force_sparse).field("attention.workspace_rows", x.workspace_rows, y.workspace_rows);
  d.field("attention.dcp_world_size", x.dcp_world_size, y.dcp_world_size).field("attention.dcp_interleave", x.dcp_interleave, y.dcp_interleave);
  d.field("attention.drift_layers", x.drift_layers, y.drift_layers);
  d.field("attention.topk_positions (present)", x.topk_positions.has_value(), y.topk_positions.has_value());
  d.field("attention.topk_positions", detail::rows_or_empty(x.topk_positions), detail::rows_or_empty(y.topk_positions));
  d.field("attention.sparse_mqa_slots (present)", x.sparse_mqa_slots.has_value(), y.sparse_mqa_slots.has_value());
  d.field("attention.sparse_mqa_slots", detail::rows_or_empty(x.sparse_mqa_slots), detail::rows_or_empty(y.sparse_mqa_slots));
  const AttentionTolerances &t = x.tolerances, &u = y.tolerances;
  d.tolerance("tolerances.sparse_mqa", t.sparse_mqa, u.sparse_mqa).tolerance("tolerances.sparse_lse", t.sparse_lse, u.sparse_lse);
  d.tolerance("tolerances.dense_mha", t.dense_mha, u.dense_mha).tolerance("tolerances.dense_lse", t.dense_lse, u.dense_lse);
  d.tolerance("tolerances.forward", t.forward, u.forward);
  d.tolerance("tolerances.equivalence_from_cache", t.equivalence_from_cache, u.equivalence_from_cache);
  d.tolerance("tolerances.equivalence_bf16", t.equivalence_bf16, u.equivalence_bf16).tolerance("tolerances.dcp", t.dcp, u.dcp);
  return d.first();
}

}  // namespace mla::test
