#include "lib/run/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mla {

std::string npy_header(const std::string& dtype, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '" + dtype + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "") + (i + 1 < shape.size() ? " " : "");
  dict += "), }";
  // magic (6) + version (2) + header length (2) + dict + padding + '\n' is a multiple of 64.
  const size_t preamble = 10;
  size_t total = preamble + dict.size() + 1;
  const size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  const size_t header_len = dict.size();
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header_len & 0xFF);
  out += static_cast<char>((header_len >> 8) & 0xFF);
  return out + dict;
}

Status write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data, size_t bytes) {
  const std::string header = npy_header(dtype, shape);
  if (header.size() > 65535 + 10) return Status::error(path + ": an .npy 1.0 header this long cannot be written");
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::error("cannot write " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(header.data(), 1, header.size(), f) == header.size();
  if (ok && bytes > 0) ok = std::fwrite(data, 1, bytes, f) == bytes;
  const int err = errno;
  if (std::fclose(f) != 0) ok = false;
  if (!ok) return Status::error("cannot write " + path + ": " + std::strerror(err));
  return Status();
}

}  // namespace mla
