#include "kernels/cuda/dense_mha/work_schedule.h"

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/common/cuda_check.h"

namespace mla {

Status work_schedule_for(int device, int capacity, cudaStream_t stream, WorkSchedule* out) {
  static std::mutex mu;
  static std::map<std::pair<int, unsigned long long>, WorkSchedule> states;
  unsigned long long stream_id = 0;  // (cudaStreamGetId: CUDA 12.0+, as the wgmma kernels)
  MLA_CUDA_CHECK(cudaStreamGetId(stream, &stream_id));
  std::lock_guard<std::mutex> lock(mu);
  WorkSchedule& st = states[{device, stream_id}];
  if (st.counter == nullptr) {
    const std::size_t bytes =
        kWorkSlotsOffset + kWorkSlotWords * sizeof(long long) * static_cast<std::size_t>(capacity);
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, bytes);
    if (err == cudaSuccess) {
      err = cudaMemsetAsync(p, 0, 2 * sizeof(unsigned long long), stream);
      if (err != cudaSuccess) (void)cudaFree(p);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return Status::error("the work schedule's counters and item slots (" + std::to_string(bytes) +
                           " bytes): " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
    }
    st.counter = static_cast<unsigned long long*>(p);
    st.slots = reinterpret_cast<long long*>(static_cast<char*>(p) + kWorkSlotsOffset);
    st.capacity = capacity;
  }
  *out = st;
  return Status();
}

}  // namespace mla
