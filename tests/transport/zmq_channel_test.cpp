// ZeroMQ channels on loopback: delivery, sequence checks, malformed and oversized frames.
#include <gtest/gtest.h>

#include <zmq.hpp>

#include "kernels/error.hpp"
#include "transport/zmq_channel.hpp"

using namespace aerie::transport;
using namespace std::chrono_literals;

TEST(ZmqChannel, DeliversMessagesInOrderOverTcpLoopback) {
  zmq::context_t ctx;
  ZmqReceiver rx(ctx, "tcp://127.0.0.1:*", /*bind=*/true);
  ZmqSender tx(ctx, rx.endpoint(), /*bind=*/false);
  for (uint64_t i = 0; i < 20; ++i) {
    BatchMessage b;
    b.step_id = i;
    b.rids = {i};
    b.input_ids = {static_cast<int32_t>(i)};
    tx.send(b);
  }
  tx.send(Shutdown{.seq = 0, .reason = "done"});
  for (uint64_t i = 0; i < 20; ++i) {
    auto m = rx.receive(5s);
    ASSERT_TRUE(m);
    ASSERT_TRUE(std::holds_alternative<BatchMessage>(*m));
    EXPECT_EQ(std::get<BatchMessage>(*m).step_id, i);
    EXPECT_EQ(std::get<BatchMessage>(*m).seq, i);
  }
  auto last = rx.receive(5s);
  ASSERT_TRUE(last && std::holds_alternative<Shutdown>(*last));
  EXPECT_EQ(rx.stats().received, 21u);
  EXPECT_EQ(rx.stats().sequence_gaps, 0u);
  EXPECT_FALSE(rx.receive(10ms));  // nothing more
}

TEST(ZmqChannel, DropsMalformedFramesAndKeepsServing) {
  zmq::context_t ctx;
  ZmqReceiver rx(ctx, "inproc://malformed", /*bind=*/true);
  ZmqSender tx(ctx, "inproc://malformed", /*bind=*/false);
  tx.send_bytes({1, 2, 3});                                      // truncated header
  tx.send_bytes(encode_frame(999, std::vector<uint8_t>{1, 2}));  // unknown kind
  auto bad_payload = encode_frame(static_cast<uint16_t>(MessageKind::kBatchResult), std::vector<uint8_t>(5, 0xff));
  tx.send_bytes(bad_payload);                                    // payload does not decode
  tx.send(BatchResult{.seq = 0, .step_id = 5, .rids = {1}, .next_tokens = {2}, .logprobs = {}, .token_counts = {}, .error = ""});
  auto m = rx.receive(5s);
  ASSERT_TRUE(m && std::holds_alternative<BatchResult>(*m));
  EXPECT_EQ(std::get<BatchResult>(*m).step_id, 5u);
  EXPECT_EQ(rx.stats().dropped_bad_frames, 3u);
}

TEST(ZmqChannel, CountsSequenceGaps) {
  zmq::context_t ctx;
  ZmqReceiver rx(ctx, "inproc://gaps", true);
  ZmqSender tx(ctx, "inproc://gaps", false);
  tx.send_bytes(encode_message(Shutdown{.seq = 0, .reason = "a"}));
  tx.send_bytes(encode_message(Shutdown{.seq = 2, .reason = "b"}));  // seq 1 never came
  ASSERT_TRUE(rx.receive(5s));
  ASSERT_TRUE(rx.receive(5s));
  EXPECT_EQ(rx.stats().sequence_gaps, 1u);
}

TEST(ZmqChannel, OversizedMessagesNeverArrive) {
  zmq::context_t ctx;
  ZmqReceiver rx(ctx, "tcp://127.0.0.1:*", true, /*max_message_bytes=*/1024);
  {
    ZmqSender big(ctx, rx.endpoint(), false);
    BatchMessage b;
    b.kv_indices.assign(10000, 1);  // 40 KB: ZeroMQ refuses it at the receiver
    big.send(b);
    EXPECT_FALSE(rx.receive(300ms));
  }
  ZmqSender small(ctx, rx.endpoint(), false);  // the receiver still serves other peers
  small.send(Shutdown{.seq = 0, .reason = "ok"});
  auto m = rx.receive(5s);
  ASSERT_TRUE(m && std::holds_alternative<Shutdown>(*m));
}

TEST(ZmqChannel, BadEndpointsGiveClearErrors) {
  zmq::context_t ctx;
  EXPECT_THROW(ZmqReceiver(ctx, "tcp://not-an-address", true), aerie::Error);
}

namespace {
BatchMessage batch(uint64_t step) {
  BatchMessage b;
  b.step_id = step;
  b.rids = {step};
  b.input_ids = {1};
  return b;
}
}  // namespace

TEST(ZmqChannel, CurveChannelsTakeOnlyPeersHoldingTheKeys) {
  if (!curve_available()) GTEST_SKIP() << "libzmq without CURVE";
  zmq::context_t ctx;
  const ChannelAuth server{.own = CurveKeyPair::generate(), .server_public_key = {}};
  const CurveKeyPair client = CurveKeyPair::generate();
  EXPECT_EQ(server.own.public_key.size(), 40u);
  EXPECT_NE(server.own.public_key, client.public_key);  // fresh keys each time

  // Results to rank 0: a receiver bound as the CURVE server.
  ZmqReceiver rx(ctx, "tcp://127.0.0.1:*", true, kDefaultMaxPayloadBytes, &server);
  const ChannelAuth good{.own = client, .server_public_key = server.own.public_key};
  const ChannelAuth wrong{.own = client, .server_public_key = CurveKeyPair::generate().public_key};
  ZmqSender plain(ctx, rx.endpoint(), false);              // a process outside the launch
  ZmqSender wrong_key(ctx, rx.endpoint(), false, &wrong);  // or one guessing a key
  ZmqSender peer(ctx, rx.endpoint(), false, &good);
  plain.send(batch(100));
  wrong_key.send(batch(200));
  for (uint64_t i = 0; i < 5; ++i) peer.send(batch(i));
  for (uint64_t i = 0; i < 5; ++i) {
    auto m = rx.receive(5s);
    ASSERT_TRUE(m && std::holds_alternative<BatchMessage>(*m));
    EXPECT_EQ(std::get<BatchMessage>(*m).step_id, i);  // only the key holder's frames arrive
  }
  EXPECT_FALSE(rx.receive(300ms));

  // Batches from rank 0: a sender bound as the CURVE server; a rogue PULL gets none of them.
  const ChannelAuth push_server{.own = CurveKeyPair::generate(), .server_public_key = {}};
  ZmqSender tx(ctx, "tcp://127.0.0.1:*", true, &push_server);
  const ChannelAuth worker_auth{.own = client, .server_public_key = push_server.own.public_key};
  ZmqReceiver rogue(ctx, tx.endpoint(), false);
  ZmqReceiver worker(ctx, tx.endpoint(), false, kDefaultMaxPayloadBytes, &worker_auth);
  for (uint64_t i = 0; i < 10; ++i) tx.send(batch(i));
  for (uint64_t i = 0; i < 10; ++i) {
    auto m = worker.receive(5s);
    ASSERT_TRUE(m) << "batch " << i << " went elsewhere";
    EXPECT_EQ(std::get<BatchMessage>(*m).step_id, i);
  }
  EXPECT_FALSE(rogue.receive(300ms));
  EXPECT_EQ(rogue.stats().received, 0u);
}

// Liveness: a receiver that watches its peer learns, without blocking, that an authenticated
// peer has gone (its connection closed, as the kernel closes a killed process's sockets); a
// stranger failing CURVE does not count. Heartbeats go out without ever blocking.
TEST(ZmqChannel, WatchedReceiverNoticesItsPeerLeaving) {
  zmq::context_t ctx;
  const ChannelAuth server{.own = CurveKeyPair::generate(), .server_public_key = {}};
  ZmqReceiver rx(ctx, "tcp://127.0.0.1:*", /*bind=*/true, kDefaultMaxPayloadBytes, &server);
  rx.watch_peer();
  {
    const ChannelAuth stranger{.own = CurveKeyPair::generate(), .server_public_key = CurveKeyPair::generate().public_key};
    ZmqSender bad(ctx, rx.endpoint(), false, &stranger);
    (void)bad.try_send(Heartbeat{.seq = 0, .rank = 9});  // queued or not, it returns at once
    EXPECT_FALSE(rx.receive(200ms));
  }
  EXPECT_FALSE(rx.peer_lost());
  {
    const ChannelAuth client{.own = CurveKeyPair::generate(), .server_public_key = server.own.public_key};
    ZmqSender tx(ctx, rx.endpoint(), false, &client);
    ASSERT_TRUE(tx.try_send(Heartbeat{.seq = 0, .rank = 1}));
    auto m = rx.receive(5s);
    ASSERT_TRUE(m && std::holds_alternative<Heartbeat>(*m));
    EXPECT_EQ(std::get<Heartbeat>(*m).rank, 1);
    EXPECT_FALSE(rx.peer_lost());
  }  // the peer's socket closes
  bool lost = false;
  for (auto deadline = std::chrono::steady_clock::now() + 5s; !lost && std::chrono::steady_clock::now() < deadline;) {
    lost = rx.peer_lost();
    if (!lost) rx.receive(10ms);
  }
  EXPECT_TRUE(lost);
}

TEST(ZmqChannel, TrySendNeverBlocksWithoutAPeer) {
  zmq::context_t ctx;
  ZmqSender tx(ctx, "tcp://127.0.0.1:*", /*bind=*/true);  // nobody connects
  EXPECT_FALSE(tx.try_send(Heartbeat{.seq = 0, .rank = 0}));
  tx.set_send_timeout(50ms);
  EXPECT_THROW(tx.send(Heartbeat{.seq = 0, .rank = 0}), aerie::Error);
}
