// The host backend: the Backend interface on the CPU, for machines without a GPU and as the
// correctness stand-in CI runs. "Device" memory is ordinary host memory (256-byte aligned),
// copies are memcpy, every operation is synchronous, so synchronize() has nothing to wait for.
// Every operation validates its params first and touches nothing when they are invalid.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "kernels/backend.h"
#include "kernels/host/host_kernels.h"

namespace mla {
namespace {

constexpr std::size_t kHostAlignment = 256;  // Backend::allocate() promise

// "model name" of the first processor in /proc/cpuinfo, or "host CPU" when unreadable.
std::string host_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const std::size_t begin = line.find_first_not_of(" \t", colon + 1);
    if (begin == std::string::npos) break;
    return line.substr(begin);
  }
  return "host CPU";
}

class HostBackend final : public Backend {
 public:
  BackendInfo info() const override {
    BackendInfo i;
    i.name = "host";
    i.device = host_cpu_model();
    return i;
  }

  // bytes == 0 still returns a distinct, releasable pointer. std::aligned_alloc needs a size
  // that is a multiple of the alignment.
  Status allocate(std::size_t bytes, void** ptr) override {
    if (ptr == nullptr) return Status::error("host allocate: ptr is null");
    *ptr = nullptr;
    if (bytes > SIZE_MAX - kHostAlignment) {
      return Status::error("host allocate: " + std::to_string(bytes) + " bytes is too large");
    }
    const std::size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    void* p = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
    if (p == nullptr) {
      return Status::error("host allocate: out of memory allocating " + std::to_string(bytes) + " bytes");
    }
    *ptr = p;
    return Status();
  }

  void release(void* ptr) override { std::free(ptr); }

  Status copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    return copy("copy_to_device", dst, src, bytes);
  }
  Status copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    return copy("copy_to_host", dst, src, bytes);
  }
  Status synchronize() override { return Status(); }

  Status pack(const PackParams& p) override { return run(p, host::pack); }
  Status gather(const GatherParams& p) override { return run(p, host::gather); }
  Status convert(const ConvertParams& p) override { return run(p, host::convert); }

  Status gemm(const GemmParams& p) override { return run(p, host::gemm); }
  Status sparse_mqa(const SparseMqaParams& p) override { return run(p, host::sparse_mqa); }
  Status dense_mha(const DenseMhaParams& p) override {
    return run(p, [](const DenseMhaParams& q) { host::dense_mha(q); });  // the default softmax step
  }
  Status merge(const MergeParams& p) override { return run(p, host::merge); }
  bool supports_attention() const override { return true; }

 private:
  // Every operation: validate, then the host kernel (nothing is touched when p is invalid).
  template <typename Params, typename Kernel>
  static Status run(const Params& p, Kernel&& kernel) {
    MLA_RETURN_IF_ERROR(p.validate());
    kernel(p);
    return Status();
  }

  static Status copy(const char* what, void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return Status();
    if (dst == nullptr || src == nullptr) {
      return Status::error(std::string("host ") + what + ": null pointer with " + std::to_string(bytes) +
                           " bytes to copy");
    }
    std::memcpy(dst, src, bytes);  // ranges must not overlap (as with cudaMemcpy)
    return Status();
  }
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace mla
