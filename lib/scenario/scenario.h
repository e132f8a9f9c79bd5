// A scenario: one regression case as data (docs/scenarios.md is the file format). load_scenario()
// validates a JSON file against scenarios/schema/scenario.schema.json (compiled in), then reads it
// and applies the rules between fields; every error names the file, the JSON pointer and the
// problem. The parsed Scenario is complete: defaults are filled in and a generated batch is
// resolved to explicit seq_lens / query_lens, so everything downstream is a pure function of it.
// Pinned values (an explicit block table, top-k indices, req_id rows, a decode count, tile
// scales) replace what would otherwise be drawn from the seed, and are used exactly as written.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kernels/common/bf16.h"
#include "lib/batch/batch_spec.h"
#include "lib/scenario/tolerance.h"

namespace mla {

// The "schema" value a scenario file may declare; any other value is refused.
inline constexpr const char* kScenarioSchema = "mla-scenario/1";

enum class PageOrder { kContiguous, kShuffled, kReversed };
const char* to_string(PageOrder o);
std::optional<PageOrder> page_order_from_string(const std::string& s);

// The checks a scenario can ask for (DESIGN.md).
enum class CheckKind {
  kPack, kGather, kConvert, kLayout,                            // cache path (docs/semantics.md §1-§3)
  kSparseMqa, kDenseMha, kForward, kEquivalence, kDcp, kDeterminism,  // attention (docs/semantics.md §4-§5)
  kDrift,                                                       // both routes through a layer stack (docs/drift.md)
  kMerge,                                                       // the LSE merge's edge rows (docs/semantics.md §4.2)
};
inline constexpr CheckKind kLastCheckKind = CheckKind::kMerge;  // for iterating over all
const char* to_string(CheckKind k);
std::optional<CheckKind> check_kind_from_string(const std::string& s);
// Every check's name, in enum order, joined with ", " (for error messages).
std::string check_kind_names();
bool is_attention_check(CheckKind k);  // docs/semantics.md §4-§5 (the others are the cache path's)

// Rows of int32 values pinned by a file (top-k indices, block-table rows); a row may be shorter
// than the width it fills, the rest is -1.
using IndexRows = std::vector<std::vector<int32_t>>;

struct ModelDims {
  int32_t heads = 128;       // H on this rank
  int32_t topk = 128;        // K
  int32_t block_size = 64;   // B, tokens per page (any B >= 1)
  double scale = 1.0 / std::sqrt(192.0);  // softmax scale
};

// A pinned quantization scale: tile `tile` (values [128 tile, 128 tile + 128)) of the latent of
// position `position` of request `request` is scaled so that the pack's rule (docs/semantics.md
// §1.1: max(amax / 448, FLT_MIN) in fp32) gives exactly `scale`.
struct FixedScale {
  int32_t request = 0;
  int32_t position = 0;
  int32_t tile = 0;
  float scale = 0.0f;
};

struct CacheConfig {
  std::string dtype = "fp8_ds_mla";  // as requested; canonicalised by the layout rules
  int64_t num_blocks = 0;            // resolved: blocks in the pool (>= what the batch needs)
  int64_t spare_blocks = 4;          // unused pages (NaN-filled) added when num_blocks is automatic
  PageOrder page_order = PageOrder::kShuffled;
  int64_t page_padding_bytes = 0;    // page stride = block_size * 656 + padding (multiple of 16)
  std::vector<FixedScale> fixed_scales;
};

struct BlockTableConfig {
  int32_t extra_columns = 1;   // columns past the widest request, filled with -1
  int32_t stride_padding = 0;  // row stride = width + stride_padding
  // Pinned: request r's physical pages, column by column (instead of handing out pages in
  // page_order). Entries inside the request's pages are distinct pages of the pool; entries past
  // them are any int32 (negative: no page). Shorter rows are padded with -1.
  std::optional<IndexRows> rows;
};

// One gather call (docs/semantics.md §2): explicit starts over the batch's requests, or the chunked-context
// gathers of dense prefill (one call per chunk, every request's chunk i starting at i * chunk_rows).
struct GatherCase {
  std::string name;
  std::vector<int32_t> workspace_starts;             // [num_reqs]
  std::optional<std::vector<int32_t>> seq_starts;    // [num_reqs]
  int64_t num_rows = 0;
  std::optional<int64_t> chunked_context_rows;       // set: the case is chunked context instead
};

// The mix of invalid entries written over generated top-k indices (fractions of all entries).
struct InvalidMix {
  double minus_one = 0.0;       // -1
  double int_min = 0.0;         // INT32_MIN
  double large_positive = 0.0;  // values near INT32_MAX
  double past_table = 0.0;      // tok / B >= block-table width
  double negative_block = 0.0;  // a logical block whose table entry is -1
};

enum class ConvertRows { kDecode, kAll };  // rows of indices: decode tokens only (prefills went dense), or all

struct ConvertCase {
  std::string name;
  ConvertRows rows = ConvertRows::kAll;
  InvalidMix invalid;
  bool prefill_workspace = false;  // prefill tokens use the workspace mode
  int32_t dcp_world_size = 1;      // > 1: one call per rank
  int32_t dcp_interleave = 1;
  // Pinned: the req_id of every row of indices (any order, any int32), and the indices themselves
  // (one row per row of the case, at most topk values each, -1 padded); used as written instead of
  // the batch's req_id slice and the generated picks. indices excludes `invalid`.
  std::optional<std::vector<int32_t>> req_id;
  std::optional<IndexRows> indices;
};

// Attention settings (docs/semantics.md §4, 5, 8). Tolerance defaults are docs/semantics.md §8's starting points; the forward
// and equivalence defaults are derived in docs/scenarios.md.
struct AttentionTolerances {
  Tolerance sparse_mqa{1e-3, 2.01 / 128, 5e-6};
  Tolerance sparse_lse{1e-6, 8.01 / 65536, -1.0};
  Tolerance dense_mha{1e-3, 8.01 / 128, 7e-6};
  Tolerance dense_lse{1e-6, 8.01 / 65536, -1.0};
  Tolerance forward{6e-3, 8.01 / 128, 2e-5};
  Tolerance equivalence_from_cache{6e-3, 8.01 / 128, 2e-5};
  Tolerance equivalence_bf16{3e-2, 0.5, 2e-3};
  Tolerance dcp{1e-3, 3.01 / 128, 1e-5};
};

// The drift check's stack depth: at most the model's 61 layers (docs/drift.md).
inline constexpr int32_t kMaxDriftLayers = 61;

struct AttentionConfig {
  bool force_sparse = false;       // route every token to sparse MQA
  int64_t workspace_rows = 0;      // context gather workspace (rows); 0 = one chunk per request
  int32_t dcp_world_size = 2;      // the dcp check: simulated ranks
  int32_t dcp_interleave = 1;
  int32_t drift_layers = 8;        // the drift check: layers of the synthetic stack, 1..kMaxDriftLayers
  AttentionTolerances tolerances;
  // Pinned: the indexer's picks (request-local positions) of every new token, one row each, at
  // most topk values, -1 padded; they replace the generated picks in every attention check, and
  // sparse_mqa converts them without mixing in invalid slots.
  std::optional<IndexRows> topk_positions;
  // Pinned: the global slots the sparse_mqa check passes to the kernel, one row per new token
  // (instead of the converted picks with invalid slots mixed in).
  std::optional<IndexRows> sparse_mqa_slots;
};

inline constexpr const char* kGpuOnlyTag = "gpu-only";  // too large for the host backend

struct Scenario {
  std::string name;
  std::string file;         // path it was loaded from (for errors and repro lines)
  std::string description;
  std::vector<std::string> tags;
  uint64_t seed = 1;
  ModelDims model;
  CacheConfig cache;
  BlockTableConfig block_table;
  BatchSpec batch;
  std::optional<BatchGenerator> generator;  // set when the batch was generated (batch holds the result)
  std::vector<GatherCase> gathers;
  std::vector<ConvertCase> converts;
  std::vector<CheckKind> checks;
  // Set by mla-check --check when it removed attention checks from `checks`: the inputs are still
  // generated as for them (the cache path's values differ with and without attention checks), so
  // that a run of some checks sees the same inputs as the scenario's whole run.
  bool attention_checks_removed = false;
  AttentionConfig attention;
  bool gpu_only() const;
};

struct ScenarioError {
  ScenarioError() = default;
  ScenarioError(std::string file_, std::string json_path_, std::string problem_,
                std::vector<std::pair<std::string, std::string>> more_ = {})
      : file(std::move(file_)), json_path(std::move(json_path_)), problem(std::move(problem_)), more(std::move(more_)) {}

  std::string file;
  std::string json_path;  // e.g. "/batch/seq_lens/3"
  std::string problem;
  // Further violations of the schema found with the first one: (pointer, problem).
  std::vector<std::pair<std::string, std::string>> more;
  // "FILE: at JSON_PATH: PROBLEM" ("FILE: PROBLEM" when the path is ""), one line per violation.
  std::string to_string() const;
};

// The rules between fields (lengths, query_len <= seq_len, workspace starts against the batch,
// pool size, DCP interleave, decode-row cases, pinned values against the batch and the pool), for
// a Scenario loaded or built in code. Paths point at the fields as the file would spell them.
// num_blocks == 0 counts as automatic.
std::optional<ScenarioError> validate_scenario(const Scenario& s);

// The block table's used columns: the widest request's pages (or its pinned row, if longer) plus
// extra_columns.
int64_t block_table_width(const Scenario& s);

// Rows of indices a convert case converts: the decode tokens ("decode") or every new token
// ("all"); a pinned req_id or indices has exactly this many rows.
int64_t convert_case_rows(const Scenario& s, const ConvertCase& c);

// The bf16 amax a tile needs for the pack to compute `scale` (docs/semantics.md §1.1:
// max(float(amax / 448), FLT_MIN)); 0 for FLT_MIN (an all-zero tile). nullopt when no bf16 amax
// gives exactly this fp32 scale.
std::optional<bf16_t> tile_amax_for_scale(float scale);

// Parse and validate one file. seed_override replaces the file's seed (mla-check --seed).
std::variant<Scenario, ScenarioError> load_scenario(const std::string& path,
                                                    std::optional<uint64_t> seed_override = std::nullopt);

// The shipped suite: every *.json under dir, sorted by path.
std::vector<std::string> list_scenario_files(const std::string& dir);

}  // namespace mla
