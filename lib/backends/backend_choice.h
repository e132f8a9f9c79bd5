// The backend a run asks for, spelled the same in mla-check and mla-bench (--backend), and the one
// place that turns it into a Backend:
//   auto          the CUDA backend when this build has it and a device is usable, else the host's
//   host, cuda    the harness's own kernels
//   python:PATH   a Python adapter file (docs/adapters.md) on the device it declares; with
//                 adapter_fallback the operations it lacks run on the harness's own backend of
//                 that device, else the checks that need them end in SKIP
// The CUDA backend (also an adapter's base on the GPU) follows `kernels`, read once by the apps.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "kernels/backend.h"
#include "kernels/kernel_policy.h"

namespace mla {

struct BackendChoice {
  enum class Kind { kAuto, kHost, kCuda, kPython };
  Kind kind = Kind::kAuto;
  std::string adapter;            // kPython: the adapter file
  bool adapter_fallback = false;  // kPython: operations the adapter lacks run on the harness's own
  KernelPolicy kernels;
};

// Parses --backend's value into `choice` (kind and adapter; other fields untouched). Returns the
// problem, or "" when the text is valid.
std::string parse_backend_choice(const std::string& text, BackendChoice* choice);

// The text parse_backend_choice reads back: "auto", "host", "cuda", "python:PATH".
std::string to_string(const BackendChoice& choice);

// Creates the backend in this process; auto resolves here (and initialises CUDA to find out:
// call it in a child process when the caller forks later). nullptr with *error set when the
// choice cannot run (no CUDA device for cuda, an adapter that does not load, ...).
std::unique_ptr<Backend> make_backend(const BackendChoice& choice, std::string* error);

// auto resolved to what make_backend would create (cuda or host); other kinds unchanged.
BackendChoice resolve_auto(const BackendChoice& choice);

// The harness's own backend of a device (host or cuda, the latter following `kernels`): a Python
// adapter's base, which runs the operations the adapter lacks under adapter_fallback. nullptr with
// *error set when it cannot be made.
std::unique_ptr<Backend> make_harness_backend(NativeDevice::Kind device, const KernelPolicy& kernels,
                                              std::string* error);

}  // namespace mla
