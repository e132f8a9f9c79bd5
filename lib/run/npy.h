// Writing NumPy .npy files (format version 1.0): a magic string, the version, a little-endian
// uint16 header length, a Python-literal header dict ({'descr': ..., 'fortran_order': False,
// 'shape': (...), }) padded with spaces to a multiple of 64 bytes and ended by '\n', then the raw
// data in C order. numpy.load reads them as written (no pickling, no alignment games).
// No Debian package provides a C++ .npy writer through find_package (apt has no cnpy or libnpy;
// xtensor's xnpy needs its containers), and the format is this small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/status.h"

namespace mla {

// The header for `dtype` (a NumPy type string such as "<i4", "|u1", "<f8") and `shape` (C order;
// an empty shape is a scalar), including the preamble: what precedes the data.
std::string npy_header(const std::string& dtype, const std::vector<int64_t>& shape);

// Writes `bytes` bytes of `data` as an array of `dtype` and `shape` to `path` (created or
// replaced). The caller guarantees bytes == product(shape) * itemsize.
Status write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data, size_t bytes);

}  // namespace mla
