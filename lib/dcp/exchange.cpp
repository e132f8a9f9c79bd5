#include "lib/dcp/exchange.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mla {

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kHello = "mla-dcp-hello/1";

std::string errno_text() { return std::strerror(errno); }

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Milliseconds left until `deadline` for poll(), at least 0 and at most a minute per wait.
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 60'000));
}

Status write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::error("sending to the peer failed: " + errno_text());
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status();
}

// Waits until fd is readable or the deadline passes.
Status wait_readable(int fd, Clock::time_point deadline, double timeout_s) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return Status();
    if (rc < 0 && errno != EINTR) return Status::error("poll() failed: " + errno_text());
    if (Clock::now() >= deadline)
      return Status::error("no answer from the peer within " + std::to_string(static_cast<int64_t>(timeout_s)) + " s");
  }
}

Status read_exact(int fd, char* p, size_t n, Clock::time_point deadline, double timeout_s) {
  while (n > 0) {
    MLA_RETURN_IF_ERROR(wait_readable(fd, deadline, timeout_s));
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) return Status::error("receiving from the peer failed: " + errno_text());
    if (r == 0) return Status::error("the peer closed the connection (its process ended)");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status();
}

std::string encode_length(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

uint64_t decode_length(const char* p) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return n;
}

class HubClient : public Exchange {
 public:
  HubClient(int fd, int rank, int size, bool owns_fd) : fd_(fd), rank_(rank), size_(size), owns_fd_(owns_fd) {}
  ~HubClient() override {
    if (owns_fd_) ::close(fd_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status all_gather(const std::string& mine, double timeout_s, std::vector<std::string>* all) override {
    MLA_RETURN_IF_ERROR(send_frame(fd_, mine));
    all->assign(static_cast<size_t>(size_), std::string());
    for (int r = 0; r < size_; ++r) MLA_RETURN_IF_ERROR(recv_frame(fd_, timeout_s, &(*all)[static_cast<size_t>(r)]));
    return Status();
  }

 private:
  int fd_;
  int rank_, size_;
  bool owns_fd_;
};

class Solo : public Exchange {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status all_gather(const std::string& mine, double, std::vector<std::string>* all) override {
    *all = {mine};
    return Status();
  }
};

// Rank 0 over TCP: peers_[r] is rank r's connection (r >= 1).
class HubServer : public Exchange {
 public:
  explicit HubServer(std::vector<int> peers) : peers_(std::move(peers)) {}
  ~HubServer() override {
    for (int fd : peers_)
      if (fd >= 0) ::close(fd);
  }
  int rank() const override { return 0; }
  int size() const override { return static_cast<int>(peers_.size()); }
  Status all_gather(const std::string& mine, double timeout_s, std::vector<std::string>* all) override {
    all->assign(peers_.size(), std::string());
    (*all)[0] = mine;
    for (size_t r = 1; r < peers_.size(); ++r) {
      const Status s = recv_frame(peers_[r], timeout_s, &(*all)[r]);
      if (!s.ok()) return Status::error("rank " + std::to_string(r) + ": " + s.message());
    }
    for (size_t r = 1; r < peers_.size(); ++r)
      for (const std::string& frame : *all) {
        const Status s = send_frame(peers_[r], frame);
        if (!s.ok()) return Status::error("rank " + std::to_string(r) + ": " + s.message());
      }
    return Status();
  }

 private:
  std::vector<int> peers_;  // [0] unused (-1)
};

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

Status send_frame(int fd, const std::string& payload) {
  const std::string head = encode_length(payload.size());
  MLA_RETURN_IF_ERROR(write_all(fd, head.data(), head.size()));
  return write_all(fd, payload.data(), payload.size());
}

Status recv_frame(int fd, double timeout_s, std::string* payload) {
  const auto deadline = deadline_after(timeout_s);
  char head[8];
  MLA_RETURN_IF_ERROR(read_exact(fd, head, sizeof head, deadline, timeout_s));
  const uint64_t n = decode_length(head);
  if (n > kMaxFrameBytes) return Status::error("malformed frame: length " + std::to_string(n));
  payload->resize(static_cast<size_t>(n));
  return read_exact(fd, payload->data(), payload->size(), deadline, timeout_s);
}

std::unique_ptr<Exchange> hub_client(int fd, int rank, int size, bool owns_fd) {
  return std::make_unique<HubClient>(fd, rank, size, owns_fd);
}

std::unique_ptr<Exchange> solo_exchange() { return std::make_unique<Solo>(); }

TcpListener::~TcpListener() {
  if (fd_ >= 0) ::close(fd_);
}

Status TcpListener::open(int port, std::unique_ptr<TcpListener>* out) {
  if (port < 0 || port > 65535) return Status::error("port " + std::to_string(port) + " is not in [0, 65535]");
  auto l = std::make_unique<TcpListener>();
  std::string why;
  // IPv6 with IPv4-mapped addresses first (reachable by either family), then IPv4 alone.
  for (const int family : {AF_INET6, AF_INET}) {
    const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = "socket(): " + errno_text();
      continue;
    }
    int one = 1, zero = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (family == AF_INET6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_any;
      a->sin6_port = htons(static_cast<uint16_t>(port));
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&addr);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_ANY);
      a->sin_port = htons(static_cast<uint16_t>(port));
      len = sizeof *a;
    }
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 1024) != 0) {
      why = "cannot listen on port " + std::to_string(port) + ": " + errno_text();
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t blen = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
    l->port_ = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    l->fd_ = fd;
    *out = std::move(l);
    return Status();
  }
  return Status::error(why);
}

Status accept_hub_peers(TcpListener& listener, int world, const std::string& token, double timeout_s,
                        std::unique_ptr<Exchange>* out) {
  std::vector<int> peers(static_cast<size_t>(world), -1);
  const auto close_all = [&] {
    for (int& fd : peers)
      if (fd >= 0) ::close(fd), fd = -1;
  };
  const auto deadline = deadline_after(timeout_s);
  int joined = 0;
  while (joined < world - 1) {
    const Status waited = wait_readable(listener.fd(), deadline, timeout_s);
    if (!waited.ok()) {
      std::string missing;
      for (int r = 1; r < world; ++r)
        if (peers[static_cast<size_t>(r)] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      close_all();
      return Status::error("rank 0: " + std::to_string(joined) + " of " + std::to_string(world - 1) +
                           " ranks connected within " + std::to_string(static_cast<int64_t>(timeout_s)) +
                           " s (missing: " + missing + ")");
    }
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      close_all();
      return Status::error("rank 0: accept() failed: " + errno_text());
    }
    set_nodelay(fd);
    std::string hello;
    const Status got = recv_frame(fd, std::max(1.0, std::min(timeout_s, 30.0)), &hello);
    std::istringstream in(hello);
    std::string magic, their_token;
    int rank = -1, their_world = -1;
    std::getline(in, magic);
    in >> rank >> their_world;
    in.ignore(1);
    std::getline(in, their_token, '\0');
    std::string problem;
    if (!got.ok() || magic != kHello) problem = "a connection that is not an mla-dcp rank";
    else if (their_world != world)
      problem = "rank " + std::to_string(rank) + " runs with world size " + std::to_string(their_world) +
                ", rank 0 with " + std::to_string(world);
    else if (rank < 1 || rank >= world) problem = "rank " + std::to_string(rank) + " is outside [1, " + std::to_string(world) + ")";
    else if (peers[static_cast<size_t>(rank)] >= 0) problem = "rank " + std::to_string(rank) + " connected twice";
    else if (their_token != token)
      problem = "rank " + std::to_string(rank) + " does not run what rank 0 runs (rank 0: " + token + "; rank " +
                std::to_string(rank) + ": " + their_token + ")";
    if (!problem.empty()) {
      (void)send_frame(fd, "error: " + problem);
      ::close(fd);
      close_all();
      return Status::error("rank 0: " + problem);
    }
    peers[static_cast<size_t>(rank)] = fd;
    ++joined;
  }
  for (int r = 1; r < world; ++r) {
    const Status s = send_frame(peers[static_cast<size_t>(r)], "ok");
    if (!s.ok()) {
      close_all();
      return Status::error("rank 0: rank " + std::to_string(r) + ": " + s.message());
    }
  }
  *out = std::make_unique<HubServer>(std::move(peers));
  return Status();
}

Status connect_to_hub(const std::string& host, int port, int rank, int world, const std::string& token,
                      double timeout_s, std::unique_ptr<Exchange>* out) {
  const auto deadline = deadline_after(timeout_s);
  const std::string where = host + ":" + std::to_string(port);
  std::string last = "no attempt";
  while (Clock::now() < deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) {
      last = std::string("cannot resolve ") + host + ": " + ::gai_strerror(gai);
    } else {
      for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
          last = "connect() to " + where + ": " + errno_text();
          ::close(fd);
          continue;
        }
        ::freeaddrinfo(res);
        res = nullptr;
        set_nodelay(fd);
        std::ostringstream hello;
        hello << kHello << "\n" << rank << " " << world << "\n" << token;
        std::string answer;
        Status s = send_frame(fd, hello.str());
        if (s.ok()) s = recv_frame(fd, std::max(1.0, std::chrono::duration<double>(deadline - Clock::now()).count()), &answer);
        if (s.ok() && answer != "ok") s = Status::error(answer.rfind("error: ", 0) == 0 ? "rank 0 refused rank " + std::to_string(rank) + ": " + answer.substr(7) : "unexpected answer from " + where);
        if (!s.ok()) {
          ::close(fd);
          return Status::error("rank " + std::to_string(rank) + ": " + s.message());
        }
        *out = hub_client(fd, rank, world);
        return Status();
      }
      if (res != nullptr) ::freeaddrinfo(res);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::error("rank " + std::to_string(rank) + ": cannot reach rank 0 at " + where + " within " +
                       std::to_string(static_cast<int64_t>(timeout_s)) + " s (" + last + ")");
}

HubRelay::HubRelay(std::vector<int> fds) : fds_(std::move(fds)), inbox_(fds_.size()), pending_(fds_.size()) {}

bool HubRelay::on_readable(int r) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fds_[static_cast<size_t>(r)], buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      inbox_[static_cast<size_t>(r)].append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  std::string& in = inbox_[static_cast<size_t>(r)];
  while (in.size() >= 8) {
    const uint64_t len = decode_length(in.data());
    if (len > kMaxFrameBytes) return false;
    if (in.size() < 8 + len) break;
    pending_[static_cast<size_t>(r)].push_back(in.substr(8, static_cast<size_t>(len)));
    in.erase(0, static_cast<size_t>(8 + len));
  }
  return true;
}

Status HubRelay::flush() {
  for (;;) {
    for (const auto& p : pending_)
      if (p.empty()) return Status();
    std::vector<std::string> round;
    for (auto& p : pending_) {
      round.push_back(std::move(p.front()));
      p.erase(p.begin());
    }
    for (size_t r = 0; r < fds_.size(); ++r)
      for (const std::string& frame : round) {
        const Status s = send_frame(fds_[r], frame);
        if (!s.ok()) return Status::error("rank " + std::to_string(r) + ": " + s.message());
      }
    ++rounds_;
  }
}

}  // namespace mla
