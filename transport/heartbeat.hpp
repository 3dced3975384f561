#pragma once
// Liveness between the ranks of a launch. Rank 0 and every other rank exchange a Heartbeat
// about every `interval` on channels of their own (not the batch channels, which wait on
// forwards), each side on a thread of its own. A peer is lost when
//  - its connection closes (ZmqReceiver::watch_peer: a killed process's sockets are closed by
//    the kernel, so this is noticed within milliseconds), or
//  - no heartbeat came from it for `timeout` (a stopped or wedged process).
// Each loss is reported once, with how it was noticed.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/zmq_channel.hpp"

namespace aerie::transport {

using SteadyTime = std::chrono::steady_clock::time_point;

struct PeerFault {
  int rank = 0;
  std::string reason;
};

// The bookkeeping, without sockets or threads (unit-tested).
class PeerLiveness {
 public:
  PeerLiveness(std::vector<int> peers, std::chrono::milliseconds timeout, SteadyTime start);
  void beat(int rank, SteadyTime now);
  void disconnected(int rank);
  // Peers lost since the last call (each reported once).
  std::vector<PeerFault> check(SteadyTime now);

 private:
  struct Peer {
    int rank;
    SteadyTime last;
    bool disconnected = false;
    bool reported = false;
  };
  Peer* find(int rank);
  std::vector<Peer> peers_;
  std::chrono::milliseconds timeout_;
};

// One peer's two heartbeat channels.
struct HeartbeatPeer {
  int rank = 0;
  std::unique_ptr<ZmqSender> out;
  std::unique_ptr<ZmqReceiver> in;  // watched (watch_peer) before the peer connects
};

class HeartbeatThread {
 public:
  // Starts beating at once; on_lost runs on the heartbeat thread, once per lost peer.
  HeartbeatThread(int own_rank, std::vector<HeartbeatPeer> peers, std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                  std::function<void(const PeerFault&)> on_lost);
  ~HeartbeatThread();  // stops the thread
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;

 private:
  void run();
  int own_rank_;
  std::vector<HeartbeatPeer> peers_;
  std::chrono::milliseconds interval_, timeout_;
  std::function<void(const PeerFault&)> on_lost_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace aerie::transport
