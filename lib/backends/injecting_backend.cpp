#include "lib/backends/injecting_backend.h"

#include <vector>

#include "kernels/common/ds_mla_entry.h"
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
      GatherParams q = p;
      q.seq_starts = nullptr;
      return inner().gather(q);
    }
    case Injection::kFlatFp8Gather:
      return gather_flat_fp8_on_host(p);
    default:
      return inner().gather(p);
  }
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
