// Reading the JSON input files (scenarios, sweep files): only regular files of at most
// kMaxInputFileBytes are read, so that a FIFO cannot block the reader and a device cannot feed it
// forever. Shared by lib/scenario.cpp and mla-bench's sweeps.
#pragma once

#include <cstdint>
#include <string>

namespace mla {

inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{16} << 20;

enum class InputFile {
  kRead,     // *text holds the file
  kMissing,  // it cannot be opened (no such file, no permission): *problem says why
  kRefused,  // a directory, not a regular file, too large, or a read error: *problem says which
};

// `what` names the kind of file in messages ("scenario file", "sweep file").
InputFile read_input_file(const std::string& path, const std::string& what, std::string* text, std::string* problem);

}  // namespace mla
