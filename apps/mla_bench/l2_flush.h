// Cold-L2 timing: before each timed iteration, read a buffer of at least twice the device's L2
// size (cudaDeviceProp::l2CacheSize) on the backend's stream, so that the operation's inputs are
// no longer cached when it starts. The reads are issued before the start event: outside the
// timed region. A read, not a write: a written flush leaves tens of MB of dirty lines in L2 whose
// write-back then lands inside the next timed region (measured on an H200: a 118 MB gather took
// 37 us after a written flush), a cost of the benchmark, not of the operation. The buffer is
// written once, at creation (never read uninitialised). On the host backend flush() does nothing
// (host figures are warm-cache).
//
// The lead: before the read, one thread spins for `lead_cycles` SM clock cycles (clock64), so
// that the CPU has queued the flush, the start event and the operation's launches before the GPU
// reaches the start event: no launch latency inside the timed region so long as the caller queues
// them within the lead and the read (the idea of nvbench's blocking kernel, which waits for a host
// flag instead: that guarantees it for any caller, but makes the idle time the caller's own).
// scripts/peer_timing.py runs the same spin through torch.cuda._sleep (a one-thread clock64 spin
// too) with the count mla-bench's JSON names, so that both tools leave the GPU about the same idle
// time before each call; at the power cap that idle time changes the clock the call then runs at
// (docs/benchmarks.md). On an H200 the PyTorch peer needs 48-92 us from the flush's launch to SDPA's
// return, and the flush takes 37 us.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace mla::bench {

class L2Flusher {
 public:
  // About 100 us at the H200's 1.98 GHz: covers the PyTorch peer's launch of SDPA after the flush.
  static constexpr int64_t kDefaultLeadCycles = 200000;
  static constexpr int64_t kMaxLeadCycles = int64_t{1} << 32;  // about 2 s: a typo, not a protocol

  // stream: the CUDA backend's stream (DeviceTimer::stream()); nullptr on the host (no flush, no
  // lead). lead_cycles in [0, kMaxLeadCycles]; 0: no lead.
  static Status create(Backend& backend, void* stream, int64_t lead_cycles, std::unique_ptr<L2Flusher>* out);
  ~L2Flusher();
  L2Flusher(const L2Flusher&) = delete;
  L2Flusher& operator=(const L2Flusher&) = delete;

  // The lead, then the read (both on the stream; nothing on the host).
  Status flush();
  std::size_t l2_bytes() const { return l2_bytes_; }
  int64_t lead_cycles() const { return lead_cycles_; }
  std::size_t buffer_bytes() const { return buffer_bytes_; }

 private:
  L2Flusher(Backend& backend, void* stream) : backend_(backend), stream_(stream) {}
  Backend& backend_;
  void* stream_ = nullptr;
  void* buffer_ = nullptr;
  std::size_t l2_bytes_ = 0;
  std::size_t buffer_bytes_ = 0;
  unsigned* sink_ = nullptr;  // 4 bytes the read pass would write only on an impossible value
  int blocks_ = 0;
  int64_t lead_cycles_ = 0;
};

// Defined in l2_flush_kernels.cu (CUDA builds only): launches the read pass over `bytes` (a multiple
// of 16) of `buffer` on `stream`; returns the launch's cudaError_t.
int launch_read_flush(const void* buffer, std::size_t bytes, unsigned impossible, unsigned* sink, int blocks,
                      void* stream);
// Defined there too: launches the lead, one thread spinning until clock64 has advanced by `cycles`
// (> 0) on `stream`; returns the launch's cudaError_t.
int launch_lead_spin(int64_t cycles, void* stream);

}  // namespace mla::bench
