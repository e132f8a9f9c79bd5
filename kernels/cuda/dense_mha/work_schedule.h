// Device state of a persistent kernel's dynamic schedule: an item counter, a count of CTAs done, and
// item slots per CTA through which a CTA's fetching warp hands each resolved work item to its other
// warps (dense_mha_wgmma.cu's nth_item). Host-only.
#pragma once

#include <cuda_runtime.h>

#include "kernels/common/status.h"

namespace mla {

// 64-bit words of item slots per CTA: two slots of 64 bytes (the kernel's published work item).
inline constexpr int kWorkSlotWords = 16;
// Bytes from the allocation's base (the counters) to the slots: the counters get a sector of their
// own, and the slots stay 16- (and 128-) byte aligned if counters are added.
inline constexpr int kWorkSlotsOffset = 128;
static_assert(kWorkSlotsOffset >= 2 * sizeof(unsigned long long) && kWorkSlotsOffset % 16 == 0,
              "after the two counters; 16-byte loads and stores of the slots");

struct WorkSchedule {
  unsigned long long* counter = nullptr;  // [2]: next item, CTAs done; zero between launches
  long long* slots = nullptr;             // [capacity][kWorkSlotWords]: each CTA's two item slots (128-byte aligned)
  int capacity = 0;                       // CTAs the slots are for
};

// The state for (device, stream): allocated on the stream's first call, with the counters zeroed
// in stream order (cudaMemsetAsync), and kept for the process. The kernel must leave the counters
// at zero when it ends. Launches on one stream run in order, so they never share the state while
// running; each stream has its own, told apart by cudaStreamGetId (unique for the process's
// lifetime, also for the per-thread default streams; a handle can be reused by a new stream while
// a destroyed one's work still runs). `capacity` is used on the first call only. A failed
// allocation or memset leaves no state behind and clears the runtime's last error.
Status work_schedule_for(int device, int capacity, cudaStream_t stream, WorkSchedule* out);

}  // namespace mla
