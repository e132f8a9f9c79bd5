// Gather + upconvert (docs/semantics.md §2). Bit for bit the host backend's gather
// (kernels/host/host_gather.cpp), NaN payloads aside.
//
// Row mapping: r = gather_row_owner(workspace_starts, num_reqs, o), p = o - ws[r] + seq_starts[r],
// phys = block_table[r][p / B], entry = base + phys * page_stride + (p % B) * 656. A row is invalid (every element bf16 0x7FC0) when o < ws[0], p < 0, p / B >=
// block_table_width, or phys < 0 or >= num_blocks. Every value read from device memory (starts,
// block-table entries) is bounds-checked before it forms an address, so no value there can make
// the kernel read outside the cache, the block table or the starts.
//
// Work split: a block first copies workspace_starts and seq_starts into shared memory when there
// are at most kGatherStagedReqs requests (one round trip; the owner search then runs in shared
// memory instead of one dependent global load per step). It takes kGatherRowsPerBlock
// consecutive rows per step. First one thread per row resolves the row's source (the searches and
// table loads of all rows run side by side) into shared memory; then each warp converts its
// kGatherRowsPerWarp rows, issuing the loads of kGatherRowsInFlight rows before converting any of
// them. One step per block, which beats a persistent grid for this kernel: a step's work is a
// dependent chain (request search, block table, then the loads). Within a row, lane l handles the
// 8-byte chunks l and l + 32: every load and store instruction of the warp covers 256 contiguous
// source bytes / 512 contiguous output bytes. Chunk c is FP8 bytes [8c, 8c + 8) of tile c / 16;
// every lane copies 4 of the 128 RoPE bytes. An invalid row is 72 chunks of 8 NaNs (lanes l,
// l + 32, l + 64).
// Dequantization is bf16_rne(e4m3_to_f32(b) * scale) with one IEEE multiply (__fmul_rn: never
// contracted into an FMA); the conversions run two at a time (fp8_codec.cuh), same bits.
#include "kernels/common/bf16.h"
#include "kernels/common/ds_mla_entry.h"
#include "kernels/common/index_math.h"
#include "kernels/cuda/cache/cache_launchers.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_io.cuh"
#include "kernels/cuda/common/fp8_codec.cuh"

namespace mla {
namespace {

using cuda_io::kWarpSize;

constexpr int kGatherThreads = 256;
constexpr int kGatherWarpsPerBlock = kGatherThreads / kWarpSize;
constexpr int kGatherRowsPerBlock = 32;   // rows resolved per block step (<= kGatherThreads)
constexpr int kGatherRowsPerWarp = kGatherRowsPerBlock / kGatherWarpsPerBlock;
constexpr int kGatherRowsInFlight = 4;    // rows whose loads a warp issues before converting
constexpr int kGatherStagedReqs = 256;    // up to this many requests, a block stages their starts
constexpr int kNopeChunks = DsMlaEntry::kNopeBytes / 8;    // 64 chunks of 8 FP8 bytes
constexpr int kRowChunks = DsMlaEntry::kLatentDims / 8;    // 72 chunks of 8 bf16 in an output row
constexpr int kNopeChunksPerLane = kNopeChunks / kWarpSize;                      // 2
constexpr int kRowChunksPerLane = (kRowChunks + kWarpSize - 1) / kWarpSize;      // 3

static_assert(kGatherRowsPerBlock <= kGatherThreads && kGatherRowsPerWarp % kGatherRowsInFlight == 0,
              "one thread resolves each row; warps take whole groups of rows in flight");
static_assert(kNopeChunks == 2 * kWarpSize, "fp8_ds_mla: two NoPE chunks per lane");
static_assert(DsMlaEntry::kTileDims % 8 == 0 && DsMlaEntry::kRopeBytes == 4 * kWarpSize,
              "chunks never straddle a tile; every lane copies 4 RoPE bytes");

struct GatherArgs {
  const uint8_t* cache;               // [num_blocks, page_stride_bytes]
  int64_t num_blocks;
  int64_t page_stride_bytes;
  int32_t block_size;
  const int32_t* block_table;         // [num_reqs, block_table_stride]
  int64_t block_table_stride;
  int32_t block_table_width;
  int32_t num_reqs;
  const int32_t* workspace_starts;    // [num_reqs]
  const int32_t* seq_starts;          // [num_reqs] or nullptr
  bf16_t* dst;                        // [num_rows, dst_row_stride]
  int64_t dst_row_stride;
  int64_t num_rows;
};

// The request starts a block resolves rows against: workspace_starts and seq_starts (nullptr when
// absent), in shared memory when the block staged them (num_reqs <= kGatherStagedReqs), else the
// global arrays.
struct RequestStarts {
  const int32_t* ws;
  const int32_t* seq;
};

// Byte offset of row o's entry from the cache base, or -1 when the row's source is invalid.
// The same rules, in the same order, as host::gather_source_offset.
__device__ __forceinline__ int64_t source_offset(const GatherArgs& a, const RequestStarts& st, int64_t o) {
  const int32_t r = gather_row_owner(st.ws, a.num_reqs, o);  // in [-1, num_reqs)
  if (r < 0) return -1;
  const int64_t pos = o - st.ws[r] + (st.seq ? st.seq[r] : 0);
  if (pos < 0) return -1;
  const int64_t logical = pos / a.block_size;
  if (logical >= a.block_table_width) return -1;
  const int32_t phys = __ldg(a.block_table + r * a.block_table_stride + logical);
  if (phys < 0 || phys >= a.num_blocks) return -1;
  return phys * a.page_stride_bytes + (pos % a.block_size) * DsMlaEntry::kBytes;
}

// 8 FP8 bytes -> 8 bf16: bf16_rne(e4m3_to_f32(byte) * scale), one IEEE fp32 multiply per element
// (__fmul_rn: never contracted into an FMA). Paired conversions: fp8_codec.cuh.
__device__ __forceinline__ uint4 dequant8(uint2 q, float scale) {
  const uint32_t bytes[2] = {q.x, q.y};
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const float2 v01 = cuda_codec::e4m3x2_to_f32x2(bytes[k]);        // bytes 4k, 4k + 1
    const float2 v23 = cuda_codec::e4m3x2_to_f32x2(bytes[k] >> 16);  // bytes 4k + 2, 4k + 3
    w[2 * k] = cuda_codec::f32x2_to_bf16x2(__fmul_rn(v01.x, scale), __fmul_rn(v01.y, scale));
    w[2 * k + 1] = cuda_codec::f32x2_to_bf16x2(__fmul_rn(v23.x, scale), __fmul_rn(v23.y, scale));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One row's source bytes as lane `lane` holds them, loaded before any row in flight is converted.
struct RowSource {
  bool valid;                  // source_offset() >= 0
  uint2 q[kNopeChunksPerLane];  // chunk lane + 32 k
  uint32_t rope;                // RoPE bytes [4 lane, 4 lane + 4) (one register per row)
  float scale[kNopeChunksPerLane];  // the scales of chunks lane and lane + 32
};

template <bool kVecSrc>
__device__ __forceinline__ void load_source(const GatherArgs& a, int64_t offset, RowSource& s, int lane) {
  s.valid = offset >= 0;
  if (!s.valid) return;  // the same in every lane: uniform
  const uint8_t* entry = a.cache + offset;
#pragma unroll
  for (int k = 0; k < kNopeChunksPerLane; ++k)
    s.q[k] = cuda_io::load8<kVecSrc>(entry + DsMlaEntry::kNopeOffset + 8 * (lane + kWarpSize * k));
  // Chunk c is in tile c / 16: lanes 0..15 use tiles 0 and 2, lanes 16..31 tiles 1 and 3.
  const int tile = lane / (DsMlaEntry::kTileDims / 8);
  s.scale[0] = cuda_io::load_f32<kVecSrc>(entry + DsMlaEntry::kScaleOffset + 4 * tile);
  s.scale[1] = cuda_io::load_f32<kVecSrc>(entry + DsMlaEntry::kScaleOffset + 4 * (tile + 2));
  s.rope = __float_as_uint(cuda_io::load_f32<kVecSrc>(entry + DsMlaEntry::kRopeOffset + 4 * lane));
}

template <bool kVecDst>
__device__ __forceinline__ void write_row(const RowSource& s, bf16_t* row, int lane) {
  if (!s.valid) {
    const uint32_t nan2 = static_cast<uint32_t>(kBf16QuietNaN) * 0x00010001u;
    const uint4 nan8 = make_uint4(nan2, nan2, nan2, nan2);
#pragma unroll
    for (int k = 0; k < kRowChunksPerLane; ++k) {  // 72 chunks of 8 elements = the whole row
      if (lane + kWarpSize * k < kRowChunks) cuda_io::store16<kVecDst>(row + 8 * (lane + kWarpSize * k), nan8);
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kNopeChunksPerLane; ++k)
    cuda_io::store16<kVecDst>(row + 8 * (lane + kWarpSize * k), dequant8(s.q[k], s.scale[k]));
  bf16_t* rope = row + DsMlaEntry::kNopeDims + 2 * lane;
  if constexpr (kVecDst) {
    *reinterpret_cast<uint32_t*>(rope) = s.rope;
  } else {
    rope[0] = static_cast<bf16_t>(s.rope);
    rope[1] = static_cast<bf16_t>(s.rope >> 16);
  }
}

// kVecSrc: the cache base and the page stride are 16-byte aligned (656 = 41 x 16). kVecDst: dst
// is 16-byte aligned and its row stride a multiple of 8.
template <bool kVecSrc, bool kVecDst>
__global__ void __launch_bounds__(kGatherThreads, 4) gather_kernel(const GatherArgs a) {
  __shared__ int64_t row_offset[kGatherRowsPerBlock];
  __shared__ int32_t staged_ws[kGatherStagedReqs];
  __shared__ int32_t staged_seq[kGatherStagedReqs];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;

  // One round trip for all request starts instead of a dependent global load per search step.
  RequestStarts st{a.workspace_starts, a.seq_starts};
  if (a.num_reqs <= kGatherStagedReqs) {
    for (int r = threadIdx.x; r < a.num_reqs; r += kGatherThreads) {
      staged_ws[r] = __ldg(a.workspace_starts + r);
      if (a.seq_starts) staged_seq[r] = __ldg(a.seq_starts + r);
    }
    st.ws = staged_ws;
    st.seq = a.seq_starts ? staged_seq : nullptr;
  }
  __syncthreads();

  // The loop bounds are the same for every thread of the block: __syncthreads below is safe.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGatherRowsPerBlock; base < a.num_rows;
       base += static_cast<int64_t>(gridDim.x) * kGatherRowsPerBlock) {
    if (threadIdx.x < kGatherRowsPerBlock) {
      const int64_t o = base + threadIdx.x;
      row_offset[threadIdx.x] = o < a.num_rows ? source_offset(a, st, o) : -1;
    }
    __syncthreads();

    const int first = warp * kGatherRowsPerWarp;  // this warp's rows within the block step
    for (int j = first; j < first + kGatherRowsPerWarp; j += kGatherRowsInFlight) {
      if (base + j >= a.num_rows) break;  // uniform in the warp
      RowSource src[kGatherRowsInFlight];
#pragma unroll
      for (int u = 0; u < kGatherRowsInFlight; ++u) {
        load_source<kVecSrc>(a, row_offset[j + u], src[u], lane);  // -1 past the last row
      }
#pragma unroll
      for (int u = 0; u < kGatherRowsInFlight; ++u) {
        const int64_t o = base + j + u;
        if (o < a.num_rows) write_row<kVecDst>(src[u], a.dst + o * a.dst_row_stride, lane);
      }
    }
    __syncthreads();  // row_offset is rewritten by the next step
  }
}

Status launch(const GatherArgs& a, cudaStream_t stream) {
  const unsigned grid = cuda_io::grid_blocks(a.num_rows, kGatherRowsPerBlock);
  // 8- and 16-byte loads at chunk and field offsets (multiples of 8 and 16) of each entry.
  const bool vec_src = cuda_io::aligned16(a.cache) && a.page_stride_bytes % 16 == 0;
  const bool vec_dst = cuda_io::aligned16(a.dst) && a.dst_row_stride % 8 == 0;
  if (vec_src && vec_dst) {
    gather_kernel<true, true><<<grid, kGatherThreads, 0, stream>>>(a);
  } else if (vec_src) {
    gather_kernel<true, false><<<grid, kGatherThreads, 0, stream>>>(a);
  } else if (vec_dst) {
    gather_kernel<false, true><<<grid, kGatherThreads, 0, stream>>>(a);
  } else {
    gather_kernel<false, false><<<grid, kGatherThreads, 0, stream>>>(a);
  }
  MLA_CUDA_CHECK_LAUNCH("gather_kernel");
  return Status();
}

GatherArgs make_args(const GatherParams& g) {
  return GatherArgs{g.cache.data,         g.cache.num_blocks,  g.cache.page_stride_bytes,
                    g.cache.block_size,   g.block_table,       g.block_table_stride,
                    g.block_table_width,  g.num_reqs,          g.workspace_starts,
                    g.seq_starts,         g.dst,               g.dst_row_stride,
                    g.num_rows};
}

}  // namespace

Status launch_gather(const GatherParams& p, cudaStream_t stream) {
  MLA_RETURN_IF_ERROR(p.validate());
  if (p.num_rows == 0) return Status();
  return launch(make_args(p), stream);
}

}  // namespace mla
