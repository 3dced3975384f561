// Message round trips through cereal + frames, and malformed payloads.
#include <gtest/gtest.h>

#include <random>

#include "transport/codec.hpp"

using namespace aerie::transport;

namespace {

BatchMessage sample_batch() {
  BatchMessage b;
  b.seq = 7;
  b.step_id = 42;
  b.mode = ForwardMode::kMixed;
  b.rids = {11, 12};
  b.input_ids = {1, 5, 7, 9};
  b.positions = {0, 1, 2, 17};
  b.out_cache_loc = {4, 5, 6, 80};
  b.qo_indptr = {0, 3, 4};
  b.kv_indptr = {0, 3, 21};
  b.kv_indices.assign(21, 3);
  b.logit_rows = {2, 3};
  b.sampling = {{.temperature = 0.7f, .top_p = 0.9f, .min_p = 0.0f, .top_k = 40, .seed = 1234, .step = 3}, {}};
  b.global_num_tokens = {4, 0};
  b.bucket = 0;
  return b;
}

template <class T>
T round_trip(const T& msg) {
  const auto frame = encode_message(msg);
  auto f = decode_frame(frame, known_message_kinds());
  EXPECT_TRUE(std::holds_alternative<Frame>(f));
  EXPECT_EQ(std::get<Frame>(f).kind, static_cast<uint16_t>(kind_of<T>()));
  auto m = decode_payload<T>(std::get<Frame>(f).payload);
  EXPECT_TRUE(std::holds_alternative<T>(m)) << std::get<std::string>(m);
  return std::get<T>(m);
}

template <class M>
std::vector<uint8_t> payload_of(const M& b) {
  const auto frame = encode_message(b);
  return std::vector<uint8_t>(frame.begin() + kFrameHeaderBytes, frame.end());
}

}  // namespace

TEST(Messages, RoundTripEveryKind) {
  const BatchMessage b = sample_batch();
  EXPECT_EQ(round_trip(b), b);
  const BatchResult r{.seq = 3, .step_id = 42, .rids = {11, 12}, .next_tokens = {99, 100}, .error = ""};
  EXPECT_EQ(round_trip(r), r);
  const BatchResult failed{.seq = 4, .step_id = 43, .rids = {}, .next_tokens = {}, .error = "token id 900 is outside the vocabulary"};
  EXPECT_EQ(round_trip(failed), failed);
  const Shutdown s{.seq = 9, .reason = "drain"};
  EXPECT_EQ(round_trip(s), s);
  EXPECT_EQ(round_trip(BatchMessage{}), BatchMessage{});
}

TEST(Messages, TruncatedAndTrailingPayloadsAreRejected) {
  const auto p = payload_of(sample_batch());
  for (size_t cut = 0; cut < p.size(); cut += 3) {
    auto m = decode_payload<BatchMessage>(std::span<const uint8_t>(p.data(), cut));
    EXPECT_TRUE(std::holds_alternative<std::string>(m)) << "cut at " << cut;
  }
  auto longer = p;
  longer.push_back(0);
  auto m = decode_payload<BatchMessage>(longer);
  ASSERT_TRUE(std::holds_alternative<std::string>(m));
  EXPECT_NE(std::get<std::string>(m).find("trailing"), std::string::npos);
}

TEST(Messages, HugeLengthsAreRejectedBeforeAllocating) {
  // The first vector (rids) starts after seq, step_id and mode: 8 + 8 + 4 bytes.
  auto p = payload_of(sample_batch());
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(p.data() + 20, &huge, sizeof huge);
  auto m = decode_payload<BatchMessage>(p);
  ASSERT_TRUE(std::holds_alternative<std::string>(m));
  EXPECT_NE(std::get<std::string>(m).find("exceeds"), std::string::npos) << std::get<std::string>(m);
}

TEST(Messages, RandomCorruptionNeverCrashes) {
  std::mt19937 rng(3);
  const auto p = payload_of(sample_batch());
  int rejected = 0;
  for (int i = 0; i < 5000; ++i) {
    auto q = p;
    for (int k = 0; k < 4; ++k) q[rng() % q.size()] = static_cast<uint8_t>(rng());
    auto m = decode_payload<BatchMessage>(q);
    rejected += std::holds_alternative<std::string>(m);
  }
  EXPECT_GT(rejected, 0);
}

TEST(Messages, CountsAreCheckedAgainstTheElementSize) {
  // A result whose logprobs count claims as many 20-byte structs as there are bytes left: refused
  // at the count, before gigabytes of 56-byte structs are allocated.
  BatchResult r;
  r.rids = {1};
  r.next_tokens = {5};
  auto p = payload_of(r);
  // seq, step_id (16 bytes); rids count at 16, one id; next_tokens count at 32, one id; logprobs count at 44.
  const uint64_t claim = p.size() - 52;  // as many as there are bytes left: passes the byte check
  std::memcpy(p.data() + 44, &claim, sizeof claim);
  auto m = decode_payload<BatchResult>(p);
  ASSERT_TRUE(std::holds_alternative<std::string>(m));
  EXPECT_NE(std::get<std::string>(m).find("20-byte elements exceeds"), std::string::npos) << std::get<std::string>(m);
  // An int32 vector counted in elements, not bytes: 1/4 of the bytes left is too many already.
  auto q = payload_of(r);
  const uint64_t ints = q.size() - 40;
  std::memcpy(q.data() + 32, &ints, sizeof ints);
  auto n = decode_payload<BatchResult>(q);
  ASSERT_TRUE(std::holds_alternative<std::string>(n));
  EXPECT_NE(std::get<std::string>(n).find("4-byte elements exceeds"), std::string::npos) << std::get<std::string>(n);
  // Honest results with logprobs still round-trip.
  r.logprobs = {{-0.5f, {1, 2}, {-0.5f, -1.5f}}};
  auto ok = decode_payload<BatchResult>(payload_of(r));
  ASSERT_TRUE(std::holds_alternative<BatchResult>(ok));
  EXPECT_EQ(std::get<BatchResult>(ok).logprobs, r.logprobs);
}
