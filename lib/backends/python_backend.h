// The Python adapter backend (docs/adapters.md): any implementation reachable from Python, under
// test through a file of a few dozen lines. The adapter defines one function per operation it
// implements (named after the Backend operations); each receives the harness's own buffers as
// tensors without copies (DLPack: PyTorch tensors on the CUDA device, on the harness's stream;
// NumPy arrays on the host) and the operation's parameters as plain values. Memory, copies and
// synchronisation are the harness's own backend of the adapter's device ("base"); with
// `fallback_operations` the operations the adapter lacks run there too, else the checks that need
// them end in SKIP. The interpreter is embedded once per process (pybind11).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace mla {

struct PythonAdapterOptions {
  std::string path;                  // the adapter file
  bool fallback_operations = false;  // operations the adapter lacks run on the base backend
  // Makes the base backend for the adapter's DEVICE: "cuda" or "cpu" (the host backend).
  std::function<std::unique_ptr<Backend>(const std::string& device, std::string* error)> make_base;
};

// Whether this build embeds Python; *why_not says why not.
bool python_backend_built(std::string* why_not);

// nullptr with *error set (naming the adapter and the problem) when the adapter cannot be loaded.
std::unique_ptr<Backend> make_python_backend(const PythonAdapterOptions& o, std::string* error);

}  // namespace mla
