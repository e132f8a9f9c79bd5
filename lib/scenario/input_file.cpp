#include "lib/scenario/input_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace mla {

InputFile read_input_file(const std::string& path, const std::string& what, std::string* text, std::string* problem) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows symlinks
  if (!ec && fs::is_directory(st)) {
    *problem = "is a directory, not a " + what;
    return InputFile::kRefused;
  }
  if (!ec && fs::exists(st) && !fs::is_regular_file(st)) {
    *problem = "is not a regular file";
    return InputFile::kRefused;
  }
  if (!ec && fs::is_regular_file(st)) {
    const std::uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > kMaxInputFileBytes) {
      *problem = "is " + std::to_string(size) + " bytes; " + what + "s are at most " +
                 std::to_string(kMaxInputFileBytes) + " bytes";
      return InputFile::kRefused;
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *problem = std::string("cannot open the file: ") + std::strerror(errno);
    return InputFile::kMissing;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    *problem = "cannot read the file";
    return InputFile::kRefused;
  }
  *text = ss.str();
  return InputFile::kRead;
}

}  // namespace mla
