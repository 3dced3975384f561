#include "transport/frame.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::transport {

namespace {

void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint64_t get_le(std::span<const uint8_t> in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | in[at + static_cast<size_t>(i)];
  return v;
}

}  // namespace

const char* frame_error_name(FrameError e) {
  switch (e) {
    case FrameError::kTruncated: return "truncated";
    case FrameError::kBadMagic: return "bad_magic";
    case FrameError::kBadVersion: return "bad_version";
    case FrameError::kTooLarge: return "too_large";
    case FrameError::kLengthMismatch: return "length_mismatch";
    case FrameError::kUnknownKind: return "unknown_kind";
  }
  return "unknown";
}

std::vector<uint8_t> encode_frame(uint16_t kind, std::span<const uint8_t> payload) {
  AERIE_CHECK(payload.size() <= UINT32_MAX, "frame payload of " << payload.size() << " bytes exceeds the format");
  std::vector<uint8_t> out;
  out.reserve(kFrameHeaderBytes + payload.size());
  put_le(out, kFrameMagic, 4);
  put_le(out, kFrameVersion, 2);
  put_le(out, kind, 2);
  put_le(out, payload.size(), 4);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::variant<Frame, FrameDecodeError> decode_frame(std::span<const uint8_t> bytes, std::span<const uint16_t> known_kinds,
                                                   uint32_t max_payload_bytes) {
  if (bytes.size() < kFrameHeaderBytes)
    return FrameDecodeError{FrameError::kTruncated, std::to_string(bytes.size()) + " bytes, header needs 12"};
  if (get_le(bytes, 0, 4) != kFrameMagic) return FrameDecodeError{FrameError::kBadMagic, "not an Aerie frame"};
  const auto version = static_cast<uint16_t>(get_le(bytes, 4, 2));
  if (version != kFrameVersion)
    return FrameDecodeError{FrameError::kBadVersion, "version " + std::to_string(version) + ", expected " +
                                                         std::to_string(kFrameVersion)};
  const auto kind = static_cast<uint16_t>(get_le(bytes, 6, 2));
  const auto length = static_cast<uint32_t>(get_le(bytes, 8, 4));
  if (length > max_payload_bytes)
    return FrameDecodeError{FrameError::kTooLarge, "payload of " + std::to_string(length) + " bytes exceeds the cap of " +
                                                       std::to_string(max_payload_bytes)};
  if (bytes.size() - kFrameHeaderBytes != length)
    return FrameDecodeError{FrameError::kLengthMismatch, "header says " + std::to_string(length) + " payload bytes, frame has " +
                                                             std::to_string(bytes.size() - kFrameHeaderBytes)};
  if (!known_kinds.empty() && std::find(known_kinds.begin(), known_kinds.end(), kind) == known_kinds.end())
    return FrameDecodeError{FrameError::kUnknownKind, "kind " + std::to_string(kind)};
  Frame f;
  f.kind = kind;
  f.payload.assign(bytes.begin() + kFrameHeaderBytes, bytes.end());
  return f;
}

}  // namespace aerie::transport
