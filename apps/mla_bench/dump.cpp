#include "apps/mla_bench/dump.h"

#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/mla_bench/bench_inputs.h"
#include "lib/run/report.h"
#include "lib/batch/rng.h"

namespace mla::bench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kStreamDump = 77;

template <typename T>
const char* dtype_name();
template <> const char* dtype_name<bf16_t>() { return "bfloat16"; }
template <> const char* dtype_name<int64_t>() { return "int64"; }
template <> const char* dtype_name<int32_t>() { return "int32"; }
template <> const char* dtype_name<uint8_t>() { return "uint8"; }

// Writes `data` as DIR/FILE and returns its manifest entry (row-major shape, strides in elements).
template <typename T>
Status write_tensor(const fs::path& dir, const std::string& file, const std::vector<T>& data,
                    const std::vector<int64_t>& shape, json* entry) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  if (count != static_cast<int64_t>(data.size())) {
    return Status::error("dump: " + file + ": shape does not match " + std::to_string(data.size()) + " elements");
  }
  std::ofstream out(dir / file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(T)));
  if (!out) return Status::error("dump: cannot write " + (dir / file).string());
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  *entry = json{{"file", file}, {"dtype", dtype_name<T>()}, {"shape", shape}, {"strides", strides}};
  return Status();
}

// Latent rows with the tiles a quantizer gets wrong most easily.
std::vector<bf16_t> dump_latent_rows(int64_t rows, Rng& rng) {
  std::vector<bf16_t> kv = make_latent_rows(rows, rng);
  auto tile = [&](int64_t row, int t) { return &kv[static_cast<size_t>(row * kKvCols + t * DsMlaEntry::kTileDims)]; };
  auto scale_tile = [&](int64_t row, int t, float f) {
    bf16_t* x = tile(row, t);
    for (int e = 0; e < DsMlaEntry::kTileDims; ++e) x[e] = f32_to_bf16_rne(bf16_to_f32(x[e]) * f);
  };
  for (int64_t r = 0; r < rows; r += 9) {
    scale_tile(r, 0, 0.0f);                                      // all zero: scale = FLT_MIN
    if (r + 1 < rows) scale_tile(r + 1, 1, 1e-36f);              // amax / 448 < FLT_MIN
    if (r + 2 < rows) scale_tile(r + 2, 2, 3000.0f);             // large magnitudes
    if (r + 3 < rows) {                                          // one nonzero value in the tile
      bf16_t* x = tile(r + 3, 3);
      for (int e = 0; e < DsMlaEntry::kTileDims; ++e) x[e] = 0;
      x[17] = f32_to_bf16_rne(-0.37f);
    }
    if (r + 4 < rows) {                                          // bf16 subnormals and -0
      bf16_t* x = tile(r + 4, 0);
      for (int e = 0; e < DsMlaEntry::kTileDims; ++e) x[e] = static_cast<bf16_t>((e * 37) & 0x807F);
    }
  }
  return kv;
}

Status dump_pack(Backend& backend, const fs::path& dir, Rng& rng, json* op) {
  const int32_t block_size = 16;
  const std::vector<int64_t> new_tokens = {40, 1, 55};
  const std::vector<int64_t> context = {5, 17, 0};
  std::vector<int64_t> seq_lens(new_tokens.size());
  for (size_t r = 0; r < seq_lens.size(); ++r) seq_lens[r] = context[r] + new_tokens[r];
  const PagedLayout layout = make_layout(seq_lens, block_size, /*spare_blocks=*/3, 1, 0, rng);
  const int64_t page_stride = block_size * DsMlaEntry::kBytes + 32;  // padded pages
  std::vector<int64_t> slots;
  for (size_t r = 0; r < new_tokens.size(); ++r)
    for (int64_t j = 0; j < new_tokens[r]; ++j) slots.push_back(layout.slot(static_cast<int32_t>(r), context[r] + j));
  slots[7] = -1;  // skipped tokens
  slots[50] = -1;
  const int64_t num_tokens = static_cast<int64_t>(slots.size());
  const int64_t kv_rows = num_tokens + 5;  // padding rows past slot_mapping are not packed
  const std::vector<bf16_t> kv = dump_latent_rows(kv_rows, rng);
  const std::vector<uint8_t> cache_before(static_cast<size_t>(layout.num_blocks * page_stride), kUnusedByte);

  std::vector<uint8_t> cache_after = cache_before;
  MLA_RETURN_IF_ERROR(pack_rows(backend, kv, slots, block_size, page_stride, &cache_after));

  json inputs, outputs;
  MLA_RETURN_IF_ERROR(write_tensor(dir, "pack.kv.bin", kv, {kv_rows, kKvCols}, &inputs["kv"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "pack.slot_mapping.bin", slots, {num_tokens}, &inputs["slot_mapping"]));
  MLA_RETURN_IF_ERROR(
      write_tensor(dir, "pack.cache_before.bin", cache_before, {layout.num_blocks, page_stride}, &inputs["cache"]));
  MLA_RETURN_IF_ERROR(
      write_tensor(dir, "pack.cache_after.bin", cache_after, {layout.num_blocks, page_stride}, &outputs["cache"]));
  *op = json{{"params",
              {{"num_tokens", num_tokens},
               {"block_size", block_size},
               {"num_blocks", layout.num_blocks},
               {"page_stride_bytes", page_stride},
               {"kv_c", {{"tensor", "kv"}, {"col_offset", 0}, {"cols", DsMlaEntry::kNopeDims}, {"row_stride", kKvCols}}},
               {"k_pe", {{"tensor", "kv"}, {"col_offset", DsMlaEntry::kNopeDims}, {"cols", DsMlaEntry::kRopeDims},
                         {"row_stride", kKvCols}}}}},
             {"inputs", inputs},
             {"outputs", outputs},
             {"note", "cache is updated in place: outputs.cache is inputs.cache after the call"}};
  return Status();
}

Status dump_gather(Backend& backend, const fs::path& dir, Rng& rng, json* op) {
  const int32_t block_size = 13;
  const std::vector<int64_t> rows = {30, 0, 47, 20};  // a zero-length request included
  const std::vector<int32_t> seq_starts = {5, 27, 14, 40};
  std::vector<int64_t> seq_lens(rows.size());
  std::vector<int32_t> ws;
  int64_t num_rows = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    ws.push_back(static_cast<int32_t>(num_rows));
    num_rows += rows[r];
    seq_lens[r] = seq_starts[r] + rows[r] + 3;  // a few stored tokens past the gathered range
  }
  const PagedLayout layout = make_layout(seq_lens, block_size, /*spare_blocks=*/2, /*extra_columns=*/1,
                                         /*stride_padding=*/2, rng);
  const int64_t page_stride = block_size * DsMlaEntry::kBytes + 16;
  int64_t stored = 0;
  for (int64_t len : seq_lens) stored += len;
  std::vector<uint8_t> entries;
  MLA_RETURN_IF_ERROR(pack_entries(backend, dump_latent_rows(stored, rng), &entries));
  const std::vector<uint8_t> cache = assemble_cache(layout, page_stride, entries);

  DeviceBuffer d_cache, d_bt, d_ws, d_ss, d_dst;
  MLA_RETURN_IF_ERROR(d_cache.upload(backend, cache));
  MLA_RETURN_IF_ERROR(d_bt.upload(backend, layout.block_table));
  MLA_RETURN_IF_ERROR(d_ws.upload(backend, ws));
  MLA_RETURN_IF_ERROR(d_ss.upload(backend, seq_starts));
  MLA_RETURN_IF_ERROR(
      d_dst.upload(backend, std::vector<bf16_t>(static_cast<size_t>(num_rows * DsMlaEntry::kLatentDims), 0xFFFF)));
  GatherParams g;
  g.cache = {d_cache.as<uint8_t>(), layout.num_blocks, block_size, page_stride};
  g.block_table = d_bt.as<int32_t>();
  g.num_reqs = layout.num_reqs;
  g.block_table_width = layout.bt_width;
  g.block_table_stride = layout.bt_stride;
  g.workspace_starts = d_ws.as<int32_t>();
  g.seq_starts = d_ss.as<int32_t>();
  g.dst = d_dst.as<bf16_t>();
  g.dst_row_stride = DsMlaEntry::kLatentDims;
  g.num_rows = num_rows;
  MLA_RETURN_IF_ERROR(backend.gather(g));
  MLA_RETURN_IF_ERROR(backend.synchronize());
  std::vector<bf16_t> dst;
  MLA_RETURN_IF_ERROR(d_dst.download(&dst));

  json inputs, outputs;
  MLA_RETURN_IF_ERROR(write_tensor(dir, "gather.cache.bin", cache, {layout.num_blocks, page_stride}, &inputs["cache"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "gather.block_table.bin", layout.block_table,
                                   {layout.num_reqs, layout.bt_stride}, &inputs["block_table"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "gather.workspace_starts.bin", ws, {layout.num_reqs}, &inputs["workspace_starts"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "gather.seq_starts.bin", seq_starts, {layout.num_reqs}, &inputs["seq_starts"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "gather.dst.bin", dst, {num_rows, DsMlaEntry::kLatentDims}, &outputs["dst"]));
  *op = json{{"params",
              {{"num_rows", num_rows},
               {"num_reqs", layout.num_reqs},
               {"block_size", block_size},
               {"num_blocks", layout.num_blocks},
               {"page_stride_bytes", page_stride},
               {"block_table_width", layout.bt_width},
               {"block_table_stride", layout.bt_stride},
               {"dst_row_stride", DsMlaEntry::kLatentDims}}},
             {"inputs", inputs},
             {"outputs", outputs}};
  return Status();
}

Status dump_convert(Backend& backend, const fs::path& dir, Rng& rng, json* op) {
  const int32_t block_size = 16, topk = 96;
  const std::vector<int64_t> rows_per_req = {1, 1, 12, 7, 19};
  std::vector<int64_t> seq_lens;
  for (size_t r = 0; r < rows_per_req.size(); ++r) seq_lens.push_back(rng.uniform_int(40, 400));
  PagedLayout layout = make_layout(seq_lens, block_size, /*spare_blocks=*/2, /*extra_columns=*/2,
                                   /*stride_padding=*/3, rng);
  // Holes in the block table inside requests' ranges: their positions are invalid.
  layout.block_table[static_cast<size_t>(2 * layout.bt_stride + 1)] = -1;
  layout.block_table[static_cast<size_t>(4 * layout.bt_stride + 0)] = -1;
  std::vector<int32_t> req_id, indices;
  for (size_t r = 0; r < rows_per_req.size(); ++r) {
    for (int64_t i = 0; i < rows_per_req[r]; ++i) {
      req_id.push_back(static_cast<int32_t>(r));
      for (int32_t j = 0; j < topk; ++j) {
        const int64_t n = seq_lens[r];
        int32_t tok = static_cast<int32_t>(rng.uniform_int(0, n - 1));
        switch (rng.uniform_int(0, 19)) {  // about 30% invalid, of every kind
          case 0: tok = -1; break;
          case 1: tok = INT32_MIN; break;
          case 2: tok = INT32_MAX - static_cast<int32_t>(rng.uniform_int(0, 5)); break;
          case 3: tok = layout.bt_width * block_size + static_cast<int32_t>(rng.uniform_int(0, 40)); break;
          case 4: tok = static_cast<int32_t>(-rng.uniform_int(2, 1000)); break;
          case 5: tok = static_cast<int32_t>(n + rng.uniform_int(0, block_size)); break;  // past seq_len
          default: break;
        }
        indices.push_back(tok);
      }
    }
  }
  const int64_t rows = static_cast<int64_t>(req_id.size());

  DeviceBuffer d_req, d_idx, d_bt, d_out, d_vc;
  MLA_RETURN_IF_ERROR(d_req.upload(backend, req_id));
  MLA_RETURN_IF_ERROR(d_idx.upload(backend, indices));
  MLA_RETURN_IF_ERROR(d_bt.upload(backend, layout.block_table));
  MLA_RETURN_IF_ERROR(d_out.upload(backend, std::vector<int32_t>(static_cast<size_t>(rows * topk), 0x5A5A5A5A)));
  MLA_RETURN_IF_ERROR(d_vc.upload(backend, std::vector<int32_t>(static_cast<size_t>(rows), 0x5A5A5A5A)));
  ConvertParams c;
  c.req_id = d_req.as<int32_t>();
  c.num_tokens = rows;
  c.indices = d_idx.as<int32_t>();
  c.indices_rows = rows;
  c.topk = topk;
  c.indices_row_stride = topk;
  c.block_table = d_bt.as<int32_t>();
  c.num_reqs = layout.num_reqs;
  c.block_table_width = layout.bt_width;
  c.block_table_stride = layout.bt_stride;
  c.block_size = block_size;
  c.out = d_out.as<int32_t>();
  c.out_row_stride = topk;
  c.valid_count = d_vc.as<int32_t>();
  MLA_RETURN_IF_ERROR(backend.convert(c));
  MLA_RETURN_IF_ERROR(backend.synchronize());
  std::vector<int32_t> out, valid_count;
  MLA_RETURN_IF_ERROR(d_out.download(&out));
  MLA_RETURN_IF_ERROR(d_vc.download(&valid_count));

  json inputs, outputs;
  MLA_RETURN_IF_ERROR(write_tensor(dir, "convert.req_id.bin", req_id, {rows}, &inputs["req_id"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "convert.indices.bin", indices, {rows, topk}, &inputs["indices"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "convert.block_table.bin", layout.block_table,
                                   {layout.num_reqs, layout.bt_stride}, &inputs["block_table"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "convert.out.bin", out, {rows, topk}, &outputs["out"]));
  MLA_RETURN_IF_ERROR(write_tensor(dir, "convert.valid_count.bin", valid_count, {rows}, &outputs["valid_count"]));
  *op = json{{"params",
              {{"rows", rows},
               {"topk", topk},
               {"num_reqs", layout.num_reqs},
               {"block_size", block_size},
               {"block_table_width", layout.bt_width},
               {"block_table_stride", layout.bt_stride}}},
             {"inputs", inputs},
             {"outputs", outputs}};
  return Status();
}

}  // namespace

Status write_dump(Backend& backend, const std::string& dir_name, uint64_t seed) {
  static_assert(sizeof(bf16_t) == 2, "raw bf16 bits");
  {
    const uint16_t probe = 1;
    unsigned char first = 0;
    std::memcpy(&first, &probe, 1);
    if (first != 1) return Status::error("--dump writes little-endian files; this host is big-endian");
  }
  const fs::path dir(dir_name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::error("--dump: cannot create " + dir_name + ": " + ec.message());

  Rng rng = Rng(seed).fork(kStreamDump);
  json ops;
  MLA_RETURN_IF_ERROR(dump_pack(backend, dir, rng, &ops["pack"]));
  MLA_RETURN_IF_ERROR(dump_gather(backend, dir, rng, &ops["gather"]));
  MLA_RETURN_IF_ERROR(dump_convert(backend, dir, rng, &ops["convert"]));

  const BackendInfo info = backend.info();
  json manifest = {
      {"schema", "mla-bench.dump/1"},
      {"producer",
       {{"tool", "mla-bench"}, {"version", tool_version()}, {"git_revision", tool_git_revision()},
        {"backend", info.name}, {"device", info.device}, {"runtime", info.runtime}, {"seed", seed}}},
      {"layout",
       {{"entry_bytes", DsMlaEntry::kBytes},
        {"nope_offset", DsMlaEntry::kNopeOffset},
        {"nope_dims", DsMlaEntry::kNopeDims},
        {"scale_offset", DsMlaEntry::kScaleOffset},
        {"tile_dims", DsMlaEntry::kTileDims},
        {"rope_offset", DsMlaEntry::kRopeOffset},
        {"rope_dims", DsMlaEntry::kRopeDims},
        {"byte_order", "little"}}},
      {"ops", ops}};
  const fs::path tmp = dir / "manifest.json.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << manifest.dump(2) << "\n";
    if (!out) return Status::error("--dump: cannot write " + tmp.string());
  }
  fs::rename(tmp, dir / "manifest.json", ec);
  if (ec) return Status::error("--dump: cannot write manifest.json: " + ec.message());
  return Status();
}

}  // namespace mla::bench
