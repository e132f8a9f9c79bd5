#include "lib/backends/injecting_backend.h"

#include <climits>
#include <vector>

#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/index_math.h"
#include "kernels/host/host_kernels.h"

namespace mla {

namespace {

// Copies `count` elements at `src` (inner backend memory) into a host vector.
template <typename T>
Status download(Backend& b, const T* src, int64_t count, std::vector<T>* out) {
  out->resize(static_cast<size_t>(count));
  if (count == 0) return Status();
  return b.copy_to_host(out->data(), src, out->size() * sizeof(T));
}

}  // namespace

Status InjectingBackend::gather(const GatherParams& p) {
  switch (injection_) {
    case Injection::kIgnoreSeqStarts: {
      bool matter = false;
      MLA_RETURN_IF_ERROR(seq_starts_matter(p, &matter));
      if (matter) applied();
      GatherParams q = p;
      q.seq_starts = nullptr;
      return inner().gather(q);
    }
    case Injection::kFlatFp8Gather:
      if (p.num_rows > 0) applied();
      return gather_flat_fp8_on_host(p);
    default:
      return inner().gather(p);
  }
}

Status InjectingBackend::seq_starts_matter(const GatherParams& p, bool* matter) {
  *matter = false;
  if (p.seq_starts == nullptr || p.num_rows == 0 || p.num_reqs == 0) return Status();
  MLA_RETURN_IF_ERROR(inner().synchronize());
  std::vector<int32_t> ws, starts;
  MLA_RETURN_IF_ERROR(download(inner(), p.workspace_starts, int64_t{p.num_reqs}, &ws));
  MLA_RETURN_IF_ERROR(download(inner(), p.seq_starts, int64_t{p.num_reqs}, &starts));
  for (size_t r = 0; r < ws.size(); ++r) {
    const int64_t end = r + 1 < ws.size() ? ws[r + 1] : p.num_rows;
    if (end > ws[r] && starts[r] != 0) *matter = true;
  }
  return Status();
}

Status InjectingBackend::convert(const ConvertParams& p) {
  MLA_RETURN_IF_ERROR(inner().convert(p));
  if (injection_ != Injection::kConvertBoundOffByOne) return Status();
  return convert_bound_off_by_one(p);
}

Status InjectingBackend::convert_bound_off_by_one(const ConvertParams& p) {
  if (p.indices_rows == 0 || p.num_reqs == 0 || p.topk == 0) return Status();
  Backend& b = inner();
  MLA_RETURN_IF_ERROR(b.synchronize());
  const int64_t rows = p.indices_rows;
  std::vector<int32_t> req_id, indices, table, prefill_req, out, counts;
  MLA_RETURN_IF_ERROR(download(b, p.req_id, rows, &req_id));
  MLA_RETURN_IF_ERROR(download(b, p.indices, (rows - 1) * p.indices_row_stride + p.topk, &indices));
  // Every row's entries up to and including column `width`: the entry the wrong bound reads.
  MLA_RETURN_IF_ERROR(download(b, p.block_table, (p.num_reqs - 1) * p.block_table_stride + p.block_table_width + 1, &table));
  if (p.prefill_req != nullptr) MLA_RETURN_IF_ERROR(download(b, p.prefill_req, rows, &prefill_req));
  MLA_RETURN_IF_ERROR(download(b, p.out, (rows - 1) * p.out_row_stride + p.topk, &out));
  if (p.valid_count != nullptr) MLA_RETURN_IF_ERROR(download(b, p.valid_count, rows, &counts));
  const int64_t B = p.block_size;
  bool changed = false;
  for (int64_t t = 0; t < rows; ++t) {
    const int32_t r = req_id[static_cast<size_t>(t)];
    if (r < 0 || r >= p.num_reqs) continue;                                   // the row is invalid either way
    if (!prefill_req.empty() && prefill_req[static_cast<size_t>(t)] >= 0) continue;  // workspace rows: no table
    for (int32_t j = 0; j < p.topk; ++j) {
      int64_t tok = indices[static_cast<size_t>(t * p.indices_row_stride + j)];
      if (tok < 0) continue;
      if (p.dcp_world_size > 1) {
        if (!dcp_owns(tok, p.dcp_world_size, p.dcp_rank, p.dcp_interleave)) continue;
        tok = dcp_local_pos(tok, p.dcp_world_size, p.dcp_interleave);
      }
      if (tok / B != p.block_table_width) continue;  // only this block is bounded differently
      const int64_t phys = table[static_cast<size_t>(r * p.block_table_stride + p.block_table_width)];
      const int64_t slot = phys * B + tok % B;
      if (phys < 0 || slot > INT32_MAX) continue;  // the wrong entry holds no usable page: -1 as before
      out[static_cast<size_t>(t * p.out_row_stride + j)] = static_cast<int32_t>(slot);
      if (!counts.empty()) ++counts[static_cast<size_t>(t)];
      changed = true;
    }
  }
  if (!changed) return Status();
  applied();
  MLA_RETURN_IF_ERROR(b.copy_to_device(p.out, out.data(), out.size() * sizeof(int32_t)));
  if (!counts.empty()) MLA_RETURN_IF_ERROR(b.copy_to_device(p.valid_count, counts.data(), counts.size() * sizeof(int32_t)));
  return Status();
}

Status InjectingBackend::gather_flat_fp8_on_host(const GatherParams& p) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.num_rows == 0) return Status();
  Backend& b = inner();
  MLA_RETURN_IF_ERROR(b.synchronize());  // the operands may still be written by earlier operations
  std::vector<uint8_t> cache;
  std::vector<int32_t> table, ws, starts;
  std::vector<bf16_t> dst;
  MLA_RETURN_IF_ERROR(download(b, p.cache.data, p.cache.num_blocks * p.cache.page_stride_bytes, &cache));
  // Rows of the table up to the last row's used columns (the table may be a view into a larger one).
  const int64_t table_elements = p.num_reqs == 0 ? 0 : (p.num_reqs - 1) * p.block_table_stride + p.block_table_width;
  MLA_RETURN_IF_ERROR(download(b, p.block_table, table_elements, &table));
  MLA_RETURN_IF_ERROR(download(b, p.workspace_starts, int64_t{p.num_reqs}, &ws));
  if (p.seq_starts != nullptr) MLA_RETURN_IF_ERROR(download(b, p.seq_starts, int64_t{p.num_reqs}, &starts));
  // The whole destination, so that columns past the 576 written keep their bytes.
  const int64_t dst_elements = (p.num_rows - 1) * p.dst_row_stride + DsMlaEntry::kLatentDims;
  MLA_RETURN_IF_ERROR(download(b, p.dst, dst_elements, &dst));

  FlatFp8GatherParams f;
  f.base = p;
  f.base.cache.data = cache.data();
  f.base.block_table = table.data();
  f.base.workspace_starts = ws.data();
  f.base.seq_starts = p.seq_starts != nullptr ? starts.data() : nullptr;
  f.base.dst = dst.data();
  f.entry_stride_bytes = DsMlaEntry::kBytes;  // the failure: 656-byte entries read as flat FP8
  f.global_scale = 1.0f;
  MLA_RETURN_IF_ERROR(f.validate());
  host::gather_flat_fp8(f);
  return b.copy_to_device(p.dst, dst.data(), dst.size() * sizeof(bf16_t));
}

}  // namespace mla
