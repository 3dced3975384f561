#include "transport/heartbeat.hpp"

#include <sstream>

#include "kernels/error.hpp"

namespace aerie::transport {

PeerLiveness::PeerLiveness(std::vector<int> peers, std::chrono::milliseconds timeout, SteadyTime start) : timeout_(timeout) {
  AERIE_CHECK(timeout.count() > 0, "a heartbeat timeout must be positive");
  for (int r : peers) peers_.push_back({.rank = r, .last = start});
}

PeerLiveness::Peer* PeerLiveness::find(int rank) {
  for (auto& p : peers_)
    if (p.rank == rank) return &p;
  return nullptr;
}

void PeerLiveness::beat(int rank, SteadyTime now) {
  if (Peer* p = find(rank)) p->last = std::max(p->last, now);
}

void PeerLiveness::disconnected(int rank) {
  if (Peer* p = find(rank)) p->disconnected = true;
}

std::vector<PeerFault> PeerLiveness::check(SteadyTime now) {
  std::vector<PeerFault> lost;
  for (auto& p : peers_) {
    if (p.reported) continue;
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - p.last);
    std::ostringstream why;
    if (p.disconnected) why << "rank " << p.rank << "'s connection closed (the process is gone)";
    else if (silent > timeout_) why << "no heartbeat from rank " << p.rank << " for " << silent.count() << " ms (stopped or wedged)";
    else continue;
    p.reported = true;
    lost.push_back({.rank = p.rank, .reason = why.str()});
  }
  return lost;
}

HeartbeatThread::HeartbeatThread(int own_rank, std::vector<HeartbeatPeer> peers, std::chrono::milliseconds interval,
                                 std::chrono::milliseconds timeout, std::function<void(const PeerFault&)> on_lost)
    : own_rank_(own_rank), peers_(std::move(peers)), interval_(interval), timeout_(timeout), on_lost_(std::move(on_lost)) {
  AERIE_CHECK(interval.count() > 0 && interval < timeout, "the heartbeat interval must be positive and below the timeout");
  thread_ = std::thread([this] { run(); });
}

HeartbeatThread::~HeartbeatThread() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void HeartbeatThread::run() {
  std::vector<int> ranks;
  for (const auto& p : peers_) ranks.push_back(p.rank);
  PeerLiveness liveness(ranks, timeout_, std::chrono::steady_clock::now());
  auto next_beat = std::chrono::steady_clock::now();
  // Polls each peer's receiver in short slices, so that a closed connection is seen quickly.
  const auto slice = std::chrono::milliseconds(std::max<int64_t>(1, 20 / std::max<int64_t>(1, static_cast<int64_t>(peers_.size()))));
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_beat) {
      for (auto& p : peers_) (void)p.out->try_send(Heartbeat{.seq = 0, .rank = own_rank_});  // a full queue: the peer is not reading
      next_beat = now + interval_;
    }
    for (auto& p : peers_) {
      while (auto m = p.in->receive(slice))
        if (std::holds_alternative<Heartbeat>(*m)) liveness.beat(p.rank, std::chrono::steady_clock::now());
      if (p.in->peer_lost()) liveness.disconnected(p.rank);
    }
    for (const auto& fault : liveness.check(std::chrono::steady_clock::now())) on_lost_(fault);
  }
}

}  // namespace aerie::transport
