#include <gtest/gtest.h>

#include <random>

#include "transport/frame.hpp"

using namespace aerie::transport;

namespace {
FrameError error_of(const std::vector<uint8_t>& bytes, std::vector<uint16_t> kinds = {}, uint32_t cap = kDefaultMaxPayloadBytes) {
  auto r = decode_frame(bytes, kinds, cap);
  EXPECT_TRUE(std::holds_alternative<FrameDecodeError>(r));
  return std::holds_alternative<FrameDecodeError>(r) ? std::get<FrameDecodeError>(r).error : FrameError::kTruncated;
}
}  // namespace

TEST(Frame, RoundTrips) {
  std::vector<uint8_t> payload = {1, 2, 3, 250};
  auto bytes = encode_frame(7, payload);
  ASSERT_EQ(bytes.size(), kFrameHeaderBytes + 4);
  auto r = decode_frame(bytes, std::vector<uint16_t>{7});
  ASSERT_TRUE(std::holds_alternative<Frame>(r));
  EXPECT_EQ(std::get<Frame>(r).kind, 7);
  EXPECT_EQ(std::get<Frame>(r).payload, payload);
  auto empty = decode_frame(encode_frame(1, {}));
  ASSERT_TRUE(std::holds_alternative<Frame>(empty));
}

TEST(Frame, RejectsMalformedFrames) {
  auto good = encode_frame(3, std::vector<uint8_t>(10, 9));
  EXPECT_EQ(error_of({}), FrameError::kTruncated);
  EXPECT_EQ(error_of(std::vector<uint8_t>(good.begin(), good.begin() + 11)), FrameError::kTruncated);
  auto bad_magic = good;
  bad_magic[0] ^= 0xff;
  EXPECT_EQ(error_of(bad_magic), FrameError::kBadMagic);
  auto bad_version = good;
  bad_version[4] = 9;
  EXPECT_EQ(error_of(bad_version), FrameError::kBadVersion);
  EXPECT_EQ(error_of(std::vector<uint8_t>(good.begin(), good.end() - 1)), FrameError::kLengthMismatch);
  auto longer = good;
  longer.push_back(0);
  EXPECT_EQ(error_of(longer), FrameError::kLengthMismatch);
  auto huge = good;
  huge[8] = huge[9] = huge[10] = huge[11] = 0xff;  // claims 4 GiB: rejected before any allocation
  EXPECT_EQ(error_of(huge), FrameError::kTooLarge);
  EXPECT_EQ(error_of(good, {1, 2}), FrameError::kUnknownKind);
  EXPECT_EQ(error_of(good, {}, 5), FrameError::kTooLarge);
}

TEST(Frame, RandomBytesNeverCrashTheDecoder) {
  std::mt19937 rng(1);
  auto good = encode_frame(2, std::vector<uint8_t>(32, 1));
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> b = good;
    b.resize(rng() % 60);
    for (int k = 0; k < 3; ++k)
      if (!b.empty()) b[rng() % b.size()] = static_cast<uint8_t>(rng());
    auto r = decode_frame(b);
    if (std::holds_alternative<Frame>(r)) {
      EXPECT_EQ(std::get<Frame>(r).payload.size() + kFrameHeaderBytes, b.size());
    }
  }
}
