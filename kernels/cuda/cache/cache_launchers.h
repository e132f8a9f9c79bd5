// Launchers of the cache-path kernels (docs/semantics.md §1-§3) on a CUDA stream. Each one:
//   1. calls params.validate() and returns its error unchanged;
//   2. returns ok without launching when there is no work (no empty grids);
//   3. picks the 16-byte vector variant when every pointer and stride it touches allows it, the
//      scalar variant otherwise (same results bit for bit);
//   4. launches asynchronously on `stream` and checks the launch (cudaGetLastError).
// Kernel execution errors surface at the next synchronisation. The pointers in the params are
// device pointers. Semantics: the comments in kernels/common/cache_params.h, element for element
// the same as the host backend (kernels/host/).
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/cache_params.h"
#include "kernels/common/status.h"

namespace mla {

// pack.cu: kv_c / k_pe rows -> fp8_ds_mla entries at slot_mapping (docs/semantics.md §1.1).
Status launch_pack(const PackParams& p, cudaStream_t stream);

// gather.cu: paged fp8_ds_mla cache -> [num_rows, 576] bf16 (docs/semantics.md §2).
Status launch_gather(const GatherParams& p, cudaStream_t stream);

// convert.cu: request-local top-k positions -> global slots / workspace rows (docs/semantics.md §3).
Status launch_convert(const ConvertParams& p, cudaStream_t stream);

}  // namespace mla
