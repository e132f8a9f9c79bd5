#include "lib/dcp/communicator.h"

#include <vector>

namespace mla {

namespace {

class SocketCommunicator : public Communicator {
 public:
  SocketCommunicator(Exchange& exchange, double timeout_s) : exchange_(exchange), timeout_s_(timeout_s) {}
  int rank() const override { return exchange_.rank(); }
  int size() const override { return exchange_.size(); }
  std::string describe() const override { return "socket"; }
  Status all_gather(Backend& backend, const void* send, void* recv, std::size_t bytes) override {
    std::string mine(bytes, '\0');
    MLA_RETURN_IF_ERROR(backend.synchronize());
    if (bytes > 0) MLA_RETURN_IF_ERROR(backend.copy_to_host(mine.data(), send, bytes));
    std::vector<std::string> all;
    MLA_RETURN_IF_ERROR(exchange_.all_gather(mine, timeout_s_, &all));
    for (size_t r = 0; r < all.size(); ++r) {
      if (all[r].size() != bytes)
        return Status::error("all_gather: rank " + std::to_string(r) + " sent " + std::to_string(all[r].size()) +
                             " bytes, this rank " + std::to_string(bytes));
      if (bytes > 0)
        MLA_RETURN_IF_ERROR(backend.copy_to_device(static_cast<char*>(recv) + r * bytes, all[r].data(), bytes));
    }
    return Status();
  }

 private:
  Exchange& exchange_;
  double timeout_s_;
};

}  // namespace

std::unique_ptr<Communicator> make_socket_communicator(Exchange& exchange, double timeout_s) {
  return std::make_unique<SocketCommunicator>(exchange, timeout_s);
}

#ifndef MLA_HAVE_NCCL
#ifndef MLA_NCCL_UNAVAILABLE_REASON
#define MLA_NCCL_UNAVAILABLE_REASON "this build has no NCCL"
#endif

bool nccl_available(std::string* why_not) {
  if (why_not) *why_not = MLA_NCCL_UNAVAILABLE_REASON;
  return false;
}

Status make_nccl_communicator(Exchange&, Backend&, double, std::unique_ptr<Communicator>*) {
  return Status::error(std::string("the nccl transport is unavailable: ") + MLA_NCCL_UNAVAILABLE_REASON);
}
#endif

}  // namespace mla
