#include "lib/backends/backend_choice.h"

#include "lib/backends/python_backend.h"

namespace mla {

namespace {
constexpr const char* kPythonPrefix = "python:";
}  // namespace

std::string parse_backend_choice(const std::string& text, BackendChoice* choice) {
  if (text == "auto") {
    choice->kind = BackendChoice::Kind::kAuto;
  } else if (text == "host") {
    choice->kind = BackendChoice::Kind::kHost;
  } else if (text == "cuda") {
    choice->kind = BackendChoice::Kind::kCuda;
  } else if (text.rfind(kPythonPrefix, 0) == 0) {
    const std::string path = text.substr(std::string(kPythonPrefix).size());
    if (path.empty()) return "'python:' needs the adapter file after the colon, e.g. python:adapters/numpy_cache.py";
    choice->kind = BackendChoice::Kind::kPython;
    choice->adapter = path;
  } else {
    return "'" + text + "' is not a backend: auto, host, cuda or python:ADAPTER.py";
  }
  return "";
}

std::string to_string(const BackendChoice& c) {
  switch (c.kind) {
    case BackendChoice::Kind::kAuto: return "auto";
    case BackendChoice::Kind::kHost: return "host";
    case BackendChoice::Kind::kCuda: return "cuda";
    case BackendChoice::Kind::kPython: return kPythonPrefix + c.adapter;
  }
  return "?";
}

BackendChoice resolve_auto(const BackendChoice& choice) {
  if (choice.kind != BackendChoice::Kind::kAuto) return choice;
  BackendChoice c = choice;
  std::string why;
  c.kind = cuda_backend_available(&why) ? BackendChoice::Kind::kCuda : BackendChoice::Kind::kHost;
  return c;
}

std::unique_ptr<Backend> make_backend(const BackendChoice& choice, std::string* error) {
  const BackendChoice c = resolve_auto(choice);
  switch (c.kind) {
    case BackendChoice::Kind::kHost:
      return make_host_backend();
    case BackendChoice::Kind::kCuda: {
      std::string why;
      if (!cuda_backend_available(&why)) {
        if (error) *error = "no usable CUDA device: " + why;
        return nullptr;
      }
      return make_cuda_backend(c.kernels, error);
    }
    case BackendChoice::Kind::kPython: {
      PythonAdapterOptions o;
      o.path = c.adapter;
      o.fallback_operations = c.adapter_fallback;
      o.make_base = [kernels = c.kernels](const std::string& device, std::string* why) {
        return make_harness_backend(device == "cuda" ? NativeDevice::Kind::kCuda : NativeDevice::Kind::kHost, kernels,
                                    why);
      };
      return make_python_backend(o, error);
    }
    case BackendChoice::Kind::kAuto:
      break;
  }
  if (error) *error = "unresolved backend choice";
  return nullptr;
}

std::unique_ptr<Backend> make_harness_backend(NativeDevice::Kind device, const KernelPolicy& kernels,
                                              std::string* error) {
  BackendChoice c;
  c.kind = device == NativeDevice::Kind::kCuda ? BackendChoice::Kind::kCuda : BackendChoice::Kind::kHost;
  c.kernels = kernels;
  return make_backend(c, error);
}

}  // namespace mla
