#include "progress.h"

namespace mla::app {

void ProgressLine::started(size_t i, size_t n, const std::string& name) {
  running_[i] = name;
  draw(n);
}

void ProgressLine::ended(size_t i, size_t n) {
  running_.erase(i);
  ++done_;
  if (done_ == n) {
    std::fprintf(out_, "\r\033[K");
    std::fflush(out_);
    return;
  }
  draw(n);
}

void ProgressLine::draw(size_t n) const {
  std::fprintf(out_, "\r\033[K[%zu/%zu done]", done_, n);
  if (!running_.empty()) {
    std::fprintf(out_, " %s", running_.begin()->second.c_str());
    if (running_.size() > 1) std::fprintf(out_, " +%zu more", running_.size() - 1);
    std::fprintf(out_, " ...");
  }
  std::fflush(out_);
}

}  // namespace mla::app
