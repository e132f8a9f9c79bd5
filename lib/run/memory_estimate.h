// How much memory a scenario's run needs, estimated from the scenario alone (nothing is
// allocated), and the memory the machine has free, so that a scenario too large for the machine is
// refused with both figures before anything is allocated, instead of dying in the allocator or
// taking the machine into swap.
//
// The estimate counts the buffers the run keeps (batch, generated cache rows, the reference
// cache, the attention inputs) plus the largest check's own buffers (checks run one after another
// and free theirs): every buffer handed to the backend (device memory), its host copy kept to
// detect modification, what is downloaded, and the reference's double-precision arrays. It is an
// upper estimate of the large terms, plus a fixed allowance for the process's own working memory
// (tests/lib/run/test_memory_estimate.cpp holds it against the measured peak of real runs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lib/scenario/scenario.h"

namespace mla {

struct MemoryEstimate {
  // Host memory of the run besides the backend's buffers.
  std::uint64_t host_bytes = 0;
  // Memory of the backend's buffers at the largest check: device memory on a CUDA backend, host
  // memory on the host backend.
  std::uint64_t backend_bytes = 0;
};

// Saturates at UINT64_MAX instead of wrapping.
MemoryEstimate estimate_memory(const Scenario& s);

// MemAvailable of /proc/meminfo in bytes; nullopt when it cannot be read.
std::optional<std::uint64_t> host_memory_available();

// "12.3 GiB" / "512.0 MiB" / "4.0 KiB" / "17 bytes".
std::string format_bytes(std::uint64_t bytes);

// The refusal of a scenario that does not fit, or "" when it does. backend_on_host: the backend's
// buffers live in host memory (host backend, a CPU adapter), so both figures count against
// host_available; otherwise backend_bytes counts against device_available (when known).
// The message names the scenario's file, what is needed and what is available.
std::string memory_refusal(const Scenario& s, const MemoryEstimate& need, bool backend_on_host,
                           std::optional<std::uint64_t> host_available,
                           std::optional<std::uint64_t> device_available);

}  // namespace mla
