// x / scale without a division per element, for the fp8_ds_mla pack (docs/semantics.md §1.1): the CUDA pack
// (kernels/cuda/cache/pack.cu) divides every element of a 128-element tile by the tile's scale,
// and must produce the bytes the host's IEEE division produces (kernels/host/host_pack.cpp).
//
// div_by_scale(x, scale, y), with y = rn(1 / scale) computed once per tile: q0 = x y, then two
// corrections q += (x - q scale) y, each residual one FMA. While the residual does not underflow,
// the first correction makes q faithful and the second gives the correctly rounded quotient
// (Markstein's theorem). The residual can underflow for tiny scales and tiny x: callers divide
// exactly when scale_division_is_exact_only(scale) (scale below 2^-90, or infinite). Above that,
// the quotients that still differ from IEEE's are all below 2^-24, where E4M3 (smallest subnormal
// 2^-9) gives the same signed zero, so e4m3_satfinite(div_by_scale(...)) equals
// e4m3_satfinite(x / scale) for every bf16 x with |x| <= 448 scale: a host replay over every bf16
// amax and every |x| <= amax found no difference; tests/kernels/test_scale_division.cpp checks a
// sample of it on every CI run, and the GPU test PackQuantizesEveryBf16InputLikeTheHostDivision
// the kernel itself. x = ±0 returns x (the corrections would turn -0 into +0).
// Contract: scale > 0, not below kScaleDivisionMinScale, finite; no flush-to-zero (the project
// builds without fast-math on both compilers).
#pragma once

#include <cmath>

#include "kernels/common/hd.h"

namespace mla {

inline constexpr float kScaleDivisionMinScale = 0x1p-90f;

// True when div_by_scale must not be used for this scale: divide exactly instead.
MLA_HD bool scale_division_is_exact_only(float scale) {
  return !(scale >= kScaleDivisionMinScale) || std::isinf(scale);
}

MLA_HD float div_by_scale(float x, float scale, float y) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(x, y);
  const float q1 = __fmaf_rn(__fmaf_rn(-q0, scale, x), y, q0);
  const float q2 = __fmaf_rn(__fmaf_rn(-q1, scale, x), y, q1);
#else
  const float q0 = x * y;
  const float q1 = std::fma(std::fma(-q0, scale, x), y, q0);
  const float q2 = std::fma(std::fma(-q1, scale, x), y, q1);
#endif
  return x == 0.0f ? x : q2;
}

}  // namespace mla
