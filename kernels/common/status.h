// Errors as values below apps/ (DESIGN.md): a Status is ok or carries a message that says what
// was wrong. Host-only.
#pragma once

#include <string>
#include <utility>

namespace mla {

class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  // The operation does not exist on this backend (a check that needs it is SKIP, not ERROR).
  static Status unsupported(std::string message) {
    Status s(std::move(message));
    s.unsupported_ = true;
    return s;
  }
  bool ok() const { return !failed_; }
  bool is_unsupported() const { return unsupported_; }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string m) : failed_(true), message_(std::move(m)) {}
  bool failed_ = false;
  bool unsupported_ = false;
  std::string message_;
};

#define MLA_RETURN_IF_ERROR(expr)        \
  do {                                   \
    ::mla::Status mla_status_ = (expr);  \
    if (!mla_status_.ok()) return mla_status_; \
  } while (0)

}  // namespace mla
