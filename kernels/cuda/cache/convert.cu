// Top-k index conversion (docs/semantics.md §3): request-local token positions -> global cache
// slots or prefill-workspace rows, -1 for anything invalid, columns in place, optional valid
// counts.
// Exactly the host backend's convert (kernels/host/host_convert.cpp), element for element.
//
// Work split: a group of threads_per_row threads (a power of two in [32, 256], sized to topk and
// to the number of rows) per row, 256 / threads_per_row rows per block. Each thread converts 4
// columns per step (one 16-byte load of indices, one 16-byte store of out) when topk, both row
// strides and both bases allow it, else 1 (then the index loads of 2 steps are issued before the
// first conversion). valid_count is a sum over the group: warp shuffles, then shared memory when
// the group spans several warps.
//
// Hazards: req_id, prefill_req, prefill_workspace_starts, indices and block-table entries are
// device values validate() cannot see. req_id is range-checked before it selects a block-table
// row, prefill_req before it selects a workspace start, and the logical block before it selects
// a column (topk_to_slot), so no value can make the kernel read out of bounds. Row count is
// indices_rows, which validate() has made equal to the length of req_id (docs/semantics.md
// §6.1).
#include <climits>
#include <string>
#include <type_traits>

#include "kernels/common/index_math.h"
#include "kernels/cuda/cache/cache_launchers.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"

namespace mla {
namespace {

using cuda_io::kFullMask;
using cuda_io::kWarpSize;

constexpr int kConvertThreads = 256;
constexpr int64_t kConvertGridThreads = int64_t{1} << 20;  // enough to fill 132 SMs several times

struct ConvertArgs {
  const int32_t* req_id;         // [num_rows]
  const int32_t* indices;        // [num_rows, indices_row_stride]
  int64_t indices_row_stride;
  int64_t num_rows;
  int32_t topk;
  const int32_t* block_table;    // [num_reqs, block_table_stride]
  int64_t block_table_stride;
  int32_t block_table_width;
  int32_t num_reqs;
  int32_t block_size;
  int32_t* out;                  // [num_rows, out_row_stride]
  int64_t out_row_stride;
  int32_t* valid_count;          // [num_rows] or nullptr
  const int32_t* prefill_req;    // [num_rows] or nullptr
  const int32_t* prefill_workspace_starts;  // [num_prefills]
  int32_t num_prefills;
  int32_t dcp_world_size;
  int32_t dcp_rank;
  int32_t dcp_interleave;
  int32_t threads_per_row;       // power of two, 32..256
};

// What the conversion of a row reads besides its indices, loaded once per row.
struct RowContext {
  bool valid_req;           // 0 <= req_id < num_reqs; otherwise the whole row is invalid
  const int32_t* bt_row;    // block_table row of the request (only when valid_req)
  int32_t prefill;          // prefill_req[t], -1 when absent
  int64_t workspace_start;  // prefill_workspace_starts[prefill] when 0 <= prefill < num_prefills
};

__device__ __forceinline__ RowContext load_row_context(const ConvertArgs& a, int64_t t) {
  RowContext c;
  const int32_t req = __ldg(a.req_id + t);
  c.valid_req = req >= 0 && req < a.num_reqs;
  c.bt_row = c.valid_req ? a.block_table + req * a.block_table_stride : nullptr;
  c.prefill = a.prefill_req ? __ldg(a.prefill_req + t) : -1;
  c.workspace_start =
      (c.prefill >= 0 && c.prefill < a.num_prefills) ? __ldg(a.prefill_workspace_starts + c.prefill) : 0;
  return c;
}

// One element: the same tests in the same order as host convert_element. Prefill-workspace rows
// index the whole gathered sequence, so DCP ownership applies only to cache slots.
// kBlockSize: the block size when known at compile time (its divisions become shifts), else 0.
template <int kBlockSize>
__device__ __forceinline__ int32_t convert_element(const ConvertArgs& a, const RowContext& c, int32_t index) {
  if (!c.valid_req) return kInvalidIndex;
  int64_t tok = index;
  if (tok < 0) return kInvalidIndex;
  if (c.prefill >= 0) {
    if (c.prefill >= a.num_prefills) return kInvalidIndex;
    const int64_t row = c.workspace_start + tok;
    if (row < 0 || row > INT32_MAX) return kInvalidIndex;  // does not fit the int32 output
    return static_cast<int32_t>(row);
  }
  if (a.dcp_world_size > 1) {
    if (!dcp_owns(tok, a.dcp_world_size, a.dcp_rank, a.dcp_interleave)) return kInvalidIndex;
    tok = dcp_local_pos(tok, a.dcp_world_size, a.dcp_interleave);
  }
  return topk_to_slot(tok, c.bt_row, a.block_table_width, kBlockSize > 0 ? kBlockSize : a.block_size);
}

// The cache-slot conversion alone (no prefill_req, no DCP) at block size 64, in 32-bit arithmetic:
// the same result as convert_element<64> for those args, in fewer instructions (the kernel is
// issue-bound at large sizes). index >= 0 and index >> 6 < width select the column; phys in
// [0, 2^25) is exactly the range where phys * 64 + index % 64 is a valid int32 slot (topk_to_slot:
// phys >= 0 and slot <= INT32_MAX).
__device__ __forceinline__ int32_t convert_plain64(const ConvertArgs& a, const RowContext& c, int32_t index) {
  if (!c.valid_req || index < 0 || (index >> 6) >= a.block_table_width) return kInvalidIndex;
  const int32_t phys = c.bt_row[index >> 6];
  if (static_cast<uint32_t>(phys) >= (1u << 25)) return kInvalidIndex;
  return (phys << 6) | (index & 63);
}

template <int kBlockSize, bool kPlain>
__device__ __forceinline__ int32_t convert(const ConvertArgs& a, const RowContext& c, int32_t index) {
  static_assert(!kPlain || kBlockSize == 64, "the plain path is for block size 64");
  if constexpr (kPlain) {
    return convert_plain64(a, c, index);
  } else {
    return convert_element<kBlockSize>(a, c, index);
  }
}

__device__ __forceinline__ int32_t is_valid(int32_t v) { return v != kInvalidIndex ? 1 : 0; }

// kVec = 4: 16-byte loads of indices and stores of out (launcher checked alignment), one step at a
// time; kVec = 1: the index loads of 2 steps are issued before the first conversion.
// kBlockSize: 64 (the attention kernels' block size) or 0 (any, read from the args). kPlain
// (kBlockSize 64 only): no prefill_req and no DCP, convert_plain64 per element.
template <int kVec, int kBlockSize, bool kPlain>
__global__ void __launch_bounds__(kConvertThreads) convert_kernel(const ConvertArgs a) {
  using Vec = std::conditional_t<kVec == 4, int4, int32_t>;
  constexpr int kUnroll = kVec == 4 ? 1 : 2;  // steps whose index loads are in flight together
  __shared__ int32_t warp_valid[kConvertThreads / kWarpSize];

  const int tpr = a.threads_per_row;
  const int rows_per_block = kConvertThreads / tpr;
  const int group = threadIdx.x / tpr;  // row of this thread within the block's rows
  const int tid = threadIdx.x % tpr;    // position within the row's group
  const int steps = a.topk / kVec;      // topk % kVec == 0 (launcher)
  const bool count = a.valid_count != nullptr;

  // The loop bounds are the same for every thread of the block: __syncthreads below is safe.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rows_per_block; base < a.num_rows;
       base += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const int64_t t = base + group;
    int32_t valid = 0;
    if (t < a.num_rows) {
      const RowContext c = load_row_context(a, t);
      const int32_t* in = a.indices + t * a.indices_row_stride;
      int32_t* out = a.out + t * a.out_row_stride;
      for (int s0 = tid; s0 < steps; s0 += tpr * kUnroll) {
        Vec idx[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int s = s0 + u * tpr;
          if (s < steps) idx[u] = __ldg(reinterpret_cast<const Vec*>(in) + s);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int s = s0 + u * tpr;
          if (s >= steps) break;
          if constexpr (kVec == 4) {
            int4 r;
            r.x = convert<kBlockSize, kPlain>(a, c, idx[u].x);
            r.y = convert<kBlockSize, kPlain>(a, c, idx[u].y);
            r.z = convert<kBlockSize, kPlain>(a, c, idx[u].z);
            r.w = convert<kBlockSize, kPlain>(a, c, idx[u].w);
            valid += is_valid(r.x) + is_valid(r.y) + is_valid(r.z) + is_valid(r.w);
            reinterpret_cast<int4*>(out)[s] = r;
          } else {
            const int32_t r = convert<kBlockSize, kPlain>(a, c, idx[u]);
            valid += is_valid(r);
            out[s] = r;
          }
        }
      }
    }
    if (count) {  // uniform: every thread of the block takes this branch or none does
#pragma unroll
      for (int d = kWarpSize / 2; d > 0; d /= 2) valid += __shfl_xor_sync(kFullMask, valid, d);
      if (tpr == kWarpSize) {
        if (tid == 0 && t < a.num_rows) a.valid_count[t] = valid;
      } else {
        const int warp = threadIdx.x / kWarpSize;
        const int warps_per_row = tpr / kWarpSize;
        if (threadIdx.x % kWarpSize == 0) warp_valid[warp] = valid;
        __syncthreads();
        if (tid == 0 && t < a.num_rows) {
          int32_t sum = 0;
          for (int w = 0; w < warps_per_row; ++w) sum += warp_valid[group * warps_per_row + w];
          a.valid_count[t] = sum;
        }
        __syncthreads();  // warp_valid is rewritten by the next iteration
      }
    }
  }
}

}  // namespace

Status launch_convert(const ConvertParams& p, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.indices_rows == 0) return Status();
  if (p.topk > (1 << 30)) {  // column indices and steps are int in the kernel
    return Status::error("ConvertParams: topk " + std::to_string(p.topk) + " exceeds the CUDA kernel's limit of 2^30");
  }

  ConvertArgs a{p.req_id,          p.indices,           p.indices_row_stride, p.indices_rows,
                p.topk,            p.block_table,       p.block_table_stride, p.block_table_width,
                p.num_reqs,        p.block_size,        p.out,                p.out_row_stride,
                p.valid_count,     p.prefill_req,       p.prefill_workspace_starts,
                p.num_prefills,    p.dcp_world_size,    p.dcp_rank,           p.dcp_interleave,
                /*threads_per_row=*/kWarpSize};
  const bool vec = p.topk % 4 == 0 && p.indices_row_stride % 4 == 0 && p.out_row_stride % 4 == 0 &&
                   cuda_io::aligned16(p.indices) && cuda_io::aligned16(p.out);
  const int32_t steps = vec ? p.topk / 4 : p.topk;
  // Enough threads to cover a row in one step (at most a block); with many rows, fewer threads
  // per row and more steps each run faster (measured on an H200: K = 2048, 64k rows, 256 -> 64
  // threads per row is 1.23x), so keep about kConvertGridThreads threads in the grid.
  while (a.threads_per_row < kConvertThreads && a.threads_per_row < steps) a.threads_per_row *= 2;
  while (a.threads_per_row > 64 && p.indices_rows * (a.threads_per_row / 2) >= kConvertGridThreads) {
    a.threads_per_row /= 2;
  }
  const unsigned grid = cuda_io::grid_blocks(p.indices_rows, kConvertThreads / a.threads_per_row);

  const bool b64 = p.block_size == 64;
  const bool plain = b64 && p.prefill_req == nullptr && p.dcp_world_size <= 1;
  if (vec && plain) {
    convert_kernel<4, 64, true><<<grid, kConvertThreads, 0, stream>>>(a);
  } else if (vec && b64) {
    convert_kernel<4, 64, false><<<grid, kConvertThreads, 0, stream>>>(a);
  } else if (vec) {
    convert_kernel<4, 0, false><<<grid, kConvertThreads, 0, stream>>>(a);
  } else if (plain) {
    convert_kernel<1, 64, true><<<grid, kConvertThreads, 0, stream>>>(a);
  } else if (b64) {
    convert_kernel<1, 64, false><<<grid, kConvertThreads, 0, stream>>>(a);
  } else {
    convert_kernel<1, 0, false><<<grid, kConvertThreads, 0, stream>>>(a);
  }
  MLA_CUDA_CHECK_LAUNCH("convert_kernel");
  return Status();
}

}  // namespace mla
