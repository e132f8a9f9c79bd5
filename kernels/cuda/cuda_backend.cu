// The CUDA backend: device memory, synchronous copies, and the cache-path launchers on one
// backend-owned non-blocking stream. See cuda_backend.h.
//
// Ordering: the stream does not synchronise with the legacy default stream (cudaStreamNonBlocking),
// so copies are issued on the same stream (cudaMemcpyAsync) and then waited for; a copy to the host
// therefore sees every operation issued before it. release() waits for the stream before freeing.
//
// Faults: a kernel's execution error (an illegal address) surfaces at the next wait for the
// stream, not at its launch. The backend keeps the names of the operations issued since the last
// successful wait, and an error at a wait lists them (the fault is in one of them). With the
// policy's sync_each (MLA_CUDA_SYNC_EACH=1 in the apps) it waits after every operation, so that a
// fault names its own.
#include "kernels/cuda/cuda_backend.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cache/cache_launchers.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch_limits.h"
#include "kernels/cuda/dense_mha/dense_mha_launcher.h"
#include "kernels/cuda/gemm/gemm_launcher.h"
#include "kernels/cuda/merge/merge_launcher.h"
#include "kernels/cuda/sparse_mqa/sparse_mqa_launcher.h"

namespace mla {
namespace {

// Nothing to do: its attributes tell whether this build has a kernel image for the device.
__global__ void probe_kernel() {}

// CUDA encodes versions as 1000 * major + 10 * minor.
std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::string mib_string(double bytes) {
  char buf[32];
  const double mib = bytes / (1024.0 * 1024.0);
  std::snprintf(buf, sizeof buf, mib == static_cast<double>(static_cast<long long>(mib)) ? "%.0f" : "%.1f", mib);
  return buf;
}

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(const KernelPolicy& policy) : policy_(policy) {}
  CudaBackendImpl(const CudaBackendImpl&) = delete;
  CudaBackendImpl& operator=(const CudaBackendImpl&) = delete;

  ~CudaBackendImpl() override {
    if (cublas_ != nullptr) (void)cublasDestroy(cublas_);
    if (stream_ != nullptr) {
      // Errors cannot be returned from here; a pending one was or will be reported elsewhere.
      (void)cudaSetDevice(device_);
      (void)cudaStreamSynchronize(stream_);
      (void)cudaStreamDestroy(stream_);
    }
  }

  // On the current device of the calling thread.
  Status init() {
    MLA_CUDA_CHECK(cudaGetDevice(&device_));
    cudaDeviceProp prop{};
    MLA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
    int runtime = 0, driver = 0;
    MLA_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    MLA_CUDA_CHECK(cudaDriverGetVersion(&driver));
    MLA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) return Status::error("cublasCreate failed");
    if (cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS) return Status::error("cublasSetStream failed");

    info_.name = "cuda";
    info_.device = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                   ", " + std::to_string(prop.multiProcessorCount) + " SMs, L2 " +
                   mib_string(static_cast<double>(prop.l2CacheSize)) + " MiB)";
    native_.kind = NativeDevice::Kind::kCuda;
    native_.ordinal = device_;
    native_.stream = stream_;
    native_.multiprocessors = prop.multiProcessorCount;
    native_.compute_capability = prop.major * 10 + prop.minor;
    info_.runtime = "CUDA runtime " + version_string(runtime) + ", driver " + version_string(driver);
    return Status();
  }

  // kernels: the policy as the launchers apply it on this device (BackendInfo::kernels).
  BackendInfo info() const override {
    BackendInfo info = info_;
    SparseMqaImpl sparse = policy_.sparse_mqa;
    DenseMhaImpl dense = policy_.dense_mha;
    Status st = sparse_mqa_implementation(policy_.sparse_mqa, device_, &sparse);
    if (st.ok()) st = dense_mha_implementation(policy_.dense_mha, device_, &dense);
    info.kernels = st.ok() ? describe(policy_, sparse, dense) : "error: " + st.message();
    return info;
  }
  NativeDevice native_device() const override { return native_; }
  cudaStream_t stream() const override { return stream_; }
  int device() const override { return device_; }
  const KernelPolicy& kernel_policy() const override { return policy_; }
  void set_kernel_policy(const KernelPolicy& policy) override { policy_ = policy; }

  Status allocate(std::size_t bytes, void** ptr) override {
    *ptr = nullptr;
    MLA_RETURN_IF_ERROR(use_device());
    // cudaMalloc aligns to at least 256 bytes; one byte for an empty request keeps pointers non-null.
    const cudaError_t err = cudaMalloc(ptr, bytes > 0 ? bytes : 1);
    if (err != cudaSuccess) {
      *ptr = nullptr;
      (void)cudaGetLastError();  // an allocation failure is not sticky: clear it, or the next launch check reports it
      return cuda_status(err, ("cudaMalloc of " + std::to_string(bytes) + " bytes").c_str(), __FILE__, __LINE__);
    }
    return Status();
  }

  std::optional<std::size_t> free_memory() const override {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device_) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    return free_bytes;
  }

  void release(void* ptr) override {
    if (ptr == nullptr) return;
    (void)cudaSetDevice(device_);
    (void)cudaStreamSynchronize(stream_);  // no operation of ours may still use the memory
    (void)cudaFree(ptr);
  }

  Status copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, "device");
  }

  Status copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    return copy(dst, src, bytes, cudaMemcpyDeviceToHost, "host");
  }

  // Waits for everything issued so far; the first error (a kernel fault is sticky) is returned.
  Status synchronize() override {
    MLA_RETURN_IF_ERROR(use_device());
    MLA_RETURN_IF_ERROR(wait("cudaStreamSynchronize"));
    return checked(cudaGetLastError(), "cudaGetLastError after cudaStreamSynchronize");
  }

  Status pack(const PackParams& p) override { return issue("pack", [&] { return launch_pack(p, stream_); }); }
  Status gather(const GatherParams& p) override { return issue("gather", [&] { return launch_gather(p, stream_); }); }
  Status convert(const ConvertParams& p) override { return issue("convert", [&] { return launch_convert(p, stream_); }); }

  bool supports_attention() const override { return true; }
  Status gemm(const GemmParams& p) override { return issue("gemm", [&] { return launch_gemm(p, stream_, cublas_); }); }
  Status sparse_mqa(const SparseMqaParams& p) override {
    return issue("sparse_mqa", [&] { return launch_sparse_mqa(p, policy_.sparse_mqa, stream_); });
  }
  Status dense_mha(const DenseMhaParams& p) override {
    return issue("dense_mha", [&] { return launch_dense_mha(p, policy_, stream_); });
  }
  Status merge(const MergeParams& p) override { return issue("merge", [&] { return launch_merge(p, stream_); }); }

 private:
  // A synchronous copy on the stream (after everything issued before it); `to` names the
  // destination side in the error messages.
  Status copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const std::string& to) {
    if (bytes == 0) return Status();
    MLA_RETURN_IF_ERROR(use_device());
    MLA_RETURN_IF_ERROR(checked(cudaMemcpyAsync(dst, src, bytes, kind, stream_), ("cudaMemcpyAsync to the " + to).c_str()));
    return wait("cudaStreamSynchronize after a copy to the " + to);
  }

  // The device is per host thread in the runtime API: make ours current before every call.
  Status use_device() {
    MLA_CUDA_CHECK(cudaSetDevice(device_));
    return Status();
  }

  // One operation on the stream: its launcher's status (a refusal by validate() or a launch error:
  // then nothing ran), else its name kept until the next successful wait, and with the policy's
  // sync_each a wait right after it.
  template <typename Launch>
  Status issue(const char* op, Launch&& launch) {
    MLA_RETURN_IF_ERROR(use_device());
    MLA_RETURN_IF_ERROR(launch());
    if (unwaited_.size() < kNamedUnwaited) {
      unwaited_.push_back(op);
    } else {
      ++unwaited_unnamed_;
    }
    if (!policy_.sync_each) return Status();
    return wait(std::string("cudaStreamSynchronize after ") + op + " (sync_each)");
  }

  // Waits for the stream: everything issued so far has run (and is forgotten) or one of it faulted.
  Status wait(const std::string& what) {
    const cudaError_t err = cudaStreamSynchronize(stream_);
    if (err != cudaSuccess) return fault(err, what);
    forget_unwaited();
    return Status();
  }

  Status checked(cudaError_t err, const char* what) { return err == cudaSuccess ? Status() : fault(err, what); }

  // The error, with the operations that ran since the last successful wait (one of them faulted:
  // a fault is sticky, every later call reports it).
  Status fault(cudaError_t err, const std::string& what) {
    std::string context = what;
    if (!unwaited_.empty()) {
      context += " (operations since the last wait: ";
      for (std::size_t i = 0; i < unwaited_.size(); ++i) context += (i ? ", " : "") + std::string(unwaited_[i]);
      if (unwaited_unnamed_ > 0) context += " and " + std::to_string(unwaited_unnamed_) + " more";
      context += policy_.sync_each ? ")" : "; MLA_CUDA_SYNC_EACH=1 waits after each to name the one)";
    }
    forget_unwaited();
    return cuda_status(err, context.c_str(), __FILE__, __LINE__);
  }

  void forget_unwaited() {
    unwaited_.clear();
    unwaited_unnamed_ = 0;
  }

  static constexpr std::size_t kNamedUnwaited = 32;  // names kept; beyond, a count
  std::vector<const char*> unwaited_;
  std::size_t unwaited_unnamed_ = 0;
  KernelPolicy policy_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  BackendInfo info_;
  NativeDevice native_;
};

}  // namespace

bool cuda_backend_available(std::string* why_not) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (why_not) {
      *why_not = std::string("no usable CUDA device: cudaGetDeviceCount failed: ") + cudaGetErrorName(err) + " (" +
                 cudaGetErrorString(err) + ")";
    }
    (void)cudaGetLastError();  // not sticky; leave no pending error behind
    return false;
  }
  if (count == 0) {
    if (why_not) *why_not = "no CUDA device found (cudaGetDeviceCount returned 0)";
    return false;
  }
  // A device without a kernel image in this build (e.g. built for sm_90 only, run on an older
  // GPU) would fail every launch: say so now.
  cudaFuncAttributes attr{};
  err = cudaFuncGetAttributes(&attr, probe_kernel);
  if (err != cudaSuccess) {
    if (why_not) {
      int device = -1;
      (void)cudaGetDevice(&device);
      *why_not = "CUDA device " + std::to_string(device) + " cannot run this build's kernels: " +
                 cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    }
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

bool wgmma_kernels_built() { return MLA_HAVE_WGMMA != 0; }

std::unique_ptr<Backend> make_cuda_backend(const KernelPolicy& policy, std::string* error) {
  std::string why;
  if (!cuda_backend_available(&why)) {
    if (error) *error = why;
    return nullptr;
  }
  auto backend = std::make_unique<CudaBackendImpl>(policy);
  const Status s = backend->init();
  if (!s.ok()) {
    if (error) *error = "CUDA backend initialisation failed: " + s.message();
    return nullptr;
  }
  return backend;
}

}  // namespace mla
