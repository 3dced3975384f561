#pragma once
// Messages <-> frames: cereal payloads (checked archives) inside the frame format of
// transport/frame.hpp. Decoding never throws and never allocates beyond the frame.
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "transport/checked_archive.hpp"
#include "transport/frame.hpp"
#include "transport/messages.hpp"

namespace aerie::transport {
// The fixed fields of the message structs that travel in vectors (checked_archive.hpp).
template <>
inline constexpr size_t kMinWireBytes<SamplingRowMsg> = 4 + 4 + 4 + 4 + 8 + 8 + 4;
template <>
inline constexpr size_t kMinWireBytes<TokenLogprobs> = 4 + 8 + 8;  // logprob and two counts
}  // namespace aerie::transport

namespace aerie::transport {

template <class T>
std::vector<uint8_t> encode_message(const T& msg) {
  std::vector<uint8_t> payload;
  payload.reserve(64);  // (also keeps GCC 12 from a false -Wstringop-overflow on small messages)
  {
    CheckedOutputArchive ar(payload);
    ar(msg);
  }
  return encode_frame(static_cast<uint16_t>(kind_of<T>()), payload);
}

// The payload of a frame of kind_of<T>() as a T; trailing bytes are an error too.
template <class T>
std::variant<T, std::string> decode_payload(std::span<const uint8_t> payload) {
  T msg;
  try {
    CheckedInputArchive ar(payload);
    ar(msg);
    if (ar.remaining() != 0) return std::string(std::to_string(ar.remaining()) + " trailing bytes after the message");
  } catch (const std::exception& e) {  // PayloadError, or cereal's own (e.g. an invalid enum)
    return std::string(e.what());
  }
  return msg;
}

const std::vector<uint16_t>& known_message_kinds();

}  // namespace aerie::transport
