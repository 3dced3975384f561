#pragma once
// One direction of framed messages over ZeroMQ (PUSH -> PULL): the scheduler's batches to a
// worker, or a worker's results back. The receiver caps message size (ZMQ_MAXMSGSIZE),
// checks each frame (transport/frame.hpp) and each sequence number; what fails is dropped
// and counted, never delivered, never a crash.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include "transport/codec.hpp"
#include "transport/curve.hpp"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace aerie::transport {

struct ChannelStats {
  uint64_t sent = 0;
  uint64_t received = 0;
  uint64_t dropped_bad_frames = 0;  // failed the frame or payload checks
  uint64_t sequence_gaps = 0;       // a frame arrived with seq != expected
};

// Endpoints are ZeroMQ addresses: "tcp://127.0.0.1:PORT", "ipc:///path", "inproc://name".
// With `auth`, the channel runs CurveZMQ (transport/curve.hpp): the binding end as the server,
// the connecting end as a client holding the server's public key; peers without it are never
// connected. Without it (tests, inproc), the channel is plain.
class ZmqSender {
 public:
  ZmqSender(zmq::context_t& ctx, const std::string& endpoint, bool bind, const ChannelAuth* auth = nullptr);
  ~ZmqSender();
  // Stamps the next sequence number into msg.seq and sends it.
  template <class T>
  void send(T msg) {
    msg.seq = next_seq_++;
    send_bytes(encode_message(msg));
  }
  // Like send(), but gives up at once (false) when the peer's queue is full or no peer is
  // connected: for heartbeats, which must never block their thread.
  template <class T>
  bool try_send(T msg) {
    msg.seq = next_seq_;
    if (!try_send_bytes(encode_message(msg))) return false;
    ++next_seq_;
    return true;
  }
  void send_bytes(const std::vector<uint8_t>& frame);  // raw (tests send malformed frames)
  bool try_send_bytes(const std::vector<uint8_t>& frame);
  // A send that cannot be queued within `timeout` (the peer stopped reading) throws aerie::Error
  // instead of blocking for good.
  void set_send_timeout(std::chrono::milliseconds timeout);
  const ChannelStats& stats() const { return stats_; }
  // The endpoint actually bound (resolves tcp://127.0.0.1:* to its port).
  std::string endpoint() const;

 private:
  std::unique_ptr<zmq::socket_t> socket_;
  uint64_t next_seq_ = 0;
  ChannelStats stats_;
};

using AnyMessage = std::variant<BatchMessage, BatchResult, Shutdown, Heartbeat>;

class ZmqReceiver {
 public:
  ZmqReceiver(zmq::context_t& ctx, const std::string& endpoint, bool bind, uint32_t max_message_bytes = kDefaultMaxPayloadBytes,
              const ChannelAuth* auth = nullptr);
  ~ZmqReceiver();
  // The next well-formed message, or nothing when none arrives within the timeout.
  // Malformed frames in between are dropped and counted.
  std::optional<AnyMessage> receive(std::chrono::milliseconds timeout);
  const ChannelStats& stats() const { return stats_; }
  std::string endpoint() const;
  // Watches the socket's connections (a ZeroMQ socket monitor): peer_lost() then tells, without
  // blocking, whether the connection a message last came through (so one that passed the CURVE
  // handshake) has since closed — a process that dies has its connections closed by the kernel
  // at once. Call watch_peer() before the peer connects.
  void watch_peer();
  bool peer_lost();

 private:
  std::unique_ptr<zmq::socket_t> socket_;
  zmq::context_t* ctx_;
  std::unique_ptr<zmq::socket_t> monitor_;  // the PAIR end of the socket monitor
  std::set<uint32_t> authenticated_;  // fds of connections messages came through
  bool lost_ = false;
  uint32_t max_message_bytes_;
  uint64_t expected_seq_ = 0;
  ChannelStats stats_;
};

}  // namespace aerie::transport
