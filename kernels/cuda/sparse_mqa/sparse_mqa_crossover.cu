// Sparse MQA over the fp8_ds_mla cache (docs/semantics.md §4.1) for Hopper, `crossover`
// implementation: the `wgmma` kernel's products and online softmax (sparse_mqa_wgmma.cu) with the
// key dequantization split between the two CTAs of a cluster and run by a producer warpgroup beside
// the matrix products. Built only for sm_90a (kernels/CMakeLists.txt); launch_sparse_mqa runs it
// where the policy asks for it and the item's head groups come in pairs (sparse_mqa_launcher.h).
//
// Why: dequantizing a key (512 FP8 values times their tile scales, rounded to bf16) for the 64
// heads of a CTA costs more CUDA-core issue than the key's two products cost tensor-core time, so a
// CTA that dequantizes every key it multiplies waits on its dequantization. The two CTAs of a
// cluster work on one work item (token, columns [k_begin, k_end)) at a time, for head groups 2c
// and 2c + 1 (block = item * head_groups + group, head_groups even: blocks 2u and 2u + 1 are one
// item's pair); per 64-column tile CTA rank r dequantizes columns 32 r .. 32 r + 31 only and
// writes each bf16 row into its own K tile and, through distributed shared memory, into its
// partner's K tile at the same offset (st.async: the store's bytes count against the partner's
// full barrier of that stage). Each CTA then multiplies all 64 columns for its 64 heads.
//
// Persistent: the grid is as many clusters as are resident at once (cudaOccupancyMaxActiveClusters,
// at most one per pair of blocks); CTA blockIdx.x runs blocks blockIdx.x, + gridDim.x, ... (gridDim.x
// is even, so rank r = blockIdx.x % 2 always runs head group parity r of the same item as its
// partner). Each CTA counts its tiles over all its blocks (g: stage g & 1, its (g >> 1)-th use), so
// the producer fills the next block's first tiles while the consumers finish the current block,
// and the next block's Q copies are issued after the current block's last S, so that they overlap
// the current block's last P V and row write. Where an item's time goes with one CTA per block
// (FlashMLA's decode shape, 32 tiles, on an H100; clock64 stamps per phase in an instrumented
// build, medians over the 512 CTAs): about 197,000 cycles, of which 32 tiles at about 5,300 each,
// the Q copies about 9,400 (the copies of 256 threads wait on the memory system's queue, not on
// their issue), the row write about 14,900 and the barriers and first tile about 5,000. The
// persistent grid hides the CTA start, the Q copies and the producer's first tiles, not the row
// write: 0.98-0.99 of the time with one CTA per block at four waves of items (docs/performance.md).
// Per tile in the persistent kernel at that shape (with the softmax's exponentials by expf, commit
// 6b21f28; ex2.approx takes 3 % off the shape's time; producer warp 0, medians over 16,000 tiles; the
// SM clock 1.80 GHz by clock64 against globaltimer): about 5,200 cycles, of which about 1,400 issue
// the 8 keys' loads and wait for the free stage, 1,500 more wait for the first key's bytes (about
// 2,900 from the loads' issue to their data) and 2,000 convert and store the 8 keys. The consumers'
// tile took as long, so a faster side alone waits on the other. Measured slower at that shape and
// not used: staging the accumulators as fp32 in the last K stage and dividing, rounding and storing
// them in one rolled loop (the row write then about 21,000 cycles; 1.7 % slower, 2.8 % at 4 query
// tokens); asking L2 for the next tile's entries beside a tile's loads (the data arrives sooner,
// but the tile period grows to about 5,500 cycles; 4 % slower); FlashMLA's split of the consumers,
// one warpgroup computing S over all 64 columns (m64n64k16, 4 KiB of shared memory per 32 tensor
// cycles instead of 6 KiB), the softmax and P V for half the dims, the other only P V for the other
// half (with ex2.approx: 4 % slower at the decode shape and 44 % at batch 1 x 2, though 7 % faster at
// top-k 8192; with the producer's loads also issued a tile ahead, 11 % slower). Loading the
// consumers' slots a tile ahead of their ballot changes no key shape's time by more than 0.5 %.
//
// CTA = 384 threads, one CTA per SM, clusters of 2 (__cluster_dims__):
//   warpgroup 0, producer (setmaxnreg 88): warp w dequantizes keys 8 w .. 8 w + 7 of the CTA's half
//     of each tile (rows 32 r + 8 w + k of K stage g & 1). Lanes 0..7 hold the slots (the next
//     tile's index loads are issued beside this tile's entry loads); a column past the item's range
//     or a slot outside [0, num_slots) is invalid. Every lane loads, for all 8 keys before
//     converting any, bytes [8 l, 8 l + 8) and [256 + 8 l, + 8) of the entry's FP8 part, scale word
//     l % 4 (the two scales it needs come by shuffle) and RoPE word l; converts with dequant8 (the
//     gather's bits) and stores each 16-byte chunk to its own stage (st.shared) and to the
//     partner's (st.async at the mapa address, completing bytes on the partner's full[s]). An
//     invalid key's row is written as zeros
//     (loads skipped; zero bytes times a zero scale dequantize to +0), so that P V never multiplies
//     stale bytes. The 16-byte stores of 8 lanes cover one 128-byte row of a swizzled block: no
//     bank conflicts.
//   warpgroups 1, 2, consumers (setmaxnreg 208): the `wgmma` kernel's two warpgroups. Consumer c
//     computes S[64 heads][columns 32 c .. 32 c + 31] over the 576 depth (36 x m64n32k16, A = Q,
//     B = K from shared memory, K-major), the online softmax on the accumulators with the row's
//     tile max exchanged through shared memory, P = bf16(p) to shared memory, and O[64][dims
//     256 c .. 256 c + 255] += P V (4 k16 steps x 2 m64n128k16, B = the first 512 dims of the K
//     stage, MN-major with the transpose bit), left in flight into the next tile. The validity of
//     its 32 columns comes from the index row (one load per lane, a ballot), the producer's rule.
//   Per tile g of the CTA (stage s = g & 1, its (g >> 1)-th use: parity (g >> 1) & 1):
//     producer: entry loads; wait empty[s] (g >= 2: both CTAs' consumers are done with tile
//       g - 2); dequantize and store; fence.proxy.async (its own rows, st.shared, before the
//       consumers' wgmma reads); arrive on its own full[s] (release, CTA scope), thread 0 with
//       expect_tx of the partner's half (32 rows x 1152 bytes, which the partner's st.async
//       complete). No cluster-scope release per tile: the partner's rows are published by the
//       transaction count, not by a fence.
//     consumers: ballot of valid columns; wgmma_wait<0> (P V of tile g - 1 done; lane 0 of each
//       warp then arrives on empty[(g - 1) & 1] of both CTAs when the CTA has a tile g + 1, which
//       reuses that stage; for a block's last tile that arrival comes after the block's final
//       wgmma_wait); wait full[s] (acquire, cluster scope), fence.proxy.async (the partner's
//       st.async rows, then read by wgmma); S_g; softmax; (C1) named barrier of the 256
//       consumer threads: both tile maxima visible, both P V of tile g - 1 done; P, O *= factor,
//       fence.proxy.async; (C2) named barrier: P complete, both warpgroups' S_g done; issue P V_g.
//       (Waiting for P V_{g-1} with wgmma_wait<1> after issuing S_g made ptxas serialize every
//       wgmma, C7514.)
//   mbarriers (per CTA): full[2], 128 arrivals (this CTA's producer threads) and 36,864 bytes of
//   transactions (the partner's half; complete when both halves of the stage are written; a
//   partner's st.async may land before this CTA's expect_tx, which the transaction count allows),
//   empty[2], 16 arrivals (lane 0 of every consumer warp of both CTAs, after wgmma_wait: the
//   warpgroup's reads of the stage are complete; the arrivals publish no data, so they release
//   at CTA scope, the default, and the producer's wait acquires at CTA scope).
//   Per block, consumers: Q copies (unless issued after the previous block's tile loop: its last
//   C2 saw both warpgroups' last S, the only reads of Q) and their wait, (B) named barrier (Q
//   complete; also every thread done reading s_sum in the previous block's row write, which this
//   block's row write overwrites), the tiles, the final wgmma_wait, the row write. g counts at
//   most ceil(blocks / gridDim.x) x ceil(topk / 64) tiles, within uint32 for any grid the launcher
//   accepts (blocks < 2^31) and top-k below 2^12 x gridDim.x.
//   A cluster barrier after the mbarrier inits (the partner's st.async complete on them and write
//   the K stages) and one before exit (no CTA leaves while its partner may still reach its shared
//   memory).
// Results equal the `wgmma` kernel's bit for bit: the same bf16 keys (dequant8, the gather's bits),
// and the same product, softmax and epilogue steps (sparse_mqa_wgmma_steps.cuh) in the same order
// (test_cuda_attention's SparseMqaMatchesHost compares the bits).
//
// Shared memory (dynamic, 231,456 bytes), every bf16 tile in 128-byte-swizzled column blocks of
// [64 rows][64 bf16] = 8 KiB (layout and descriptors: wgmma_device.cuh):
//   Q [64 heads][576] 9 blocks | K[2] [64 columns][576] 9 blocks each | P [64][64] 1 block |
//   tile max [2][64] | l [2][64] fp32 | full[2], empty[2] mbarriers | + up to 1 KiB to align the base.
// The raw FP8 entries never touch shared memory (loaded into the producer's registers): Q and two
// K stages (216 KiB) leave no room for a raw staging tile within the 227 KiB opt-in limit.
// Descriptors: Q / K / P K-major (SBO 1024; k16 step kk: + 8 KiB * (kk / 4) + 32 B * (kk % 4));
// V MN-major (SBO 1024 = next 8 keys, LBO 8 KiB = next 64 dims; k16 step kk: + 2 KiB * kk); the
// stage adds 72 KiB (a multiple of 1024).
// Registers: 168 per thread at launch (__launch_bounds__(384, 1)); the producer releases
// 128 x (168 - 88), the consumers take 256 x (208 - 168): equal, as setmaxnreg.inc needs. No
// spills (ptxas -v). Plain st.shared::cluster stores published by a cluster-scope release would
// cost a MEMBAR.GPU per producer thread and tile; st.async needs none.
// The Q tile's cp.async group is committed before it is waited on: cp.async.wait_group covers
// committed groups only, and an uncommitted copy may still be in flight when S first reads Q.
#include "kernels/cuda/sparse_mqa/sparse_mqa_impls.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common/ds_mla_entry.h"
#include "kernels/cuda/common/attention_device.cuh"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/device_probe.h"
#include "kernels/cuda/common/wgmma_device.cuh"
#include "kernels/cuda/sparse_mqa/sparse_mqa_wgmma_steps.cuh"

namespace mla::sparse_crossover {
namespace {

using namespace sparse_dev;  // NOLINT: this file's kernel is the header's user

constexpr int kConsumerWgs = 2;
constexpr int kThreads = 128 * (1 + kConsumerWgs);
constexpr int kConsumerThreads = 128 * kConsumerWgs;
constexpr int kProducerRegs = 88;
constexpr int kConsumerRegs = 208;
constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
constexpr int kHeads = kCrossoverHeads;
constexpr int kHalf = kTile / 2;       // columns of a tile each CTA of the pair dequantizes
constexpr int kBatch = 8;              // keys per producer warp and tile, loads all issued before converting
constexpr int kBlockBytes = kWgmmaBlockBytes;
constexpr int kBlocks = kDl / 64;      // 9 column blocks per Q / K row (8 nope + 1 RoPE)
constexpr int kTileBytes = kBlocks * kBlockBytes;
constexpr int kOffQ = 0;
constexpr int kOffK = kOffQ + kTileBytes;  // two stages
constexpr int kOffP = kOffK + 2 * kTileBytes;
constexpr int kOffMax = kOffP + kBlockBytes;
constexpr int kOffSum = kOffMax + 2 * kHeads * 4;
constexpr int kOffBar = kOffSum + 2 * kHeads * 4;
constexpr int kSmemBytes = 1024 + kOffBar + 4 * 8;
constexpr int kFullArrivals = 128;                  // this CTA's producer threads
constexpr uint32_t kPartnerHalfBytes = kHalf * kDl * 2;  // the partner's rows of a stage (st.async)
static_assert(kPartnerHalfBytes == 128 * kBatch * (16 + 16 + 4) && kPartnerHalfBytes < (1u << 20),
              "every producer thread sends 8 keys x 36 bytes per tile; within an mbarrier's transaction range");
constexpr int kEmptyArrivals = 2 * 4 * kConsumerWgs;  // lane 0 of every consumer warp of both CTAs
constexpr int kConsumerBarrier = 1;                 // named barrier of the consumer warpgroups
static_assert(kLaunchRegs == 168, "384 threads");
static_assert(128 * (kLaunchRegs - kProducerRegs) >= kConsumerThreads * (kConsumerRegs - kLaunchRegs),
              "setmaxnreg: the consumers' increase must come from the producer's release");
static_assert(kConsumerThreads == 32 * kStageWarps && kHeads == kStageHeads, "load_q_tile's CTA shape");
static_assert(kHeads == kWgmmaHeads && kHeads == 64 && kTile == 64 && kDl == 576 && kDc == 512, "m64 tiles of 64 heads x 64 columns");
static_assert(kHalf == 4 * kBatch && kBatch == 8, "4 producer warps x 8 keys per half tile (swizzle phase = key)");
static_assert(kOffK % 1024 == 0 && kTileBytes % 1024 == 0 && kOffP % 1024 == 0, "swizzled blocks 1024-byte aligned");
static_assert(kOffBar % 8 == 0, "mbarriers are 8-byte aligned");
static_assert(kSmemBytes == 231456, "one CTA per SM, within the 227 KiB opt-in limit");
static_assert(DsMlaEntry::kNopeBytes == 512 && DsMlaEntry::kTileDims == 128 && kDr * 2 == 128,
              "a lane's 2 x 8 FP8 bytes, 2 scales and one RoPE word per entry");

__host__ __device__ constexpr uint32_t bar_full(int s) { return kOffBar + 8 * s; }
__host__ __device__ constexpr uint32_t bar_empty(int s) { return kOffBar + 16 + 8 * s; }

#if MLA_WGMMA_ENABLED

// Byte offset of logical 16-byte chunk `chunk` (0..71: 8 bf16 each) of row `row` in a Q / K tile.
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return static_cast<uint32_t>((chunk >> 3) * kBlockBytes) + attn_dev::swizzled(row, chunk & 7, 128);
}

// --- clusters and distributed shared memory ----------------------------------------------------
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// The shared::cluster address of `addr` (a shared::cta address of this CTA) in CTA `rank`.
__device__ __forceinline__ uint32_t map_to_rank(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// Every thread of both CTAs: arrive (release, cluster scope), then wait (acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}
// Stores to the partner's shared memory at shared::cluster address `addr`; the bytes, once written,
// complete that many transactions of the partner's mbarrier at shared::cluster address `bar`.
__device__ __forceinline__ void st_async_v4(uint32_t addr, uint4 v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void st_async_u32(uint32_t addr, uint32_t v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(addr), "r"(v),
               "r"(bar)
               : "memory");
}
// Arrive on the mbarrier at shared::cluster address `bar` (release, CTA scope: the default). For
// the empty barriers: the arrival publishes no data, it says that this warpgroup's wgmma reads of
// a stage are complete (wgmma_wait returned), so the producer that waits for it may overwrite the
// stage. A cluster-scope release would put a MEMBAR.GPU before every consumer warp's arrival, each
// tile, between the wait for P V and the next S (CUTLASS's ClusterBarrier::arrive(cta_id) uses
// the default scope for the same purpose).
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// The 256 consumer threads (both consumer warpgroups).
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kConsumerBarrier), "n"(kConsumerThreads) : "memory");
}

// Lanes 0..7: the slot of key 8 pw + lane of this CTA's half (rank) of tile `tile`; -1 past the
// item's columns and on the other lanes.
__device__ __forceinline__ int32_t half_slot(const CtaWork& w, int tile, uint32_t rank, int pw, int lane) {
  const int32_t col = w.kb + tile * kTile + kHalf * static_cast<int>(rank) + 8 * pw + (lane & 7);
  return (lane < 8 && tile < w.ntiles && col < w.ke) ? __ldg(w.idx_row + col) : -1;
}

// Tile `tile` of block w, this CTA's g-th tile (stage s = g & 1): waits until both CTAs' consumers
// are done with the stage's previous use, dequantizes this warp's 8 keys into both CTAs' stage and
// arrives on this CTA's full[s]. `slot` (lanes 0..7) holds this tile's slots on entry and the next
// tile's of the same block on return.
__device__ __forceinline__ void produce_tile(const SparseArgs& a, const CtaWork& w, uint32_t sbase, uint8_t* smem,
                                            uint32_t peer_base, uint32_t g, int tile, int32_t& slot, uint32_t rank,
                                            int pw, int lane) {
  const int s = static_cast<int>(g & 1);
  // Entry offset of the lane's key (lanes 0..7); -1: invalid (a slot outside [0, num_slots)).
  const int64_t off = slot_valid(a, slot) ? entry_offset(a, slot) : -1;
  // Every lane: FP8 bytes [8 lane, + 8) and [256 + 8 lane, + 8), scale word lane % 4 and RoPE
  // word lane of each key; zeros for an invalid key (its row dequantizes to +0).
  uint2 n0[kBatch], n1[kBatch];
  uint32_t scale_word[kBatch], rope[kBatch];
#pragma unroll
  for (int k = 0; k < kBatch; ++k) {
    const int64_t o = __shfl_sync(kFullMask, off, k);
    n0[k] = n1[k] = make_uint2(0, 0);
    scale_word[k] = rope[k] = 0;
    if (o >= 0) {
      const uint8_t* e = a.cache + o;
      n0[k] = __ldg(reinterpret_cast<const uint2*>(e) + lane);
      n1[k] = __ldg(reinterpret_cast<const uint2*>(e) + 32 + lane);
      scale_word[k] = __ldg(reinterpret_cast<const uint32_t*>(e + DsMlaEntry::kScaleOffset) + (lane & 3));
      rope[k] = __ldg(reinterpret_cast<const uint32_t*>(e + DsMlaEntry::kRopeOffset) + lane);
    }
  }
  slot = half_slot(w, tile + 1, rank, pw, lane);  // in flight beside this tile's loads
  // Both CTAs' consumers are done with tile g - 2, the stage's previous use.
  if (g >= 2) wgmma::mbar_wait(sbase + bar_empty(s), ((g >> 1) - 1) & 1);
  // Byte offset of this warp's first row in the stage. Opaque to the compiler, so that the
  // per-row offsets below are computed in the loop instead of being hoisted out of it into 24
  // registers (which spilled at the producer's register budget).
  uint32_t stage = kOffK + s * kTileBytes + (kHalf * rank + 8 * pw) * 128;
  asm volatile("" : "+r"(stage));
#pragma unroll
  for (int k = 0; k < kBatch; ++k) {
    // FP8 bytes [8 c, 8 c + 8) use the scale of tile c / 16: chunk lane -> lane / 16, chunk
    // 32 + lane -> 2 + lane / 16 (scale word j sits in lanes j, j + 4, ...).
    const float sc0 = __uint_as_float(__shfl_sync(kFullMask, scale_word[k], lane / 16));
    const float sc1 = __uint_as_float(__shfl_sync(kFullMask, scale_word[k], 2 + lane / 16));
    const uint4 v0 = dequant8(n0[k].x, n0[k].y, sc0);
    const uint4 v1 = dequant8(n1[k].x, n1[k].y, sc1);
    // Row 8 j + k of the stage (swizzle phase k): chunk lane, chunk 32 + lane (4 blocks on),
    // RoPE chunk 64 + lane / 4 at byte 4 (lane % 4) (tile_offset's layout).
    const uint32_t o0 = stage + (lane >> 3) * kBlockBytes + 128 * k + (((lane & 7) ^ k) << 4);
    const uint32_t o1 = o0 + 4 * kBlockBytes;
    const uint32_t orope = stage + 8 * kBlockBytes + 128 * k + (((lane >> 2) ^ k) << 4) + 4 * (lane & 3);
    *reinterpret_cast<uint4*>(smem + o0) = v0;
    *reinterpret_cast<uint4*>(smem + o1) = v1;
    *reinterpret_cast<uint32_t*>(smem + orope) = rope[k];
    const uint32_t peer_full = peer_base + bar_full(s);
    st_async_v4(peer_base + o0, v0, peer_full);
    st_async_v4(peer_base + o1, v1, peer_full);
    st_async_u32(peer_base + orope, rope[k], peer_full);
  }
  wgmma::fence_proxy_async();  // this thread's own-stage stores -> visible to wgmma
  if (pw == 0 && lane == 0) {
    wgmma::mbar_arrive_expect_tx(sbase + bar_full(s), kPartnerHalfBytes);
  } else {
    wgmma::mbar_arrive(sbase + bar_full(s));
  }
}

// Producer warp `pw`: keys 8 pw .. 8 pw + 7 of this CTA's half (rank) of every tile of every block
// this cluster runs, into both CTAs' K stages (rows kHalf rank + 8 pw + k). `g` counts this CTA's
// tiles over all its blocks: stage g & 1, its (g >> 1)-th use, so that the next block's first
// tiles fill the stages while the consumers finish the current block.
__device__ __forceinline__ void produce(const SparseArgs& a, uint32_t sbase, uint8_t* smem, uint32_t rank, int pw,
                                       int lane) {
  const uint32_t peer_base = map_to_rank(sbase, rank ^ 1u);
  uint32_t g = 0;
  for (int64_t block = blockIdx.x; block < a.blocks; block += gridDim.x) {
    const CtaWork w = cta_work(a, kHeads, static_cast<int32_t>(block));
    int32_t slot = half_slot(w, 0, rank, pw, lane);
    for (int tile = 0; tile < w.ntiles; ++tile, ++g) {
      produce_tile(a, w, sbase, smem, peer_base, g, tile, slot, rank, pw, lane);
    }
  }
}

#endif  // MLA_WGMMA_ENABLED

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(kThreads, 1)
    sparse_mqa_crossover_kernel(const SparseArgs a) {
#if MLA_WGMMA_ENABLED
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t sbase = (wgmma::smem_u32(smem_raw) + 1023u) & ~1023u;
  uint8_t* const smem = smem_raw + (sbase - wgmma::smem_u32(smem_raw));
  const int tid = threadIdx.x, lane = tid % 32;
  // Warp-uniform through __shfl_sync from lane 0, so that the wgmma below sit in branches ptxas
  // sees as uniform and their descriptors stay in uniform registers.
  const int role = __shfl_sync(kFullMask, tid / 128, 0);  // 0: producer; 1, 2: consumers
  const int warp = __shfl_sync(kFullMask, (tid / 32) % 4, 0);
  const uint32_t rank = cluster_ctarank();

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      wgmma::mbar_init(sbase + bar_full(s), kFullArrivals);
      wgmma::mbar_init(sbase + bar_empty(s), kEmptyArrivals);
    }
    wgmma::mbar_init_fence();  // visible to the partner's arrivals
  }
  cluster_sync();  // both CTAs' mbarriers initialized before anyone arrives or writes K remotely

  if (role == 0) {
    wgmma::setmaxnreg_dec<kProducerRegs>();
    produce(a, sbase, smem, rank, warp, lane);
    cluster_sync();
    return;
  }

  // ---------------------------------------------------------------- consumer warpgroups
  wgmma::setmaxnreg_inc<kConsumerRegs>();
  const int cw = role - 1;  // S columns 32 cw .., O dims 256 cw ..
  const int ctid = tid - 128;
  const int g4 = lane / 4, tq = lane % 4;
  // This thread's two rows of S, P and O (m64 fragment layout, wgmma_device.cuh).
  const int row0 = 16 * warp + g4, row1 = row0 + 8;
  const WgmmaRows rows{cw, row0, row1, tq};
  float* const s_max = reinterpret_cast<float*>(smem + kOffMax);
  float* const s_sum = reinterpret_cast<float*>(smem + kOffSum);
  const uint32_t peer_base = map_to_rank(sbase, rank ^ 1u);
  const auto load_q = [&](const CtaWork& w) {
    load_q_tile(a, w.t, w.h0, smem + kOffQ, sbase + kOffQ, [](int row, int chunk) { return tile_offset(row, chunk); },
                ctid);
    attn_dev::cp_async_commit();
  };
  // Lane 0 of every consumer warp: the stage of this CTA's tile g is free (its P V done) in both CTAs.
  const auto release = [&](uint32_t g) {
    if (lane == 0) {
      const uint32_t bar = sbase + bar_empty(static_cast<int>(g & 1));
      mbar_arrive_remote(peer_base + (bar - sbase));
      wgmma::mbar_arrive(bar);
    }
  };

  uint32_t g = 0;          // this CTA's tiles so far, over all its blocks (the producer's count)
  bool q_issued = false;   // the block's Q copies were issued after the previous block's tile loop
  for (int64_t block = blockIdx.x; block < a.blocks; block += gridDim.x) {
    const CtaWork w = cta_work(a, kHeads, static_cast<int32_t>(block));
    const bool later_block = block + gridDim.x < a.blocks;  // this CTA runs another block after this one
    if (w.ntiles > 0) {
      if (!q_issued) load_q(w);
      // cp.async.wait_group waits only for committed groups (load_q commits): an uncommitted copy
      // could still be in flight when the first S reads Q.
      attn_dev::cp_async_wait<0>();
      wgmma::fence_proxy_async();  // Q written by this thread -> visible to wgmma
    }
    q_issued = false;
    consumer_sync();  // (B) all of Q ready

    // Softmax state of rows row0 / row1 (m identical in both warpgroups; l over this warpgroup's
    // columns only).
    float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
    float o[2][64];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int i = 0; i < 64; ++i) o[j][i] = 0.0f;
    }

    // Tile t >= 1 releases the stage of tile t - 1 for the CTA's next tile but one: always when a
    // later block follows (that tile may be its first), else only while t + 1 < ntiles, so that no
    // arrival is left that no producer waits for. (Computed once per block: the same condition
    // written in the loop made ptxas serialize the kernel's wgmma, C7515.)
    const int last_release = later_block ? w.ntiles + 1 : w.ntiles;
    for (int tile = 0; tile < w.ntiles; ++tile, ++g) {
      const int s = static_cast<int>(g & 1);
      const uint32_t k_stage = sbase + kOffK + s * kTileBytes;
      // Bit c: column 32 cw + c of the tile is valid (the producer's rule).
      const int32_t col = w.kb + tile * kTile + 32 * cw + lane;
      const int32_t slot = col < w.ke ? __ldg(w.idx_row + col) : -1;
      const uint32_t valid = __ballot_sync(kFullMask, slot_valid(a, slot));
      // P V of the previous tile done: its stage is free in both CTAs.
      wgmma::wgmma_wait<0>();
      wgmma::fence_operands(o[0]);
      wgmma::fence_operands(o[1]);
      if (tile >= 1 && tile + 1 < last_release) release(g - 1);
      // Acquire at cluster scope: the phase includes the partner's st.async transactions.
      wgmma::mbar_wait<wgmma::BarScope::kCluster>(sbase + bar_full(s), (g >> 1) & 1);
      wgmma::fence_proxy_async();  // the partner's rows (st.async) -> visible to this thread's wgmma

      // S[64][32 cw .. 32 cw + 31] = Q K^T over 576 = 36 k16 steps.
      float sc[16];
      issue_scores(sc, sbase + kOffQ, k_stage, cw);
      wgmma::wgmma_wait<0>();
      wgmma::fence_operands(sc);

      // Softmax (C1 inside: both warpgroups' tile maxima visible, both P V of the previous tile
      // done). sc[4 i + 2 half + c] is column 32 cw + 8 i + 2 tq + c.
      softmax_step(
          sc, [&](int i, int c) { return ((valid >> (8 * i + 2 * tq + c)) & 1u) != 0; }, a.scale, s_max,
          smem + kOffP, rows, row_m, row_l, o, [] { consumer_sync(); });
      wgmma::fence_proxy_async();  // P written by this thread -> visible to wgmma
      consumer_sync();             // C2: all of P ready; both warpgroups' S of this tile done

      // O[64][256 cw .. 256 cw + 255] += P V.
      issue_values(o, sbase + kOffP, k_stage, cw);
    }
    // After the block's last S (C2 of its last tile): the next block's Q copies run beside the
    // last P V and the write of this block's rows. Issued here, not in the tile loop's last
    // iteration: code after the loop's P V issue inside the loop makes ptxas wait after every
    // wgmma of the kernel (C7515: 44 WARPGROUP.DEPBAR in the SASS instead of 3, 12 % slower per
    // tile on an H100; kernels/cmake/ptxas_wgmma_launcher.sh fails such a build).
    if (w.ntiles > 0 && later_block) {
      const CtaWork next = cta_work(a, kHeads, static_cast<int32_t>(block + gridDim.x));
      if (next.ntiles > 0) {
        load_q(next);
        q_issued = true;
      }
    }
    wgmma::wgmma_wait<0>();
    wgmma::fence_operands(o[0]);
    wgmma::fence_operands(o[1]);
    // The stage of the block's last tile, for the next block's tiles (none after the last block).
    if (w.ntiles > 0 && later_block) release(g - 1);

    write_item_rows(a, w.t, w.h0, w.partial, o, row_m, row_l, s_sum, rows, [] { consumer_sync(); });
  }
  __syncwarp();
  cluster_sync();
#endif  // MLA_WGMMA_ENABLED
}

// The probe behind runs_on and the grid (not cached): the clusters of two CTAs that are resident at
// once on the device, 0 where the kernel cannot run there (not CC 9.0, no loadable image, another
// register count than the setmaxnreg budget assumes, no room for one cluster).
int probe(int device) {
  cudaFuncAttributes attr{};
  if (!is_compute_capability(device, 9, 0) || !kernel_attributes(sparse_mqa_crossover_kernel, &attr)) return 0;
  if (attr.numRegs != kLaunchRegs) return 0;
  if (cudaFuncSetAttribute(sparse_mqa_crossover_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(2);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmemBytes;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, sparse_mqa_crossover_kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return clusters;
}

PerDeviceAnswer<int>& resident_clusters() {
  static PerDeviceAnswer<int> answer(probe);
  return answer;
}

}  // namespace

int smem_bytes() { return kSmemBytes; }

bool runs_on(int device) { return resident_clusters().get(device) > 0; }

Status launch(const SparseArgs& a, dim3 grid, cudaStream_t stream) {
  if (a.head_groups % 2 != 0 || grid.x % 2 != 0 || static_cast<int64_t>(grid.x) != a.blocks) {
    return Status::error("sparse MQA (crossover): the head groups of an item must come in pairs, got " +
                         std::to_string(a.head_groups) + " per item and " + std::to_string(grid.x) + " CTAs for " +
                         std::to_string(a.blocks) + " blocks");
  }
  int device = 0;
  MLA_CUDA_CHECK(cudaGetDevice(&device));
  const int clusters = resident_clusters().get(device);
  if (clusters <= 0) return Status::error("sparse MQA (crossover): no cluster of two CTAs fits on device " + std::to_string(device));
  // Persistent: as many clusters as are resident at once (each loops over blocks), at most one per
  // pair of blocks.
  const unsigned ctas = 2u * static_cast<unsigned>(std::min<int64_t>(clusters, grid.x / 2));
  MLA_CUDA_CHECK(
      cudaFuncSetAttribute(sparse_mqa_crossover_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  sparse_mqa_crossover_kernel<<<ctas, kThreads, kSmemBytes, stream>>>(a);
  MLA_CUDA_CHECK_LAUNCH("sparse_mqa_crossover_kernel");
  return Status();
}

}  // namespace mla::sparse_crossover
