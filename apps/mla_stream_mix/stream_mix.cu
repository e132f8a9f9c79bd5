// mla-stream-mix: how close to the device-to-device copy rate a kernel gets that moves the gather's
// byte mix (per row: read one 656-byte entry, write 1152 bytes) without the gather's work, in
// steps towards it: contiguous rows (mix_blocks, the gather's block shape: 32 rows per block of 256
// threads, 4 rows in flight per warp), grid-stride variants of it, the rows in shuffled pages of 64
// entries behind a page-table load (mix_blocks_paged, as the gather benchmark's cache), the same
// load without the shuffle (_id: what the dependent load alone costs), shuffled among only the
// pages the rows use (_cmp: mla-bench's compact pool) and in shuffled pages of 256 entries
// (paged256), and that with the gather's load instructions (mix_blocks_paged_gl), and the paged rows brought in by the
// bulk-copy engine, 32 or 64 rows per copy (mix_bulk_paged32 / 64; _bs: written back by bulk copy
// too) and in the pack's pipelined persistent shape (mix_pipe_paged), each checked byte for byte
// against mix_blocks_paged at 64k rows. The same for the pack's
// byte mix (per token: read a 1152-byte kv row and an 8-byte slot, write one 656-byte entry;
// pack_mix, and pack_mix_paged with the slots in shuffled pages). Bounds for mla-bench's gather
// and pack figures (docs/performance.md), not benchmarks of our kernels. Per size: the L2 flushed
// by a 512 MiB read pass before each launch, CUDA events, median of 15 after 3 warm-ups; "% copy"
// is against a 2 GiB cudaMemcpyAsync measured first (read + written bytes, as mla-bench's
// pct_of_copy_bw).
// Run: build/bin/mla-stream-mix (CUDA builds; needs about 6.3 GiB of device memory).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>
#include <vector>

// Exits with the failing call named (a measurement after a failed launch would print garbage).
static void require(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "mla-stream-mix: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
#define CK(x) require((x), #x)

// 0 .. n - 1 in a fixed pseudo-random order (Fisher-Yates driven by a 64-bit LCG from `seed`).
static std::vector<int> shuffled(int n, uint64_t seed) {
  std::vector<int> perm(n);
  for (int i = 0; i < n; ++i) perm[i] = i;
  for (int i = n - 1; i > 0; --i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(perm[i], perm[(int)((seed >> 33) % (uint64_t)(i + 1))]);
  }
  return perm;
}

__global__ void flush_read(const uint4* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345679u) *sink = acc;
}

// One row as a warp moves it: lanes 0..31 load 16-byte chunk `lane` of the 41 (656 bytes) at `e`,
// lanes 0..8 chunk 32 + lane; every lane stores chunks lane and 32 + lane of the row's 72 (1152
// bytes), lanes 0..7 chunk 64 + lane.
__device__ __forceinline__ void load_row(const uint4* e, int lane, uint4& a, uint4& b) {
  b = make_uint4(0, 0, 0, 0);
  a = e[lane];
  if (lane < 9) b = e[32 + lane];
}
__device__ __forceinline__ void store_row(uint4* d, int lane, const uint4& a, const uint4& b) {
  d[lane] = a;
  d[32 + lane] = make_uint4(a.y, a.z, a.w, a.x ^ b.x);
  if (lane < 8) d[64 + lane] = b;
}

// Grid-stride: warp w takes rows [w K, w K + K), then + warps K. Loads of K rows before stores.
template <int K>
__global__ void mix_stride(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t rows) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5;
  const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t r0 = warp * K; r0 < rows; r0 += nwarps * K) {
    uint4 a[K], b[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (r0 + k < rows) load_row(src + (r0 + k) * 41, lane, a[k], b[k]);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (r0 + k < rows) store_row(dst + (r0 + k) * 72, lane, a[k], b[k]);
    }
  }
}

// The gather's block shape without its work: a block of 256 threads per 32 consecutive rows, each
// warp 4 rows with their loads in flight; one block per 32 rows (not persistent). kPaged: the
// source rows in pages of 64 entries of 656 bytes (41,984 bytes, 16-aligned), the pages in a
// shuffled order (page_of[r / 64], one dependent load per row), as the gather benchmark's cache.
template <bool kPaged, int kPageRows = 64>
__global__ void __launch_bounds__(256, 4) mix_blocks(const uint4* __restrict__ src, const int* __restrict__ page_of,
                                                     uint4* __restrict__ dst, int64_t rows) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r0 = blockIdx.x * 32LL + warp * 4;
  uint4 a[4], b[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t r = r0 + k;
    if (r >= rows) continue;
    const int64_t entry = kPaged ? (int64_t)__ldg(page_of + r / kPageRows) * kPageRows + r % kPageRows : r;
    load_row(src + entry * 41, lane, a[k], b[k]);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (r0 + k < rows) store_row(dst + (r0 + k) * 72, lane, a[k], b[k]);
  }
}

// The same with the gather's load shape: per lane two 8-byte loads (512 NoPE bytes per warp), two
// 4-byte scale loads and one 4-byte RoPE load per row (5 load instructions instead of 2).
__global__ void __launch_bounds__(256, 4) mix_blocks_paged_gl(const uint8_t* __restrict__ src, const int* __restrict__ page_of,
                                                              uint4* __restrict__ dst, int64_t rows) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r0 = blockIdx.x * 32LL + warp * 4;
  uint2 q[4][2];
  uint32_t sc[4][2], rope[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t r = r0 + k;
    if (r < rows) {
      const uint8_t* e = src + (int64_t)__ldg(page_of + r / 64) * 41984 + (r % 64) * 656;
      q[k][0] = *reinterpret_cast<const uint2*>(e + 8 * lane);
      q[k][1] = *reinterpret_cast<const uint2*>(e + 256 + 8 * lane);
      sc[k][0] = *reinterpret_cast<const uint32_t*>(e + 512 + 4 * (lane / 16));
      sc[k][1] = *reinterpret_cast<const uint32_t*>(e + 512 + 4 * (lane / 16 + 2));
      rope[k] = *reinterpret_cast<const uint32_t*>(e + 528 + 4 * lane);
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int64_t r = r0 + k;
    if (r < rows) {
      uint4* d = dst + r * 72;
      d[lane] = make_uint4(q[k][0].x, q[k][0].y, sc[k][0], q[k][0].x);
      d[32 + lane] = make_uint4(q[k][1].x, q[k][1].y, sc[k][1], q[k][1].y);
      reinterpret_cast<uint32_t*>(d + 64)[lane] = rope[k];
    }
  }
}

// The paged mix in the committed pack's shape (kernels/cuda/cache/pack.cu): a persistent grid, a
// warp per row and step, the next step's page-table load and row loads issued before this step's
// row is stored.
__global__ void __launch_bounds__(256) mix_pipe_paged(const uint4* __restrict__ src, const int* __restrict__ page_of,
                                                      uint4* __restrict__ dst, int64_t rows) {
  const int lane = threadIdx.x & 31;
  const int64_t step = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  auto load = [&](int64_t row, uint4& a, uint4& b) {
    if (row < rows) load_row(src + ((int64_t)__ldg(page_of + row / 64) * 64 + row % 64) * 41, lane, a, b);
  };
  uint4 a, b, na, nb;
  load(r, a, b);
  for (; r < rows; r += step) {
    load(r + step, na, nb);
    store_row(dst + r * 72, lane, a, b);
    a = na;
    b = nb;
  }
}

// The same paged mix through the bulk-copy engine (TMA without a tensor map): a block of 256
// threads per kRows consecutive rows (kRows divides the 64-row page, so the rows are one run of
// kRows * 656 contiguous bytes of one page); thread 0 brings the run into shared memory with one
// cp.async.bulk completing on an mbarrier; the warps then store each row as load_row / store_row
// would. kBulkStore: the rows are assembled in shared memory and written back by one bulk copy
// (kRows * 1152 contiguous bytes) instead of by the warps' 16-byte stores.
template <int kRows, bool kBulkStore>
__global__ void __launch_bounds__(256) mix_bulk_paged(const uint8_t* __restrict__ src, const int* __restrict__ page_of,
                                                      uint8_t* __restrict__ dst, int64_t rows) {
  static_assert(64 % kRows == 0 && kRows % 8 == 0, "whole runs inside a page, whole rows per warp");
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ __align__(8) uint64_t bar;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r0 = blockIdx.x * static_cast<int64_t>(kRows);
  const int n = rows - r0 < kRows ? static_cast<int>(rows - r0) : kRows;
  const uint32_t sbar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  const uint32_t sin = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sbar) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint8_t* g = src + static_cast<int64_t>(__ldg(page_of + r0 / 64)) * 41984 + (r0 % 64) * 656;
    const uint32_t bytes = static_cast<uint32_t>(n) * 656;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sbar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(sin),
                 "l"(g), "r"(bytes), "r"(sbar)
                 : "memory");
  }
  {
    uint32_t done = 0;
    while (!done) {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(sbar)
          : "memory");
    }
  }
  uint8_t* out = smem + kRows * 656;  // kBulkStore: the assembled rows
  for (int i = warp; i < n; i += 8) {
    uint4 a, b;
    load_row(reinterpret_cast<const uint4*>(smem + i * 656), lane, a, b);
    store_row(reinterpret_cast<uint4*>(kBulkStore ? out + i * 1152 : dst + (r0 + i) * 1152), lane, a, b);
  }
  if constexpr (kBulkStore) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst + r0 * 1152),
                   "r"(static_cast<uint32_t>(__cvta_generic_to_shared(out))), "r"(static_cast<uint32_t>(n) * 1152)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
      asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    }
  }
}

// The pack's byte mix without its work, in the pack's shape (a warp per token, two tokens' loads in
// flight, 16 tokens per block of 256 threads): per token, lane l loads 32 bytes of the 1152-byte kv
// row (the 1024 NoPE bytes), lanes 0..7 16 bytes more (the 128 RoPE bytes), every lane the 8-byte
// slot; lane l stores 16 bytes of the entry at the slot (its 512 FP8 bytes), lanes 0..3 4 bytes
// (the scales), lanes 0..7 16 bytes (the RoPE part): 656.
__global__ void __launch_bounds__(256) pack_mix(const uint4* __restrict__ kv, const int64_t* __restrict__ slots,
                                                uint8_t* __restrict__ cache, int64_t tokens) {
  const int lane = threadIdx.x & 31;
  const int64_t t0 = (blockIdx.x * 8LL + (threadIdx.x >> 5)) * 2;
  uint4 x0[2], x1[2], rope[2];
  int64_t slot[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int64_t t = t0 + k;
    slot[k] = -1;
    if (t >= tokens) continue;
    slot[k] = __ldg(slots + t);
    x0[k] = kv[t * 72 + 2 * lane];
    x1[k] = kv[t * 72 + 2 * lane + 1];
    rope[k] = make_uint4(0, 0, 0, 0);
    if (lane < 8) rope[k] = kv[t * 72 + 64 + lane];
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    if (slot[k] < 0) continue;
    uint8_t* e = cache + slot[k] * 656;
    *reinterpret_cast<uint4*>(e + 16 * lane) =
        make_uint4(x0[k].x ^ x1[k].x, x0[k].y ^ x1[k].y, x0[k].z ^ x1[k].z, x0[k].w ^ x1[k].w);
    if (lane < 4) reinterpret_cast<uint32_t*>(e + 512)[lane] = x0[k].x;
    if (lane < 8) *reinterpret_cast<uint4*>(e + 528 + 16 * lane) = rope[k];
  }
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("mla-stream-mix on %s (%d SMs)\n", prop.name, sms);
  CK(cudaFuncSetAttribute(mix_bulk_paged<32, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, 32 * (656 + 1152)));
  const size_t flush_bytes = size_t{512} << 20;
  const int64_t max_rows = 1 << 20;
  void *fl, *src, *dst, *big_a, *big_b;
  unsigned* sink;
  CK(cudaMalloc(&fl, flush_bytes));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&src, max_rows * 656));
  CK(cudaMalloc(&dst, max_rows * 1152));
  CK(cudaMemset(fl, 1, flush_bytes));
  CK(cudaMemset(src, 0x5A, max_rows * 656));
  CK(cudaMemset(dst, 0, max_rows * 1152));
  // Shuffled pages (a fixed LCG permutation of the 16,384 pages of 64 rows).
  int* page_of;
  int64_t *slots_flat, *slots_paged;
  const int pages = (int)(max_rows / 64);
  {
    const std::vector<int> perm = shuffled(pages, 20240901);
    CK(cudaMalloc(&page_of, pages * sizeof(int)));
    CK(cudaMemcpy(page_of, perm.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
    // The pack's slots: token t to entry t (contiguous) or to entry t % 64 of page perm[t / 64].
    std::vector<int64_t> s(static_cast<size_t>(max_rows));
    for (int64_t t = 0; t < max_rows; ++t) s[t] = t;
    CK(cudaMalloc(&slots_flat, max_rows * sizeof(int64_t)));
    CK(cudaMemcpy(slots_flat, s.data(), max_rows * sizeof(int64_t), cudaMemcpyHostToDevice));
    for (int64_t t = 0; t < max_rows; ++t) s[t] = static_cast<int64_t>(perm[t / 64]) * 64 + t % 64;
    CK(cudaMalloc(&slots_paged, max_rows * sizeof(int64_t)));
    CK(cudaMemcpy(slots_paged, s.data(), max_rows * sizeof(int64_t), cudaMemcpyHostToDevice));
  }
  // The same page table without the shuffle (page r / 64 holds rows r / 64 * 64 ..: the dependent
  // load without the random order), and per size a shuffle of only the pages the rows use (the
  // footprint of mla-bench's gather cache instead of all 16,384 pages).
  int *page_of_id, *page_of_compact;
  {
    std::vector<int> id(pages);
    for (int i = 0; i < pages; ++i) id[i] = i;
    CK(cudaMalloc(&page_of_id, pages * sizeof(int)));
    CK(cudaMemcpy(page_of_id, id.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&page_of_compact, pages * sizeof(int)));
  }
  // Pages of 256 entries (167,936 bytes) in a shuffled order: the cost of the shuffle against the
  // size of the contiguous pieces it leaves.
  int* page_of_256;
  {
    const std::vector<int> perm = shuffled(pages / 4, 4242);
    CK(cudaMalloc(&page_of_256, pages / 4 * sizeof(int)));
    CK(cudaMemcpy(page_of_256, perm.data(), pages / 4 * sizeof(int), cudaMemcpyHostToDevice));
  }
  const size_t big = size_t{2} << 30;
  CK(cudaMalloc(&big_a, big));
  CK(cudaMalloc(&big_b, big));
  CK(cudaMemset(big_a, 0x5A, big));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto flush = [&] { flush_read<<<sms * 4, 512>>>((const uint4*)fl, flush_bytes / 16, sink); };
  // `op` enqueues the work and returns its launch / call status; every step is checked.
  auto timeit = [&](auto&& op, bool do_flush) {
    std::vector<float> t;
    for (int i = 0; i < 18; ++i) {
      if (do_flush) {
        flush();
        require(cudaGetLastError(), "L2 flush launch");
      }
      require(cudaEventRecord(e0), "cudaEventRecord");
      require(op(), "timed operation");
      require(cudaEventRecord(e1), "cudaEventRecord");
      require(cudaEventSynchronize(e1), "the timed operation (asynchronous error)");
      float ms = 0;
      require(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
      if (i >= 3) t.push_back(ms * 1e3f);
    }
    std::sort(t.begin(), t.end());
    return (double)t[t.size() / 2];
  };
  const double tbig = timeit([&] { return cudaMemcpyAsync(big_b, big_a, big, cudaMemcpyDeviceToDevice); }, false);
  const double copy_rate = 2.0 * big / (tbig * 1e-6);
  printf("copy 2 GiB: %.1f us, %.3f TB/s (read + written)\n", tbig, copy_rate / 1e12);
  CK(cudaFree(big_a));
  CK(cudaFree(big_b));
  printf("%-28s %8s %8s %8s\n", "kernel/rows", "us", "TB/s", "%copy");
  for (int64_t rows : {16384LL, 65536LL, 262144LL, 1048576LL}) {
    const double bytes = 1808.0 * rows;
    auto report = [&](const char* name, double us) {
      printf("%-20s/%-7lld %8.2f %8.3f %8.1f\n", name, (long long)rows, us, bytes / (us * 1e-6) / 1e12,
             100.0 * bytes / (us * 1e-6) / copy_rate);
    };
    // A copy whose read + written bytes are the rows' 1808 each, while it fits in src.
    if (bytes / 2 <= static_cast<double>(max_rows) * 656) {
      report("sized_copy", timeit([&] { return cudaMemcpyAsync(dst, src, (size_t)(bytes / 2), cudaMemcpyDeviceToDevice); }, true));
    }
    report("mix_blocks_paged", timeit([&] { mix_blocks<true><<<(unsigned)((rows + 31) / 32), 256>>>((const uint4*)src, page_of, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    {
      const int used = (int)((rows + 63) / 64);
      const std::vector<int> perm = shuffled(used, 20261130);
      CK(cudaMemcpy(page_of_compact, perm.data(), used * sizeof(int), cudaMemcpyHostToDevice));
    }
    report("mix_blocks_paged_id", timeit([&] { mix_blocks<true><<<(unsigned)((rows + 31) / 32), 256>>>((const uint4*)src, page_of_id, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    report("mix_blocks_paged_cmp", timeit([&] { mix_blocks<true><<<(unsigned)((rows + 31) / 32), 256>>>((const uint4*)src, page_of_compact, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    report("mix_blocks_paged256", timeit([&] { mix_blocks<true, 256><<<(unsigned)((rows + 31) / 32), 256>>>((const uint4*)src, page_of_256, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    report("mix_blocks_paged_gl", timeit([&] { mix_blocks_paged_gl<<<(unsigned)((rows + 31) / 32), 256>>>((const uint8_t*)src, page_of, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    // The bulk-copy rows, each checked byte for byte against mix_blocks_paged's output at 64k rows.
    auto bulk = [&](auto kernel, int rows_per_block, int smem_bytes) {
      return [=] {
        kernel<<<(unsigned)((rows + rows_per_block - 1) / rows_per_block), 256, smem_bytes>>>((const uint8_t*)src, page_of,
                                                                                            (uint8_t*)dst, rows);
        return cudaGetLastError();
      };
    };
    const auto bulk32 = bulk(mix_bulk_paged<32, false>, 32, 32 * 656);
    const auto bulk64 = bulk(mix_bulk_paged<64, false>, 64, 64 * 656);
    const auto bulk32s = bulk(mix_bulk_paged<32, true>, 32, 32 * (656 + 1152));
    int pipe_per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&pipe_per_sm, mix_pipe_paged, 256, 0));
    const int64_t pipe_blocks = std::min<int64_t>((rows + 7) / 8, static_cast<int64_t>(sms) * pipe_per_sm);
    const auto pipe = [=] {
      mix_pipe_paged<<<(unsigned)pipe_blocks, 256>>>((const uint4*)src, page_of, (uint4*)dst, rows);
      return cudaGetLastError();
    };
    if (rows == 65536) {
      mix_blocks<true><<<(unsigned)((rows + 31) / 32), 256>>>((const uint4*)src, page_of, (uint4*)dst, rows);
      require(cudaGetLastError(), "mix_blocks_paged (reference)");
      std::vector<uint8_t> want(static_cast<size_t>(rows) * 1152), got(want.size());
      CK(cudaMemcpy(want.data(), dst, want.size(), cudaMemcpyDeviceToHost));
      const std::pair<const char*, std::function<cudaError_t()>> checks[] = {
          {"mix_bulk_paged32", bulk32}, {"mix_bulk_paged64", bulk64}, {"mix_bulk_paged32_bs", bulk32s},
          {"mix_pipe_paged", pipe}};
      for (const auto& [name, op] : checks) {
        CK(cudaMemset(dst, 0, want.size()));
        require(op(), name);
        CK(cudaMemcpy(got.data(), dst, got.size(), cudaMemcpyDeviceToHost));
        if (got != want) {
          std::fprintf(stderr, "mla-stream-mix: %s wrote other bytes than mix_blocks_paged\n", name);
          std::exit(1);
        }
      }
    }
    report("mix_bulk_paged32", timeit(bulk32, true));
    report("mix_bulk_paged64", timeit(bulk64, true));
    report("mix_bulk_paged32_bs", timeit(bulk32s, true));
    report("mix_pipe_paged", timeit(pipe, true));
    report("mix_blocks", timeit([&] { mix_blocks<false><<<(unsigned)((rows + 31) / 32), 256>>>((const uint4*)src, page_of, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    // Grid-stride with 8 blocks of 256 threads per SM (4 per SM was within 2 points of it in the first run, 2026-11-30).
    report("mix_stride2_b8", timeit([&] { mix_stride<2><<<sms * 8, 256>>>((const uint4*)src, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    report("mix_stride4_b8", timeit([&] { mix_stride<4><<<sms * 8, 256>>>((const uint4*)src, (uint4*)dst, rows); return cudaGetLastError(); }, true));
    // The pack's mix: 1816 bytes per token (the kv rows in dst, the entries written into src).
    auto report_pack = [&](const char* name, double us) {
      const double pack_bytes = 1816.0 * rows;
      printf("%-20s/%-7lld %8.2f %8.3f %8.1f\n", name, (long long)rows, us, pack_bytes / (us * 1e-6) / 1e12,
             100.0 * pack_bytes / (us * 1e-6) / copy_rate);
    };
    const unsigned pack_blocks = (unsigned)((rows + 15) / 16);
    report_pack("pack_mix", timeit([&] { pack_mix<<<pack_blocks, 256>>>((const uint4*)dst, slots_flat, (uint8_t*)src, rows); return cudaGetLastError(); }, true));
    report_pack("pack_mix_paged", timeit([&] { pack_mix<<<pack_blocks, 256>>>((const uint4*)dst, slots_paged, (uint8_t*)src, rows); return cudaGetLastError(); }, true));
  }
  CK(cudaGetLastError());
  for (void* p : {fl, src, dst, static_cast<void*>(sink), static_cast<void*>(page_of), static_cast<void*>(page_of_id),
                  static_cast<void*>(page_of_compact), static_cast<void*>(page_of_256), static_cast<void*>(slots_flat),
                  static_cast<void*>(slots_paged)}) {
    CK(cudaFree(p));
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return 0;
}
