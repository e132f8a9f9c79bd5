// 16-byte global-memory access with a scalar fallback, and grid sizing, for the cache-path
// kernels (cache/pack.cu, cache/gather.cu) and the attention launchers.
//
// Contract of the vector variants (kVec = true): the address is aligned to the access size. The launchers
// check every pointer and stride before choosing them; the scalar variants (kVec = false) need
// only the natural alignment of the element type and move the same bytes in the same order, so
// the two variants give identical results.
//
// Loads are read-only (__ldg, ld.global.nc): use them only for memory that no thread of the
// same kernel writes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mla::cuda_io {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullMask = 0xFFFFFFFFu;

// Grid size for `items` work items handled `items_per_block` per block by a grid-stride loop.
// The cap only bounds the grid (kernels loop over what remains); items >= 1.
inline unsigned grid_blocks(int64_t items, int items_per_block) {
  constexpr int64_t kMaxBlocks = int64_t{1} << 20;
  const int64_t blocks = (items + items_per_block - 1) / items_per_block;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

inline bool aligned_to(const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }
inline bool aligned16(const void* p) { return aligned_to(p, 16); }

// --- one little-endian 32-bit word in its natural pieces: the scalar variants' unit ---------------

// Bytes p[0..3] (read-only loads), byte i in bits [8 i, 8 i + 8).
__device__ __forceinline__ uint32_t load_le32(const uint8_t* p) {
  return static_cast<uint32_t>(__ldg(p)) | (static_cast<uint32_t>(__ldg(p + 1)) << 8) |
         (static_cast<uint32_t>(__ldg(p + 2)) << 16) | (static_cast<uint32_t>(__ldg(p + 3)) << 24);
}
// Halves p[0..1] (read-only loads), p[0] in the low half.
__device__ __forceinline__ uint32_t load_le32(const uint16_t* p) {
  return static_cast<uint32_t>(__ldg(p)) | (static_cast<uint32_t>(__ldg(p + 1)) << 16);
}
__device__ __forceinline__ void store_le32(uint8_t* p, uint32_t w) {
#pragma unroll
  for (int b = 0; b < 4; ++b) p[b] = static_cast<uint8_t>(w >> (8 * b));
}
__device__ __forceinline__ void store_le32(uint16_t* p, uint32_t w) {
  p[0] = static_cast<uint16_t>(w);
  p[1] = static_cast<uint16_t>(w >> 16);
}

// --- loads: 16 bytes as a uint4 (little-endian: byte i of memory is byte i % 4 of word i / 4) ---

// Elements of T (uint8_t or uint16_t) per 32-bit word.
template <typename T>
inline constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));

// The N words from p onward, loaded in address order (a scalar variant's body).
template <int N, typename T>
__device__ __forceinline__ void load_le_words(const T* p, uint32_t (&w)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) w[k] = load_le32(p + kPerWord<T> * k);
}

// T is uint8_t or uint16_t (the overloads of load_le32 / store_le32 admit nothing else).
template <bool kVec, typename T>
__device__ __forceinline__ uint4 load16(const T* p) {
  if constexpr (kVec) {
    return __ldg(reinterpret_cast<const uint4*>(p));
  } else {
    uint32_t w[4];
    load_le_words(p, w);
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// 8 bytes as a uint2, 8-byte aligned when kVec.
template <bool kVec>
__device__ __forceinline__ uint2 load8(const uint8_t* p) {
  if constexpr (kVec) {
    return __ldg(reinterpret_cast<const uint2*>(p));
  } else {
    uint32_t w[2];
    load_le_words(p, w);
    return make_uint2(w[0], w[1]);
  }
}

// 4 bytes as a float (little-endian), 4-byte aligned when kVec.
template <bool kVec>
__device__ __forceinline__ float load_f32(const uint8_t* p) {
  if constexpr (kVec) {
    return __ldg(reinterpret_cast<const float*>(p));
  } else {
    return __uint_as_float(load_le32(p));
  }
}

// --- stores ---------------------------------------------------------------------------------------

// T is uint8_t or uint16_t, as for load16.
template <bool kVec, typename T>
__device__ __forceinline__ void store16(T* p, uint4 v) {
  if constexpr (kVec) {
    *reinterpret_cast<uint4*>(p) = v;
  } else {
    constexpr int w = kPerWord<T>;
    store_le32(p, v.x);
    store_le32(p + w, v.y);
    store_le32(p + 2 * w, v.z);
    store_le32(p + 3 * w, v.w);
  }
}

// 8 bytes, 8-byte aligned when kVec.
template <bool kVec>
__device__ __forceinline__ void store8(uint8_t* p, uint2 v) {
  if constexpr (kVec) {
    *reinterpret_cast<uint2*>(p) = v;
  } else {
    store_le32(p, v.x);
    store_le32(p + 4, v.y);
  }
}

// A float as 4 little-endian bytes, 4-byte aligned when kVec.
template <bool kVec>
__device__ __forceinline__ void store_f32(uint8_t* p, float x) {
  if constexpr (kVec) {
    *reinterpret_cast<float*>(p) = x;
  } else {
    store_le32(p, __float_as_uint(x));
  }
}

}  // namespace mla::cuda_io
