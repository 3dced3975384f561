#pragma once
// Framing of cross-process messages: [magic u32][version u16][kind u16][length u32][payload],
// little endian. The decoder checks every field against the bytes it was given and a cap
// before it allocates anything; a bad frame is reported, never a crash.
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace aerie::transport {

constexpr uint32_t kFrameMagic = 0x45495241;  // "AREI" read as little-endian bytes "ARIE"
constexpr uint16_t kFrameVersion = 2;  // 2: BatchMessage::future_slots
constexpr size_t kFrameHeaderBytes = 12;
constexpr uint32_t kDefaultMaxPayloadBytes = 64u << 20;

struct Frame {
  uint16_t kind = 0;
  std::vector<uint8_t> payload;
};

enum class FrameError { kTruncated, kBadMagic, kBadVersion, kTooLarge, kLengthMismatch, kUnknownKind };
const char* frame_error_name(FrameError e);

struct FrameDecodeError {
  FrameError error;
  std::string detail;
};

std::vector<uint8_t> encode_frame(uint16_t kind, std::span<const uint8_t> payload);

// Decodes exactly one frame occupying all of `bytes`. `known_kinds` lists the kinds this
// receiver understands (empty: any).
std::variant<Frame, FrameDecodeError> decode_frame(std::span<const uint8_t> bytes,
                                                   std::span<const uint16_t> known_kinds = {},
                                                   uint32_t max_payload_bytes = kDefaultMaxPayloadBytes);

}  // namespace aerie::transport
