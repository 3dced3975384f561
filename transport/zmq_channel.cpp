#include "transport/zmq_channel.hpp"

#include <zmq.hpp>

#include <atomic>
#include <cstring>

#include "kernels/error.hpp"

namespace aerie::transport {

namespace {

// Messages queued per peer at most (ZeroMQ's default is 1,000: with 64 MiB frames, 64 GB). The
// scheduler keeps one batch in flight per worker, so a handful is plenty.
constexpr int kHighWaterMark = 16;

void open(zmq::socket_t& s, const std::string& endpoint, bool bind) {
  try {
    if (bind) s.bind(endpoint);
    else s.connect(endpoint);
  } catch (const zmq::error_t& e) {
    AERIE_FAIL("cannot " << (bind ? "bind" : "connect") << " " << endpoint << ": " << e.what());
  }
}

// CURVE options go on before bind/connect.
void secure(zmq::socket_t& s, const ChannelAuth* auth, bool bind) {
  if (!auth) return;
  if (bind) {
    s.set(zmq::sockopt::curve_server, 1);
    s.set(zmq::sockopt::curve_secretkey, auth->own.secret_key);
  } else {
    AERIE_CHECK(!auth->server_public_key.empty(), "a connecting CURVE channel needs the server's public key");
    s.set(zmq::sockopt::curve_serverkey, auth->server_public_key);
    s.set(zmq::sockopt::curve_publickey, auth->own.public_key);
    s.set(zmq::sockopt::curve_secretkey, auth->own.secret_key);
  }
}

std::string last_endpoint(const zmq::socket_t& s) { return s.get(zmq::sockopt::last_endpoint); }

template <class T>
std::optional<AnyMessage> as_message(const Frame& f, ChannelStats& stats) {
  auto decoded = decode_payload<T>(f.payload);
  if (std::holds_alternative<std::string>(decoded)) {
    ++stats.dropped_bad_frames;
    return std::nullopt;
  }
  return AnyMessage(std::move(std::get<T>(decoded)));
}

}  // namespace

ZmqSender::ZmqSender(zmq::context_t& ctx, const std::string& endpoint, bool bind, const ChannelAuth* auth)
    : socket_(std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::push)) {
  socket_->set(zmq::sockopt::linger, 1000);
  socket_->set(zmq::sockopt::sndhwm, kHighWaterMark);
  secure(*socket_, auth, bind);
  open(*socket_, endpoint, bind);
}
ZmqSender::~ZmqSender() = default;

void ZmqSender::send_bytes(const std::vector<uint8_t>& frame) {
  AERIE_CHECK(socket_->send(zmq::buffer(frame), zmq::send_flags::none), "a ZeroMQ send timed out (the peer stopped reading)");
  ++stats_.sent;
}

bool ZmqSender::try_send_bytes(const std::vector<uint8_t>& frame) {
  if (!socket_->send(zmq::buffer(frame), zmq::send_flags::dontwait)) return false;
  ++stats_.sent;
  return true;
}

void ZmqSender::set_send_timeout(std::chrono::milliseconds timeout) { socket_->set(zmq::sockopt::sndtimeo, static_cast<int>(timeout.count())); }

std::string ZmqSender::endpoint() const { return last_endpoint(*socket_); }

ZmqReceiver::ZmqReceiver(zmq::context_t& ctx, const std::string& endpoint, bool bind, uint32_t max_message_bytes, const ChannelAuth* auth)
    : socket_(std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pull)), ctx_(&ctx), max_message_bytes_(max_message_bytes) {
  // ZeroMQ refuses (and disconnects) a peer whose message exceeds this, before buffering it.
  socket_->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_message_bytes) + static_cast<int64_t>(kFrameHeaderBytes));
  socket_->set(zmq::sockopt::linger, 0);
  socket_->set(zmq::sockopt::rcvhwm, kHighWaterMark);
  secure(*socket_, auth, bind);
  open(*socket_, endpoint, bind);
}
ZmqReceiver::~ZmqReceiver() = default;

void ZmqReceiver::watch_peer() {
  static std::atomic<uint64_t> next{0};
  const std::string address = "inproc://aerie-monitor-" + std::to_string(next++);
  AERIE_CHECK(zmq_socket_monitor(static_cast<void*>(*socket_), address.c_str(),
                                 ZMQ_EVENT_DISCONNECTED) == 0,
              "cannot monitor a ZeroMQ socket: " << zmq_strerror(zmq_errno()));
  monitor_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pair);
  monitor_->connect(address);
}

bool ZmqReceiver::peer_lost() {
  if (!monitor_ || lost_) return lost_;
  for (;;) {
    // A monitor event is two frames: [u16 event, u32 value (the connection's fd here)] and the endpoint.
    zmq::message_t event, where;
    if (!monitor_->recv(event, zmq::recv_flags::dontwait)) return lost_;
    (void)monitor_->recv(where, zmq::recv_flags::dontwait);
    if (event.size() < 6) continue;
    uint16_t id = 0;
    uint32_t fd = 0;
    std::memcpy(&id, event.data(), sizeof id);
    std::memcpy(&fd, static_cast<const uint8_t*>(event.data()) + 2, sizeof fd);
    // Only a connection our peer's messages came through counts (receive() records it): a
    // stranger connecting, failing CURVE and being dropped must not pass for our peer leaving.
    if (id == ZMQ_EVENT_DISCONNECTED && authenticated_.erase(fd) > 0) lost_ = true;
  }
}

std::string ZmqReceiver::endpoint() const { return last_endpoint(*socket_); }

std::optional<AnyMessage> ZmqReceiver::receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, left.count() > 0 ? left : std::chrono::milliseconds(0));
    if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
    zmq::message_t raw;
    if (!socket_->recv(raw, zmq::recv_flags::dontwait)) continue;
    if (monitor_) {
      // The connection it came through passed the CURVE handshake: remember it as our peer's
      // (ZMQ_SRCFD: the message's source socket).
      const int fd = zmq_msg_get(raw.handle(), ZMQ_SRCFD);
      if (fd >= 0) authenticated_.insert(static_cast<uint32_t>(fd));
    }
    const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(raw.data()), raw.size());
    auto decoded = decode_frame(bytes, known_message_kinds(), max_message_bytes_);
    if (std::holds_alternative<FrameDecodeError>(decoded)) {
      ++stats_.dropped_bad_frames;
      continue;
    }
    const Frame& f = std::get<Frame>(decoded);
    std::optional<AnyMessage> msg;
    switch (static_cast<MessageKind>(f.kind)) {
      case MessageKind::kBatch: msg = as_message<BatchMessage>(f, stats_); break;
      case MessageKind::kBatchResult: msg = as_message<BatchResult>(f, stats_); break;
      case MessageKind::kShutdown: msg = as_message<Shutdown>(f, stats_); break;
      case MessageKind::kHeartbeat: msg = as_message<Heartbeat>(f, stats_); break;
    }
    if (!msg) continue;
    const uint64_t seq = std::visit([](const auto& m) { return m.seq; }, *msg);
    if (seq != expected_seq_) ++stats_.sequence_gaps;
    expected_seq_ = seq + 1;
    ++stats_.received;
    return msg;
  }
}

}  // namespace aerie::transport
