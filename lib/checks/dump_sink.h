// mla-check --dump's hook in the checks (docs/dump.md): each check hands the sink the arrays it
// passed to the backend, the backend's outputs and the reference's (or the other side of its
// comparison), with the scalar parameters of the call; the sink decides what is written and
// where (lib/run/dump_writer). Checks call dump_array() with a null sink when --dump is off: then
// nothing is copied or kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/checks/verdict.h"

namespace mla {

enum class DumpRole {
  kInput,      // what the backend was given
  kOutput,     // what the backend produced
  kReference,  // what it is compared with (the reference's result, or the other run)
};
const char* to_string(DumpRole r);  // "input", "output", "reference"

// One array: `bytes` bytes of little-endian elements in C order. `element` names the project's
// type ("int32", "int64", "uint8", "float32", "float64", "bf16"); `npy_dtype` the NumPy type that
// holds it ("<i4", "<i8", "|u1", "<f4", "<f8"; bf16 is stored as its bits, "<u2").
struct DumpArray {
  std::string name;
  DumpRole role = DumpRole::kInput;
  std::string what;  // one line: what the array holds
  std::string element;
  std::string npy_dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

class DumpSink {
 public:
  virtual ~DumpSink() = default;
  virtual void begin_check(const std::string& id) = 0;
  virtual void array(const DumpArray& a) = 0;
  virtual void param(const std::string& name, double value) = 0;  // a scalar of the call (block size, rank, ...)
  // The check's result; the sink may add notes to it (arrays it left out, and why).
  virtual void end_check(CheckResult& r) = 0;
};

namespace dump_detail {
template <typename T> struct Element;
template <> struct Element<int32_t> { static constexpr const char* name = "int32"; static constexpr const char* npy = "<i4"; };
template <> struct Element<int64_t> { static constexpr const char* name = "int64"; static constexpr const char* npy = "<i8"; };
template <> struct Element<uint8_t> { static constexpr const char* name = "uint8"; static constexpr const char* npy = "|u1"; };
template <> struct Element<uint16_t> { static constexpr const char* name = "bf16"; static constexpr const char* npy = "<u2"; };  // bf16_t bits
template <> struct Element<float> { static constexpr const char* name = "float32"; static constexpr const char* npy = "<f4"; };
template <> struct Element<double> { static constexpr const char* name = "float64"; static constexpr const char* npy = "<f8"; };
}  // namespace dump_detail

// Hands `values` to the sink (no-op without one). The shape's product must be values.size().
template <typename T>
void dump_array(DumpSink* sink, const std::string& name, DumpRole role, const std::string& what,
                const std::vector<int64_t>& shape, const std::vector<T>& values) {
  if (sink == nullptr) return;
  DumpArray a;
  a.name = name;
  a.role = role;
  a.what = what;
  a.element = dump_detail::Element<T>::name;
  a.npy_dtype = dump_detail::Element<T>::npy;
  a.shape = shape;
  a.data = values.data();
  a.bytes = values.size() * sizeof(T);
  sink->array(a);
}

inline void dump_param(DumpSink* sink, const std::string& name, double value) {
  if (sink != nullptr) sink->param(name, value);
}

}  // namespace mla
