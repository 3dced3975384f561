// Liveness: the bookkeeping by itself, then two heartbeat threads over loopback.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <zmq.hpp>

#include "transport/heartbeat.hpp"

using namespace aerie::transport;
using namespace std::chrono_literals;

TEST(PeerLiveness, SilenceBeyondTheTimeoutOrAClosedConnectionLosesAPeerOnce) {
  const SteadyTime t0{};
  PeerLiveness l({1, 2, 3}, 1000ms, t0);
  l.beat(1, t0 + 900ms);
  l.beat(2, t0 + 900ms);
  EXPECT_TRUE(l.check(t0 + 999ms).empty());
  auto lost = l.check(t0 + 1500ms);  // rank 3 never beat
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].rank, 3);
  EXPECT_NE(lost[0].reason.find("no heartbeat from rank 3"), std::string::npos);
  l.disconnected(2);
  lost = l.check(t0 + 1500ms);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].rank, 2);
  EXPECT_NE(lost[0].reason.find("connection closed"), std::string::npos);
  EXPECT_TRUE(l.check(t0 + 1800ms).empty());  // each reported once; rank 1 beat at 900 ms
  EXPECT_EQ(l.check(t0 + 2000ms).size(), 1u);  // now rank 1 is silent too
}

namespace {

// One side of a heartbeat pair: rank `own` binding (rank 0) or connecting to the other.
struct Side {
  std::vector<PeerFault> faults;
  std::mutex mu;
  std::condition_variable cv;
  void lost(const PeerFault& f) {
    std::lock_guard<std::mutex> lock(mu);
    faults.push_back(f);
    cv.notify_all();
  }
  bool wait_fault(std::chrono::milliseconds within) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, within, [&] { return !faults.empty(); });
  }
};

}  // namespace

TEST(HeartbeatThread, ALivePeerIsNeverLostAndADeadOneIsNoticedInMilliseconds) {
  zmq::context_t ctx;
  Side zero;
  auto to_one = std::make_unique<ZmqSender>(ctx, "tcp://127.0.0.1:*", true);
  auto from_one = std::make_unique<ZmqReceiver>(ctx, "tcp://127.0.0.1:*", true);
  from_one->watch_peer();
  const std::string to_one_ep = to_one->endpoint(), from_one_ep = from_one->endpoint();
  std::vector<HeartbeatPeer> zero_peers;
  zero_peers.push_back({.rank = 1, .out = std::move(to_one), .in = std::move(from_one)});
  HeartbeatThread rank0(0, std::move(zero_peers), 20ms, 400ms, [&](const PeerFault& f) { zero.lost(f); });
  {
    Side one;
    std::vector<HeartbeatPeer> one_peers;
    one_peers.push_back({.rank = 0, .out = std::make_unique<ZmqSender>(ctx, from_one_ep, false),
                         .in = std::make_unique<ZmqReceiver>(ctx, to_one_ep, false)});
    HeartbeatThread rank1(1, std::move(one_peers), 20ms, 400ms, [&](const PeerFault& f) { one.lost(f); });
    // Ten timeouts of beating: nobody is lost.
    EXPECT_FALSE(zero.wait_fault(4000ms));
    EXPECT_TRUE(one.faults.empty());
  }  // rank 1 goes away: its sockets close
  const auto gone = std::chrono::steady_clock::now();
  ASSERT_TRUE(zero.wait_fault(5000ms));
  EXPECT_EQ(zero.faults[0].rank, 1);
  // Noticed through the closed connection or, at worst, the 400 ms timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - gone, 2000ms);
}
