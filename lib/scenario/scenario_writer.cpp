#include "lib/scenario/scenario_writer.h"

#include <cstdio>
#include <fstream>

#include <unistd.h>

namespace mla {

using nlohmann::ordered_json;

namespace {

bool same(const Tolerance& a, const Tolerance& b) { return a.abs == b.abs && a.rel == b.rel && a.cos == b.cos; }

ordered_json tolerance_json(const Tolerance& t, const Tolerance& def) {
  ordered_json j = ordered_json::object();
  if (t.abs != def.abs) j["abs"] = t.abs;
  if (t.rel != def.rel) j["rel"] = t.rel;
  if (t.cos != def.cos) j["cos"] = t.cos;
  return j;
}

bool same_batch(const BatchSpec& a, const BatchSpec& b) {
  return a.seq_lens == b.seq_lens && a.query_lens == b.query_lens && a.decode_threshold == b.decode_threshold;
}

ordered_json batch_json(const Scenario& s) {
  if (s.generator && same_batch(generate_batch(*s.generator, s.seed), s.batch)) {
    const BatchGenerator& g = *s.generator;
    ordered_json gen;
    gen["num_requests"] = {g.num_requests_min, g.num_requests_max};
    gen["num_decodes"] = {g.num_decodes_min, g.num_decodes_max};
    gen["decode_query_len"] = g.decode_query_len;
    gen["seq_len"] = {g.seq_len_min, g.seq_len_max};
    gen["prefill_query_len"] = {g.prefill_query_len_min, g.prefill_query_len_max};
    gen["decode_threshold"] = g.decode_threshold;
    return ordered_json{{"generate", gen}};
  }
  ordered_json b;
  b["seq_lens"] = s.batch.seq_lens;
  b["query_lens"] = s.batch.query_lens;
  if (s.batch.decode_threshold != BatchSpec{}.decode_threshold) b["decode_threshold"] = s.batch.decode_threshold;
  if (s.batch.num_decodes) b["num_decodes"] = *s.batch.num_decodes;
  return b;
}

ordered_json gather_json(const GatherCase& g) {
  ordered_json j;
  j["name"] = g.name;
  if (g.chunked_context_rows) {
    j["chunked_context"] = {{"chunk_rows", *g.chunked_context_rows}};
    return j;
  }
  j["workspace_starts"] = g.workspace_starts;
  if (g.seq_starts) j["seq_starts"] = *g.seq_starts;
  j["num_rows"] = g.num_rows;
  return j;
}

ordered_json convert_json(const ConvertCase& c) {
  ordered_json j;
  j["name"] = c.name;
  j["rows"] = c.rows == ConvertRows::kDecode ? "decode" : "all";
  ordered_json inv = ordered_json::object();
  const std::pair<const char*, double> fractions[] = {{"minus_one", c.invalid.minus_one},
                                                      {"int_min", c.invalid.int_min},
                                                      {"large_positive", c.invalid.large_positive},
                                                      {"past_table", c.invalid.past_table},
                                                      {"negative_block", c.invalid.negative_block}};
  for (const auto& [key, value] : fractions)
    if (value != 0.0) inv[key] = value;
  if (!inv.empty()) j["invalid"] = inv;
  if (c.prefill_workspace) j["prefill_workspace"] = true;
  if (c.dcp_world_size != 1 || c.dcp_interleave != 1)
    j["dcp"] = {{"world_size", c.dcp_world_size}, {"interleave", c.dcp_interleave}};
  if (c.req_id) j["req_id"] = *c.req_id;
  if (c.indices) j["indices"] = *c.indices;
  return j;
}

ordered_json attention_json(const AttentionConfig& a) {
  const AttentionConfig def;
  ordered_json j = ordered_json::object();
  if (a.force_sparse != def.force_sparse) j["force_sparse"] = a.force_sparse;
  if (a.workspace_rows != def.workspace_rows) j["workspace_rows"] = a.workspace_rows;
  if (a.dcp_world_size != def.dcp_world_size || a.dcp_interleave != def.dcp_interleave)
    j["dcp"] = {{"world_size", a.dcp_world_size}, {"interleave", a.dcp_interleave}};
  if (a.drift_layers != def.drift_layers) j["drift"] = {{"layers", a.drift_layers}};
  const AttentionTolerances& t = a.tolerances;
  const AttentionTolerances& d = def.tolerances;
  const std::tuple<const char*, const Tolerance*, const Tolerance*> fields[] = {
      {"sparse_mqa", &t.sparse_mqa, &d.sparse_mqa},
      {"sparse_lse", &t.sparse_lse, &d.sparse_lse},
      {"dense_mha", &t.dense_mha, &d.dense_mha},
      {"dense_lse", &t.dense_lse, &d.dense_lse},
      {"forward", &t.forward, &d.forward},
      {"equivalence_from_cache", &t.equivalence_from_cache, &d.equivalence_from_cache},
      {"equivalence_bf16", &t.equivalence_bf16, &d.equivalence_bf16},
      {"dcp", &t.dcp, &d.dcp}};
  ordered_json tol = ordered_json::object();
  for (const auto& [key, value, dflt] : fields)
    if (!same(*value, *dflt)) tol[key] = tolerance_json(*value, *dflt);
  if (!tol.empty()) j["tolerances"] = tol;
  if (a.topk_positions) j["topk_positions"] = *a.topk_positions;
  if (a.sparse_mqa_slots) j["sparse_mqa_slots"] = *a.sparse_mqa_slots;
  return j;
}

}  // namespace

ordered_json scenario_to_json(const Scenario& s) {
  ordered_json j;
  j["schema"] = kScenarioSchema;
  j["name"] = s.name;
  if (!s.description.empty()) j["description"] = s.description;
  if (!s.tags.empty()) j["tags"] = s.tags;
  j["seed"] = s.seed;

  ordered_json model;
  model["heads"] = s.model.heads;
  model["topk"] = s.model.topk;
  model["block_size"] = s.model.block_size;
  if (s.model.scale != ModelDims{}.scale) model["scale"] = s.model.scale;
  j["model"] = model;

  const CacheConfig def_cache;
  ordered_json cache;
  if (s.cache.dtype != def_cache.dtype) cache["dtype"] = s.cache.dtype;
  const bool automatic =
      s.cache.num_blocks == 0 ||
      s.cache.num_blocks == blocks_needed(s.batch, s.model.block_size) + s.cache.spare_blocks;
  if (!automatic) cache["num_blocks"] = s.cache.num_blocks;
  if (automatic && s.cache.spare_blocks != def_cache.spare_blocks) cache["spare_blocks"] = s.cache.spare_blocks;
  if (!automatic) cache["spare_blocks"] = s.cache.spare_blocks;  // kept: it is part of the Scenario
  if (s.cache.page_order != def_cache.page_order) cache["page_order"] = to_string(s.cache.page_order);
  if (s.cache.page_padding_bytes != def_cache.page_padding_bytes)
    cache["page_padding_bytes"] = s.cache.page_padding_bytes;
  if (!s.cache.fixed_scales.empty()) {
    ordered_json scales = ordered_json::array();
    for (const FixedScale& f : s.cache.fixed_scales)
      scales.push_back({{"request", f.request}, {"position", f.position}, {"tile", f.tile}, {"scale", f.scale}});
    cache["fixed_scales"] = scales;
  }
  if (!cache.empty()) j["cache"] = cache;

  const BlockTableConfig def_table;
  ordered_json table;
  if (s.block_table.extra_columns != def_table.extra_columns) table["extra_columns"] = s.block_table.extra_columns;
  if (s.block_table.stride_padding != def_table.stride_padding) table["stride_padding"] = s.block_table.stride_padding;
  if (s.block_table.rows) table["rows"] = *s.block_table.rows;
  if (!table.empty()) j["block_table"] = table;

  j["batch"] = batch_json(s);
  if (!s.gathers.empty()) {
    ordered_json gathers = ordered_json::array();
    for (const GatherCase& g : s.gathers) gathers.push_back(gather_json(g));
    j["gather"] = gathers;
  }
  if (!s.converts.empty()) {
    ordered_json converts = ordered_json::array();
    for (const ConvertCase& c : s.converts) converts.push_back(convert_json(c));
    j["convert"] = converts;
  }
  ordered_json checks = ordered_json::array();
  for (CheckKind k : s.checks) checks.push_back(to_string(k));
  j["checks"] = checks;
  const ordered_json attention = attention_json(s.attention);
  if (!attention.empty()) j["attention"] = attention;
  return j;
}

std::string scenario_to_text(const Scenario& s) { return scenario_to_json(s).dump(2) + "\n"; }

Status write_scenario_file(const std::string& path, const Scenario& s) {
  if (auto err = validate_scenario(s))
    return Status::error("cannot write scenario '" + s.name + "': " + err->json_path + ": " + err->problem);
  const std::string text = scenario_to_text(s);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error("cannot write scenario: cannot open '" + tmp + "' for writing");
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::error("cannot write scenario: write to '" + tmp + "' failed");
    }
  }
  // validate_scenario covers the rules between fields; the loader also holds each field to its own
  // rules (names, ranges, fractions): a file it refuses is not written.
  const auto loaded = load_scenario(tmp);
  if (const auto* err = std::get_if<ScenarioError>(&loaded)) {
    std::remove(tmp.c_str());
    return Status::error("cannot write scenario '" + s.name + "': the file would not load: at " + err->json_path +
                         ": " + err->problem);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error("cannot write scenario: rename to '" + path + "' failed");
  }
  return Status();
}

}  // namespace mla
