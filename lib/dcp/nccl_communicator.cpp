// The NCCL transport of lib/dcp/communicator.h. Built only where CMake finds NCCL
// (cmake/FindNCCL.cmake; CUDA builds): lib/CMakeLists.txt adds this file and MLA_HAVE_NCCL.
// NVLink multicast (NVLS) is switched off in the process before the communicator exists
// (lib/dcp/launch_env.h), so the collectives run on the ordinary NVLink and network paths.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "lib/dcp/communicator.h"
#include "lib/dcp/launch_env.h"

namespace mla {

namespace {

std::string nccl_error(const char* what, ncclResult_t r) {
  return std::string(what) + " failed: " + ncclGetErrorString(r);
}

std::string version_text() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "nccl";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z from 2.9 on.
  return "nccl " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return version_text(); }
  Status all_gather(Backend& backend, const void* send, void* recv, std::size_t bytes) override {
    const NativeDevice dev = backend.native_device();
    if (dev.kind != NativeDevice::Kind::kCuda) return Status::error("the nccl transport needs a backend on a CUDA device");
    const ncclResult_t r =
        ncclAllGather(send, recv, bytes, ncclUint8, comm_, static_cast<cudaStream_t>(dev.stream));
    if (r != ncclSuccess) return Status::error(nccl_error("ncclAllGather", r));
    return Status();
  }

 private:
  ncclComm_t comm_;
  int rank_, size_;
};

}  // namespace

bool nccl_available(std::string*) { return true; }

Status make_nccl_communicator(Exchange& exchange, Backend& backend, double timeout_s, std::unique_ptr<Communicator>* out) {
  const NativeDevice dev = backend.native_device();
  if (dev.kind != NativeDevice::Kind::kCuda)
    return Status::error("the nccl transport needs the cuda backend (this rank runs " + backend.info().name + ")");
  set_multicast_off();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  std::string mine;
  if (exchange.rank() == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    // An empty frame from rank 0 tells the others that there is no id to wait for.
    if (r == ncclSuccess) mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  std::vector<std::string> all;
  MLA_RETURN_IF_ERROR(exchange.all_gather(mine, timeout_s, &all));
  if (all.front().size() != sizeof id) return Status::error("rank 0 could not make an NCCL unique id (ncclGetUniqueId failed)");
  std::memcpy(&id, all.front().data(), sizeof id);
  if (cudaSetDevice(dev.ordinal) != cudaSuccess) return Status::error("cudaSetDevice(" + std::to_string(dev.ordinal) + ") failed");
  ncclComm_t comm = nullptr;
  const ncclResult_t r = ncclCommInitRank(&comm, exchange.size(), id, exchange.rank());
  if (r != ncclSuccess) return Status::error(nccl_error("ncclCommInitRank", r));
  *out = std::make_unique<NcclCommunicator>(comm, exchange.rank(), exchange.size());
  return Status();
}

}  // namespace mla
