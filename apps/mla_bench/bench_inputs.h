// Inputs of the cache-path benchmarks and of --dump, generated on the host, deterministically
// from a seed (lib/rng.h), shaped like production traffic:
//   - latent values ~ N(0, 0.1^2) in bf16 (k_pe ~ N(0, 0.5^2)), kv_c and k_pe as the two column
//     ranges [0, 512) and [512, 576) of one [rows, 576] projection output (row stride 576);
//   - requests own shuffled physical pages, so consecutive tokens of the batch land in scattered
//     pages and a request's pages are not contiguous;
//   - top-k indices are distinct valid positions of the token's request, in random order.
// DeviceBuffer puts them on a backend (Backend::allocate + copy_to_device).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "apps/mla_bench/harness_backend.h"
#include "kernels/backend.h"
#include "kernels/common/bf16.h"
#include "kernels/kernel_policy.h"
#include "lib/batch/rng.h"

namespace mla::bench {

inline constexpr int kKvCols = 576;      // kv_c (512) and k_pe (64) side by side, one row per token
inline constexpr uint8_t kUnusedByte = 0xFF;  // unused cache bytes: NaN in every field of an entry

// Byte models (docs/benchmarks.md). Pack per token: kv_c + k_pe read (bf16), slot read, entry
// written. Gather per row: entry read, bf16 row written. Convert per element: index read, slot
// written; per row: req_id read, valid_count written. Block-table reads are not counted.
inline constexpr int64_t kPackBytesPerToken = 1024 + 128 + 8 + 656;
inline constexpr int64_t kGatherBytesPerRow = 656 + 1152;
inline constexpr int64_t kConvertBytesPerElement = 4 + 4;
inline constexpr int64_t kConvertBytesPerRow = 4 + 4;

// A paged layout: each request's sequence is stored in its own pages, drawn from a shuffled pool.
struct PagedLayout {
  int32_t block_size = 0;
  int64_t num_blocks = 0;
  int32_t num_reqs = 0;
  int32_t bt_width = 0;     // columns used; unused entries (past a request's pages) are -1
  int64_t bt_stride = 0;    // row stride of block_table (>= bt_width)
  std::vector<int32_t> block_table;  // [num_reqs, bt_stride]
  std::vector<int64_t> seq_lens;     // [num_reqs] tokens stored per request

  int64_t slot(int32_t req, int64_t pos) const {
    const int64_t phys = block_table[static_cast<size_t>(req * bt_stride + pos / block_size)];
    return phys * block_size + pos % block_size;
  }
};

// Pages for every request, in a shuffled pool of exactly the pages needed plus `spare_blocks`.
// The block table has `extra_columns` -1 columns past the widest request and `stride_padding`
// more columns of -1 per row.
PagedLayout make_layout(const std::vector<int64_t>& seq_lens, int32_t block_size, int64_t spare_blocks,
                        int32_t extra_columns, int32_t stride_padding, Rng& rng);

// `total` split into `parts` >= 1 positive lengths around total / parts (each within
// [mean / 2, 3 mean / 2] where possible), summing to total.
std::vector<int64_t> split_lengths(int64_t total, int64_t parts, Rng& rng);

// Latent rows: [rows, 576] bf16, N(0, 0.1^2) in columns [0, 512) and N(0, 0.5^2) in [512, 576).
std::vector<bf16_t> make_latent_rows(int64_t rows, Rng& rng);

struct PackInputs {
  int64_t num_tokens = 0;       // length of slot_mapping
  int64_t kv_rows = 0;          // rows of kv (>= num_tokens: padding rows are not packed)
  std::vector<bf16_t> kv;       // [kv_rows, 576]; kv_c = columns [0, 512), k_pe = [512, 576)
  std::vector<int64_t> slot_mapping;  // [num_tokens]
  PagedLayout layout;
  int64_t page_stride_bytes = 0;
};

// num_tokens new tokens of several requests, each request's tokens written after a context of
// random length (so writes start mid-page) into its shuffled pages. `pool` supplies the latent
// rows (reused cyclically when shorter than num_tokens).
PackInputs make_pack_inputs(int64_t num_tokens, int32_t block_size, const std::vector<bf16_t>& pool,
                            Rng& rng);

struct GatherInputs {
  int64_t num_rows = 0;
  PagedLayout layout;
  int64_t page_stride_bytes = 0;
  std::vector<int32_t> workspace_starts;  // [num_reqs]
  std::vector<int32_t> seq_starts;        // [num_reqs], empty = absent (nullptr)
  // Which cached tokens hold data: request r's positions [0, seq_lens[r]). The cache bytes are
  // built on the backend (see build_cache_from_entries in bench_cache_ops.cpp).
};

// num_rows output rows over several requests; with_seq_starts: every request starts at a
// nonzero position that is not a multiple of block_size (when block_size > 1).
GatherInputs make_gather_inputs(int64_t num_rows, int32_t block_size, bool with_seq_starts, Rng& rng);

struct ConvertInputs {
  int64_t rows = 0;
  int32_t topk = 0;
  PagedLayout layout;
  std::vector<int32_t> req_id;   // [rows]
  std::vector<int32_t> indices;  // [rows, topk], distinct valid positions of the row's request
};

ConvertInputs make_convert_inputs(int64_t rows, int32_t topk, int32_t block_size, Rng& rng);

// Memory on a backend, released on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  Status allocate(Backend& backend, std::size_t bytes);
  // allocate + copy_to_device of a host vector.
  template <typename T>
  Status upload(Backend& backend, const std::vector<T>& host) {
    MLA_RETURN_IF_ERROR(allocate(backend, host.size() * sizeof(T)));
    return host.empty() ? Status() : backend.copy_to_device(ptr_, host.data(), host.size() * sizeof(T));
  }
  template <typename T>
  Status download(std::vector<T>* host) const {
    host->resize(bytes_ / sizeof(T));
    return bytes_ ? backend_->copy_to_host(host->data(), ptr_, host->size() * sizeof(T)) : Status();
  }
  void reset();

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace mla::bench

namespace mla::bench {

// Packs latent rows ([rows, 576] bf16: kv_c then k_pe; row i goes to slots[i], -1 skips it, rows
// past slots.size() are not read) on the backend into `cache` (pages of `page_stride` bytes holding
// `block_size` entries each), updated in place: the cache bytes before the call in, after it out.
Status pack_rows(Backend& backend, const std::vector<bf16_t>& rows, const std::vector<int64_t>& slots,
                 int32_t block_size, int64_t page_stride, std::vector<uint8_t>* cache);

// Packs `rows` latent rows ([n, 576] bf16) on the backend into n consecutive 656-byte entries
// (a one-token-per-page cache) and copies them back: quantized entries made by the backend's own
// pack, for building gather inputs.
Status pack_entries(Backend& backend, const std::vector<bf16_t>& rows, std::vector<uint8_t>* entries);

// pack_entries for a benchmark's inputs: on `backend`, or, when it has no pack (an adapter that
// lacks it), on `harness`. The inputs are prepared, not timed, and pack is exact
// (docs/semantics.md §1.1), so the entries are those every backend's inputs hold.
Status pack_input_entries(Backend& backend, HarnessBackend& harness, const std::vector<bf16_t>& rows,
                          std::vector<uint8_t>* entries);

// The cache bytes [num_blocks, page_stride_bytes] of `layout`: every stored position of every
// request gets an entry from `entries` (taken in order, cyclically), every other byte is 0xFF.
std::vector<uint8_t> assemble_cache(const PagedLayout& layout, int64_t page_stride_bytes,
                                    const std::vector<uint8_t>& entries);

}  // namespace mla::bench
