// A buffer on a backend with guard zones before and after the payload (DESIGN.md). The guards
// hold a position-dependent byte pattern; guard_bytes_changed() reads them back and counts the
// bytes that differ, so a kernel that writes out of bounds is caught as OOB rather than as a
// crash or silent corruption. Guards must be large enough to absorb the largest overrun a
// caller can provoke (see guard_after in the constructor); the default is 4 KiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace mla {

class GuardedBuffer {
 public:
  static constexpr std::size_t kDefaultGuardBytes = 4096;

  // Allocates payload + guards (guard sizes rounded up to 256 so the payload stays aligned) and
  // writes the guard pattern. Check status() before use.
  GuardedBuffer(Backend& backend, std::size_t payload_bytes,
                std::size_t guard_before = kDefaultGuardBytes, std::size_t guard_after = kDefaultGuardBytes);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  const Status& status() const { return status_; }
  void* data() const { return payload_; }
  template <typename T> T* as() const { return static_cast<T*>(payload_); }
  std::size_t bytes() const { return payload_bytes_; }

  Status upload(const void* src, std::size_t bytes);          // into the payload, from offset 0
  Status fill(uint8_t byte);                                  // poison or initialise the payload
  Status download(void* dst, std::size_t bytes) const;        // from the payload
  template <typename T> Status download(std::vector<T>& out) const {
    out.resize(payload_bytes_ / sizeof(T));
    return download(out.data(), out.size() * sizeof(T));
  }
  // Bytes of either guard zone that no longer hold the pattern (reads the guards back).
  Status guard_bytes_changed(int64_t* changed) const;

 private:
  static uint8_t pattern_byte(std::size_t i) { return static_cast<uint8_t>(0xA5u ^ ((i * 29u) & 0xFFu)); }

  Backend& backend_;
  Status status_;
  void* base_ = nullptr;
  void* payload_ = nullptr;
  std::size_t payload_bytes_ = 0, guard_before_ = 0, guard_after_ = 0;
};

}  // namespace mla
