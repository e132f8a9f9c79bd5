// TMA tensor maps (CUtensorMap) for the Hopper kernels, encoded on the host through the driver's
// cuTensorMapEncodeTiled, reached through the runtime (no link against libcuda). Host-only.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace mla::cuda_tma {

// A bf16 tensor of `rank` (1..5) dims with 128-byte swizzle and 256-byte L2 promotion, read in
// boxes of `box` elements per dim, out-of-bounds elements read as zero (TMA's fill).
//   dims:    extents, innermost first (each >= 1)
//   strides: byte strides of dims 1 .. rank - 1 (multiples of 16)
//   box:     box extents (innermost * 2 bytes <= 128 for the swizzle)
// False when the driver has no cuTensorMapEncodeTiled or rejects the arguments (`*no_driver` says
// which, when not null).
bool encode_bf16_sw128(CUtensorMap* map, const void* base, uint32_t rank, const cuuint64_t* dims,
                       const cuuint64_t* strides, const cuuint32_t* box, bool* no_driver = nullptr);

}  // namespace mla::cuda_tma
