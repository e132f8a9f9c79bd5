// Paired FP8 E4M3 / bf16 conversions for the cache kernels, on Hopper's conversion instructions
// (cvt.*x2: two values per instruction). Each one gives, for every input, the same bits as the
// software element logic of kernels/common that it replaces:
//
//   e4m3x2_to_f32x2(b)      == { e4m3_to_f32(b & 0xFF), e4m3_to_f32(b >> 8) }    for non-NaN codes;
//                              a NaN code (0x7F, 0xFF) gives a NaN
//   f32x2_to_e4m3x2(lo, hi) == f32_to_e4m3_satfinite(lo) | f32_to_e4m3_satfinite(hi) << 8
//                              for every input, NaN included (both give 0x7F)
//   f32x2_to_bf16x2(lo, hi) == f32_to_bf16_rne(lo) | f32_to_bf16_rne(hi) << 16 for non-NaN inputs;
//                              a NaN gives a quiet NaN
//
// (checked exhaustively on an H200: all 2^32 fp32 inputs for the two encoders, all 2^16 byte pairs
// for the decoder). The NaN payloads may differ from the software functions' but never reach an
// output here: the decoder's result is multiplied by the scale first, and an fp32 multiply on the
// GPU returns the canonical NaN, which both bf16 encoders map to 0x7FFF.
//
// Build with -DMLA_CUDA_SOFTWARE_CODECS=1 to use the kernels/common functions instead (several
// times slower; for bisecting a suspected codec difference).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/bf16.h"
#include "kernels/common/fp8_e4m3.h"

#if !defined(MLA_CUDA_SOFTWARE_CODECS)
#define MLA_CUDA_SOFTWARE_CODECS 0
#endif

// The FP8 conversion instructions exist from sm_89 on; older targets use the software functions.
#if MLA_CUDA_SOFTWARE_CODECS || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890)
#define MLA_CUDA_CODECS_IN_SOFTWARE_ 1
#else
#define MLA_CUDA_CODECS_IN_SOFTWARE_ 0
#endif

namespace mla::cuda_codec {

// The two E4M3 codes in the low 16 bits of `pair` (low byte first) as fp32.
__device__ __forceinline__ float2 e4m3x2_to_f32x2(uint32_t pair) {
#if MLA_CUDA_CODECS_IN_SOFTWARE_
  return make_float2(e4m3_to_f32(static_cast<e4m3_t>(pair & 0xFFu)), e4m3_to_f32(static_cast<e4m3_t>((pair >> 8) & 0xFFu)));
#else
  // E4M3 -> f16 is exact (f16 has more exponent and mantissa bits), f16 -> f32 too.
  float lo, hi;
  asm("{\n\t"
      ".reg .b16 pair16, lo16, hi16;\n\t"
      ".reg .b32 h2;\n\t"
      "cvt.u16.u32 pair16, %2;\n\t"
      "cvt.rn.f16x2.e4m3x2 h2, pair16;\n\t"  // low byte -> low half
      "mov.b32 {lo16, hi16}, h2;\n\t"
      "cvt.f32.f16 %0, lo16;\n\t"
      "cvt.f32.f16 %1, hi16;\n\t"
      "}"
      : "=f"(lo), "=f"(hi)
      : "r"(pair));
  return make_float2(lo, hi);
#endif
}

// Two fp32 values as E4M3 (round to nearest even, finite overflow saturates to +-448), lo in the
// low byte of the result.
__device__ __forceinline__ uint32_t f32x2_to_e4m3x2(float lo, float hi) {
#if MLA_CUDA_CODECS_IN_SOFTWARE_
  return static_cast<uint32_t>(f32_to_e4m3_satfinite(lo)) | (static_cast<uint32_t>(f32_to_e4m3_satfinite(hi)) << 8);
#else
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));  // first operand -> high byte
  return r;
#endif
}

// Two fp32 values as bf16 (round to nearest even), lo in the low half of the result.
__device__ __forceinline__ uint32_t f32x2_to_bf16x2(float lo, float hi) {
#if MLA_CUDA_CODECS_IN_SOFTWARE_
  return static_cast<uint32_t>(f32_to_bf16_rne(lo)) | (static_cast<uint32_t>(f32_to_bf16_rne(hi)) << 16);
#else
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));  // first operand -> high half
  return r;
#endif
}

}  // namespace mla::cuda_codec
