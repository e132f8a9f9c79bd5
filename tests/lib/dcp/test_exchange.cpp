// The exchange of a distributed run (lib/dcp/exchange.h): frames over a socketpair, and the star
// around rank 0 over localhost TCP as a launcher's processes use it, with an NCCL-sized unique id
// (128 bytes) going from rank 0 to every rank; the refusals of the rendezvous.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

#include "lib/dcp/exchange.h"

namespace mla {
namespace {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen() & 0xFF);
  return s;
}

TEST(Frames, RoundTripOverASocketpair) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::vector<std::string> sent = {"", "x", random_bytes(128, 1), random_bytes(3 << 20, 2)};
  std::thread writer([&] {
    for (const auto& s : sent) ASSERT_TRUE(send_frame(sv[0], s).ok());
  });
  for (const auto& want : sent) {
    std::string got;
    ASSERT_TRUE(recv_frame(sv[1], 10.0, &got).ok());
    EXPECT_EQ(got, want);
  }
  writer.join();
  ::close(sv[0]);
  std::string got;
  const Status closed = recv_frame(sv[1], 10.0, &got);
  EXPECT_FALSE(closed.ok());
  EXPECT_NE(closed.message().find("closed"), std::string::npos) << closed.message();
  ::close(sv[1]);
}

TEST(Frames, ASilentPeerIsATimeoutNotAHang) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string got;
  const Status s = recv_frame(sv[1], 0.2, &got);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no answer"), std::string::npos) << s.message();
  ::close(sv[0]);
  ::close(sv[1]);
}

TEST(Frames, AnImpossibleLengthIsRefused) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const std::string head(8, '\xFF');
  ASSERT_EQ(::write(sv[0], head.data(), head.size()), 8);
  std::string got;
  const Status s = recv_frame(sv[1], 1.0, &got);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed"), std::string::npos) << s.message();
  ::close(sv[0]);
  ::close(sv[1]);
}

// Ranks 1..world-1 in threads connect to rank 0 (this thread) over localhost TCP.
struct TcpRun {
  std::vector<Status> peer_status;
  std::vector<std::unique_ptr<Exchange>> peers;
  Status hub_status;
  std::unique_ptr<Exchange> hub;
};

TcpRun tcp_rendezvous(int world, const std::vector<std::string>& tokens, const std::string& host = "127.0.0.1") {
  std::unique_ptr<TcpListener> listener;
  EXPECT_TRUE(TcpListener::open(0, &listener).ok());
  TcpRun run;
  run.peer_status.resize(static_cast<size_t>(world));
  run.peers.resize(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 1; r < world; ++r)
    threads.emplace_back([&, r] {
      run.peer_status[static_cast<size_t>(r)] =
          connect_to_hub(host, listener->port(), r, world, tokens[static_cast<size_t>(r)], 10.0, &run.peers[static_cast<size_t>(r)]);
    });
  run.hub_status = accept_hub_peers(*listener, world, tokens[0], 10.0, &run.hub);
  for (auto& t : threads) t.join();
  return run;
}

TEST(TcpHub, TheUniqueIdOfRankZeroReachesEveryRank) {
  const int world = 4;
  TcpRun run = tcp_rendezvous(world, std::vector<std::string>(world, "same run"));
  ASSERT_TRUE(run.hub_status.ok()) << run.hub_status.message();
  for (int r = 1; r < world; ++r) ASSERT_TRUE(run.peer_status[static_cast<size_t>(r)].ok()) << run.peer_status[static_cast<size_t>(r)].message();
  // Round 1: rank 0 offers a 128-byte id (NCCL_UNIQUE_ID_BYTES), the others nothing.
  // Round 2: every rank its own bytes.
  const std::string id = random_bytes(128, 42);
  std::vector<std::vector<std::string>> got1(world), got2(world);
  std::vector<std::thread> threads;
  for (int r = 1; r < world; ++r)
    threads.emplace_back([&, r] {
      auto& ex = *run.peers[static_cast<size_t>(r)];
      EXPECT_EQ(ex.rank(), r);
      EXPECT_EQ(ex.size(), world);
      EXPECT_TRUE(ex.all_gather("", 10.0, &got1[static_cast<size_t>(r)]).ok());
      EXPECT_TRUE(ex.all_gather("rank " + std::to_string(r), 10.0, &got2[static_cast<size_t>(r)]).ok());
    });
  ASSERT_TRUE(run.hub->all_gather(id, 10.0, &got1[0]).ok());
  ASSERT_TRUE(run.hub->all_gather("rank 0", 10.0, &got2[0]).ok());
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got1[static_cast<size_t>(r)].size(), static_cast<size_t>(world));
    EXPECT_EQ(got1[static_cast<size_t>(r)][0], id) << "rank " << r;
    for (int q = 1; q < world; ++q) EXPECT_EQ(got1[static_cast<size_t>(r)][static_cast<size_t>(q)], "");
    for (int q = 0; q < world; ++q) EXPECT_EQ(got2[static_cast<size_t>(r)][static_cast<size_t>(q)], "rank " + std::to_string(q));
  }
}

TEST(TcpHub, ConnectsByHostName) {
  TcpRun run = tcp_rendezvous(2, {"t", "t"}, "localhost");
  EXPECT_TRUE(run.hub_status.ok()) << run.hub_status.message();
  EXPECT_TRUE(run.peer_status[1].ok()) << run.peer_status[1].message();
}

TEST(TcpHub, ARankThatRunsSomethingElseIsRefusedOnBothSides) {
  TcpRun run = tcp_rendezvous(3, {"scenarios a", "scenarios a", "scenarios b"});
  ASSERT_FALSE(run.hub_status.ok());
  EXPECT_NE(run.hub_status.message().find("rank 2 does not run what rank 0 runs"), std::string::npos)
      << run.hub_status.message();
  ASSERT_FALSE(run.peer_status[2].ok());
  EXPECT_NE(run.peer_status[2].message().find("refused"), std::string::npos) << run.peer_status[2].message();
}

TEST(TcpHub, AnotherWorldSizeOrADuplicateRankIsRefused) {
  {
    std::unique_ptr<TcpListener> listener;
    ASSERT_TRUE(TcpListener::open(0, &listener).ok());
    Status peer;
    std::unique_ptr<Exchange> ex;
    std::thread t([&] { peer = connect_to_hub("127.0.0.1", listener->port(), 1, 3, "t", 10.0, &ex); });
    std::unique_ptr<Exchange> hub;
    const Status s = accept_hub_peers(*listener, 2, "t", 10.0, &hub);
    t.join();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("world size 3, rank 0 with 2"), std::string::npos) << s.message();
    EXPECT_FALSE(peer.ok());
  }
  {
    std::unique_ptr<TcpListener> listener;
    ASSERT_TRUE(TcpListener::open(0, &listener).ok());
    std::vector<Status> peers(2);
    std::vector<std::unique_ptr<Exchange>> ex(2);
    std::vector<std::thread> t;
    for (int i = 0; i < 2; ++i)
      t.emplace_back([&, i] { peers[static_cast<size_t>(i)] = connect_to_hub("127.0.0.1", listener->port(), 1, 3, "t", 10.0, &ex[static_cast<size_t>(i)]); });
    std::unique_ptr<Exchange> hub;
    const Status s = accept_hub_peers(*listener, 3, "t", 10.0, &hub);
    for (auto& th : t) th.join();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("rank 1 connected twice"), std::string::npos) << s.message();
  }
}

TEST(TcpHub, MissingRanksAndAnAbsentRankZeroEndInAMessage) {
  std::unique_ptr<TcpListener> listener;
  ASSERT_TRUE(TcpListener::open(0, &listener).ok());
  std::unique_ptr<Exchange> hub;
  const Status s = accept_hub_peers(*listener, 3, "t", 0.3, &hub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0 of 2 ranks connected"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("missing: 1, 2"), std::string::npos) << s.message();
  const int port = listener->port();
  listener.reset();  // nobody listens there now
  std::unique_ptr<Exchange> ex;
  const Status c = connect_to_hub("127.0.0.1", port, 1, 2, "t", 0.3, &ex);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("cannot reach rank 0"), std::string::npos) << c.message();
}

TEST(SoloExchange, GathersItsOwnWord) {
  auto ex = solo_exchange();
  std::vector<std::string> all;
  ASSERT_TRUE(ex->all_gather("alone", 1.0, &all).ok());
  EXPECT_EQ(all, std::vector<std::string>{"alone"});
}

}  // namespace
}  // namespace mla
