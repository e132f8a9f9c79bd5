// The collective a distributed DCP step needs: every rank's partial attention gathered on every
// rank. Two transports behind one interface:
//   - "nccl": ncclAllGather on the backend's stream, between the GPUs (lib/dcp/nccl_communicator.cpp,
//     built where NCCL is found; the unique id goes round through the exchange);
//   - "socket": the bytes copied to the host and gathered through the exchange's hub
//     (lib/dcp/exchange.h); any backend, the host backend included, so that everything around
//     the collective runs without GPUs.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "lib/dcp/exchange.h"

namespace mla {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "nccl 2.27.3" or "socket".
  virtual std::string describe() const = 0;
  // recv[r * bytes, (r + 1) * bytes) = rank r's send[0, bytes), in `backend` memory (its device
  // memory on the CUDA backend). Ordered with the backend's operations: complete at the next
  // backend.synchronize(). send and recv must not overlap.
  virtual Status all_gather(Backend& backend, const void* send, void* recv, std::size_t bytes) = 0;
};

// The socket transport over `exchange` (not owned; it must outlive the communicator).
std::unique_ptr<Communicator> make_socket_communicator(Exchange& exchange, double timeout_s);

// Whether this build has the NCCL transport, and why not.
bool nccl_available(std::string* why_not);

// The NCCL transport among exchange.size() ranks, on the device `backend` runs on (a CUDA
// backend; ranks on one host need one GPU each). Rank 0 makes the unique id; it reaches the others
// through the exchange. An error when the build has no NCCL (nccl_available) or the backend is not
// on a CUDA device.
Status make_nccl_communicator(Exchange& exchange, Backend& backend, double timeout_s, std::unique_ptr<Communicator>* out);

}  // namespace mla
