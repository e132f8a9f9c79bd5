// The Backend interface: what lib/ needs from a place that runs kernels. Memory is opaque to
// lib/ (a host pointer on the host backend, a device pointer on the CUDA backend); lib/ moves
// bytes only through copy_to_device / copy_to_host. Each operation takes its params struct by
// const reference, calls params.validate(), and returns errors as Status values. Operations
// are asynchronous on the CUDA backend; synchronize() returns the first device error.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/attention_params.h"
#include "kernels/common/cache_params.h"
#include "kernels/common/status.h"
#include "kernels/kernel_policy.h"

namespace mla {

struct BackendInfo {
  std::string name;         // "host" or "cuda"
  std::string device;       // e.g. "NVIDIA H200 (sm_90, 132 SMs)" or the host CPU
  std::string runtime;      // e.g. "CUDA runtime 13.0, driver 13.0"; empty on host
  // The CUDA backend's kernel policy as its launchers apply it on its device (describe() in
  // kernels/kernel_policy.h): sparse_mqa / dense_mha name the implementations that run for aligned
  // inputs (sparse MQA: for a shape where `auto` requests `crossover`, 128 heads and top-k >= 512;
  // other shapes of the same run may run `wgmma`), followed by sparse_mqa_requested /
  // dense_mha_requested where they differ from the policy's request, e.g. "sparse_mqa=crossover
  // dense_mha=wgmma dense_wgmma_schedule=persistent dense_wgmma_debug=off dense_wgmma_max_ctas=none
  // sync_each=0 sparse_mqa_requested=auto"; "error: ..." when the device cannot be asked; empty on
  // host.
  std::string kernels;
  // What else identifies the implementation under test, for the report's provenance (a Python
  // adapter's path, content hash and the versions it reports; empty for the harness's backends).
  std::map<std::string, std::string> details;
};

// Where a backend's memory lives and where its operations run, for code that works beside it
// (mla-bench's CUDA events and L2 flush, a Python adapter's tensors and stream).
struct NativeDevice {
  enum class Kind { kHost, kCuda };
  Kind kind = Kind::kHost;
  int ordinal = -1;             // CUDA device ordinal
  void* stream = nullptr;       // the cudaStream_t every operation is issued on
  int multiprocessors = 0;
  int compute_capability = 0;   // major * 10 + minor, e.g. 90
};

// How a backend's sparse_mqa turns a cache value's e4m3 code and its tile's fp32 scale into the bf16
// key it attends to.
enum class SparseDequant {
  kF32Scale,   // docs/semantics.md §1.2: bf16_rne(f32(e4m3) * scale), one fp32 multiply
  kBf16Scale,  // the scale rounded to bf16 first, the product rounded once to bf16 (§4.1)
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual BackendInfo info() const = 0;
  virtual NativeDevice native_device() const { return NativeDevice{}; }
  // Remarks on the operations since the last call, for the check that ran them (e.g. an adapter
  // that returned its outputs instead of writing them in place).
  virtual std::vector<std::string> take_notes() { return {}; }
  // Called before each check of a scenario runs its operations (an adapter may use it to reset
  // per-scenario state or to label a profile).
  virtual void begin_check(const std::string& scenario, const std::string& check) {
    (void)scenario;
    (void)check;
  }

  // Memory. allocate() returns memory aligned to at least 256 bytes.
  virtual Status allocate(std::size_t bytes, void** ptr) = 0;
  virtual void release(void* ptr) = 0;
  // Bytes allocate() can still hand out where the backend can tell (a CUDA device's free memory),
  // read before a run to refuse a scenario that cannot fit; nullopt where it cannot tell (the host
  // backend's allocations are host memory, which lib/run reads from /proc/meminfo).
  virtual std::optional<std::size_t> free_memory() const { return std::nullopt; }
  virtual Status copy_to_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status copy_to_host(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status synchronize() = 0;

  // Cache path (docs/semantics.md §1-§3).
  virtual Status pack(const PackParams& p) = 0;
  virtual Status gather(const GatherParams& p) = 0;
  virtual Status convert(const ConvertParams& p) = 0;

  // Attention (docs/semantics.md §4). A backend without an operation keeps the default, which says so; the
  // checks that need it end in SKIP with that message.
  virtual Status gemm(const GemmParams& p) { return unsupported(p, "gemm"); }
  virtual Status sparse_mqa(const SparseMqaParams& p) { return unsupported(p, "sparse_mqa"); }
  virtual Status dense_mha(const DenseMhaParams& p) { return unsupported(p, "dense_mha"); }
  virtual Status merge(const MergeParams& p) { return unsupported(p, "merge"); }
  virtual bool supports_attention() const { return false; }
  // The dequantization rule of sparse_mqa: the reference its checks are judged against uses the
  // same one. A rule other than §1.2 is a declared semantic difference (docs/semantics.md §4.1).
  virtual SparseDequant sparse_mqa_dequant() const { return SparseDequant::kF32Scale; }

 protected:
  template <typename P>
  Status unsupported(const P&, const char* op) const {
    return Status::unsupported("the " + info().name + " backend has no " + op + " kernel");
  }
};

std::unique_ptr<Backend> make_host_backend();

// True when this build has the CUDA backend and a CUDA device is usable. Initialises the CUDA
// runtime in the calling process: call it in a child process when the parent will fork later.
bool cuda_backend_available(std::string* why_not);
// How many CUDA devices the calling process sees (CUDA_VISIBLE_DEVICES applied); 0 without a CUDA
// build or a usable driver. Initialises the CUDA runtime, like cuda_backend_available.
int cuda_device_count();
// A CUDA backend on the calling thread's current device whose launchers follow `policy`; nullptr
// with *error set when unavailable.
std::unique_ptr<Backend> make_cuda_backend(const KernelPolicy& policy, std::string* error);

}  // namespace mla
