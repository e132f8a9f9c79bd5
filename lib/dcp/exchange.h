// How the processes of a distributed run exchange small messages (the NCCL unique id, each
// rank's status, hashes of results) without a file on a shared disk: a star around a hub. Every
// participant sends one frame per round to the hub; the hub answers each of them with every
// participant's frame of that round, in rank order. The hub is
//   - the parent process, when mla-dcp starts the ranks itself on one host: each rank talks to it
//     over a socketpair made before the fork (lib/dcp/local_launch.h relays the frames);
//   - rank 0, when a launcher started the processes (torchrun, mpirun; lib/dcp/launch_env.h):
//     it listens on MASTER_ADDR's port and the other ranks connect to it over TCP.
// A frame is an 8-byte little-endian length and that many bytes. Every wait has a deadline, so a
// rank that died makes the others fail with a message instead of hanging.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/status.h"

namespace mla {

// Frames larger than this are refused (a corrupted length must not allocate gigabytes).
inline constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 32;

// Writes one frame to a stream socket (no SIGPIPE: a closed peer is an error value).
Status send_frame(int fd, const std::string& payload);
// Reads one frame, waiting at most timeout_s seconds for all of it.
Status recv_frame(int fd, double timeout_s, std::string* payload);

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every participant's `mine` of this round, in rank order (all[rank()] == mine). Every rank
  // calls it the same number of times; a round waits at most timeout_s for the others.
  virtual Status all_gather(const std::string& mine, double timeout_s, std::vector<std::string>* all) = 0;
};

// A participant whose hub is at the other end of `fd` (a socketpair to the launching parent, or
// a TCP connection to rank 0). Closes fd when destroyed if it owns it.
std::unique_ptr<Exchange> hub_client(int fd, int rank, int size, bool owns_fd = true);

// The exchange of a run of one rank: all_gather returns {mine}.
std::unique_ptr<Exchange> solo_exchange();

// --- TCP: rank 0 is the hub -------------------------------------------------------------------

// A listening TCP socket on every interface (IPv6 with IPv4 mapped where the system allows it,
// else IPv4). port 0 picks a free one (tests).
class TcpListener {
 public:
  TcpListener() = default;
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  static Status open(int port, std::unique_ptr<TcpListener>* out);
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// Rank 0 of `world`: accepts world - 1 connections, each saying its rank, the world size and
// `token` (what the ranks must agree on: the tool's version, the selected scenarios, the
// transport); refuses a duplicate rank, a rank outside [1, world), another world size or another
// token, with a message naming both sides, and tells that peer why before closing. Waits at most
// timeout_s for all of them.
Status accept_hub_peers(TcpListener& listener, int world, const std::string& token, double timeout_s,
                        std::unique_ptr<Exchange>* out);

// Rank `rank` (>= 1) of `world`: connects to rank 0 at host:port, retrying until timeout_s (rank
// 0 may start later), introduces itself and waits for rank 0's answer.
Status connect_to_hub(const std::string& host, int port, int rank, int world, const std::string& token,
                      double timeout_s, std::unique_ptr<Exchange>* out);

// --- The relay of the launching parent ---------------------------------------------------------

// The hub's side of a star whose participants are the parent's children: feed it what arrives on
// each participant's socket; once every participant has sent its frame of a round it answers all
// of them. Non-blocking reads are the caller's (poll); the answers are written blocking.
class HubRelay {
 public:
  explicit HubRelay(std::vector<int> fds);
  // Reads what participant r's socket has. Returns false at EOF or on a read error (the
  // participant has gone); a round then cannot complete.
  bool on_readable(int r);
  // Answers a round when every participant has sent its frame; returns an error when a
  // participant sent a malformed frame or could not be answered.
  Status flush();
  const std::vector<int>& fds() const { return fds_; }
  int64_t rounds() const { return rounds_; }

 private:
  std::vector<int> fds_;
  std::vector<std::string> inbox_;  // bytes received and not yet taken as a frame
  std::vector<std::vector<std::string>> pending_;  // frames per participant, oldest first
  int64_t rounds_ = 0;
};

}  // namespace mla
