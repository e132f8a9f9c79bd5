// Helpers of the params structs' validate() (cache_params.cpp, attention_params.cpp): each
// returns an error Status whose message names the struct, the field and what was wrong.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>

#include "kernels/common/status.h"

namespace mla::validation {

template <typename... Parts>
Status fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Status::error(os.str());
}

// A pointer may be null only when nothing is read or written through it.
inline Status require_pointer(const char* what, const char* field, const void* ptr, const char* count_name,
                              int64_t count) {
  if (ptr == nullptr && count > 0) return fail(what, ": ", field, " is null but ", count_name, " is ", count);
  return Status();
}

inline Status require_non_negative(const char* what, const char* field, int64_t value) {
  if (value < 0) return fail(what, ": ", field, " is ", value, " (must be >= 0)");
  return Status();
}

inline Status require_positive(const char* what, const char* field, int64_t value) {
  if (value < 1) return fail(what, ": ", field, " is ", value, " (must be >= 1)");
  return Status();
}

inline Status require_stride(const char* what, const char* field, int64_t stride, const char* width_name,
                             int64_t width) {
  if (stride < width) return fail(what, ": ", field, " is ", stride, " but must be >= ", width_name, " (", width, ")");
  return Status();
}

}  // namespace mla::validation
