#include "lib/checks/guarded_buffer.h"

#include <string>

namespace mla {

namespace {
std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }
}  // namespace

GuardedBuffer::GuardedBuffer(Backend& backend, std::size_t payload_bytes, std::size_t guard_before,
                             std::size_t guard_after)
    : backend_(backend),
      payload_bytes_(payload_bytes),
      guard_before_(round_up(guard_before, 256)),
      guard_after_(round_up(guard_after, 256)) {
  const std::size_t total = guard_before_ + round_up(payload_bytes_, 256) + guard_after_;
  status_ = backend_.allocate(total, &base_);
  if (!status_.ok()) return;
  payload_ = static_cast<uint8_t*>(base_) + guard_before_;
  // The after-guard starts right at the end of the payload (no slack), so a one-byte overrun shows.
  std::vector<uint8_t> before(guard_before_), after(total - guard_before_ - payload_bytes_);
  for (std::size_t i = 0; i < before.size(); ++i) before[i] = pattern_byte(i);
  for (std::size_t i = 0; i < after.size(); ++i) after[i] = pattern_byte(i + 7);
  status_ = backend_.copy_to_device(base_, before.data(), before.size());
  if (status_.ok())
    status_ = backend_.copy_to_device(static_cast<uint8_t*>(payload_) + payload_bytes_, after.data(), after.size());
}

GuardedBuffer::~GuardedBuffer() {
  if (base_) backend_.release(base_);
}

Status GuardedBuffer::upload(const void* src, std::size_t bytes) {
  if (bytes > payload_bytes_)
    return Status::error("GuardedBuffer::upload: " + std::to_string(bytes) + " bytes into a payload of " +
                         std::to_string(payload_bytes_));
  return bytes ? backend_.copy_to_device(payload_, src, bytes) : Status();
}

Status GuardedBuffer::fill(uint8_t byte) {
  std::vector<uint8_t> v(payload_bytes_, byte);
  return upload(v.data(), v.size());
}

Status GuardedBuffer::download(void* dst, std::size_t bytes) const {
  if (bytes > payload_bytes_)
    return Status::error("GuardedBuffer::download: " + std::to_string(bytes) + " bytes from a payload of " +
                         std::to_string(payload_bytes_));
  return bytes ? backend_.copy_to_host(dst, payload_, bytes) : Status();
}

Status GuardedBuffer::guard_bytes_changed(int64_t* changed) const {
  *changed = 0;
  const std::size_t total = guard_before_ + round_up(payload_bytes_, 256) + guard_after_;
  std::vector<uint8_t> before(guard_before_), after(total - guard_before_ - payload_bytes_);
  MLA_RETURN_IF_ERROR(backend_.copy_to_host(before.data(), base_, before.size()));
  MLA_RETURN_IF_ERROR(
      backend_.copy_to_host(after.data(), static_cast<uint8_t*>(payload_) + payload_bytes_, after.size()));
  for (std::size_t i = 0; i < before.size(); ++i) *changed += before[i] != pattern_byte(i);
  for (std::size_t i = 0; i < after.size(); ++i) *changed += after[i] != pattern_byte(i + 7);
  return Status();
}

}  // namespace mla
