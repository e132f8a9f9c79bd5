// The progress line of mla-check on a terminal: "[k/n done] NAME ..." on one line of stderr,
// rewritten in place, naming the running scenario that started first ("+m more" when several run
// at once, with --jobs). Erased once every scenario has ended, before the table is printed.
#pragma once

#include <cstddef>
#include <cstdio>
#include <map>
#include <string>

namespace mla::app {

class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* out) : out_(out) {}

  // Scenario i of n started / ended (the suite runner's on_start and on_result).
  void started(size_t i, size_t n, const std::string& name);
  void ended(size_t i, size_t n);

 private:
  void draw(size_t n) const;

  std::FILE* out_;
  size_t done_ = 0;
  std::map<size_t, std::string> running_;  // by index in the suite: the first started first
};

}  // namespace mla::app
