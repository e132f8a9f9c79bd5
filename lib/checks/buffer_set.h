// The buffers of one kernel call under test: inputs uploaded into guarded buffers (and kept on
// the host to detect modification), outputs poisoned before the run. audit() reads every guard
// back and compares every input with its host copy, adding to the check's Metrics.
#pragma once

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <vector>

#include "lib/checks/guarded_buffer.h"
#include "lib/checks/verdict.h"

namespace mla {

// Byte every output is poisoned with: bf16 0x5A5A and fp32 0x5A5A5A5A are ~1.5e16, int32
// 0x5A5A5A5A is a slot no pool has; no kernel produces them, so an unwritten element shows.
inline constexpr uint8_t kPoisonByte = 0x5A;

// Thrown inside a check when a backend operation fails; the check ends in ERROR with its message.
struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Thrown when the backend lacks the operation: the check ends in SKIP with its message.
struct UnsupportedError : BackendError {
  using BackendError::BackendError;
};
inline void must(const Status& s) {
  if (s.is_unsupported()) throw UnsupportedError(s.message());
  if (!s.ok()) throw BackendError(s.message());
}

class BufferSet {
 public:
  explicit BufferSet(Backend& backend) : backend_(backend) {}

  template <typename T>
  T* input(const std::vector<T>& host, std::size_t guard_after = GuardedBuffer::kDefaultGuardBytes) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(host.data());
    auto& b = add(host.size() * sizeof(T), guard_after);
    must(b.upload(bytes, host.size() * sizeof(T)));
    inputs_.push_back({&b, std::vector<uint8_t>(bytes, bytes + host.size() * sizeof(T))});
    return b.template as<T>();
  }

  // An output of `count` elements, every byte set to `poison`; returns the buffer to download.
  template <typename T>
  GuardedBuffer& output(std::size_t count, uint8_t poison, std::size_t guard_after = GuardedBuffer::kDefaultGuardBytes) {
    auto& b = add(count * sizeof(T), guard_after);
    must(b.fill(poison));
    return b;
  }

  // An output that starts from given contents (e.g. a cache the kernel updates in place).
  template <typename T>
  GuardedBuffer& in_out(const std::vector<T>& host, std::size_t guard_after = GuardedBuffer::kDefaultGuardBytes) {
    auto& b = add(host.size() * sizeof(T), guard_after);
    must(b.upload(host.data(), host.size() * sizeof(T)));
    return b;
  }

  // Guard zones of all buffers and unmodified inputs, into m.
  void audit(Metrics& m) const {
    for (const auto& b : buffers_) {
      int64_t changed = 0;
      must(b->guard_bytes_changed(&changed));
      m.guard_bytes_changed += changed;
    }
    for (const auto& in : inputs_) {
      std::vector<uint8_t> now(in.host.size());
      must(in.buffer->download(now.data(), now.size()));
      if (now != in.host) m.inputs_modified = true;
    }
  }

 private:
  GuardedBuffer& add(std::size_t bytes, std::size_t guard_after) {
    buffers_.push_back(std::make_unique<GuardedBuffer>(backend_, bytes, GuardedBuffer::kDefaultGuardBytes,
                                                       std::max(guard_after, GuardedBuffer::kDefaultGuardBytes)));
    must(buffers_.back()->status());
    return *buffers_.back();
  }

  struct Input {
    const GuardedBuffer* buffer;
    std::vector<uint8_t> host;
  };
  Backend& backend_;
  std::vector<std::unique_ptr<GuardedBuffer>> buffers_;
  std::vector<Input> inputs_;
};

}  // namespace mla
