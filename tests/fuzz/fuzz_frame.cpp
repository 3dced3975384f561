// Frames from the wire: the header checks, then every message kind's checked payload decode.
#include <cstdint>
#include <span>

#include "transport/codec.hpp"

using namespace aerie::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto frame = decode_frame(bytes, known_message_kinds(), 1 << 20);
  if (std::holds_alternative<Frame>(frame)) (void)decode_payload<BatchMessage>(std::get<Frame>(frame).payload);
  // Payload decoders on the raw bytes too: each message type from the same input.
  (void)decode_payload<BatchMessage>(bytes);
  (void)decode_payload<BatchResult>(bytes);
  (void)decode_payload<Shutdown>(bytes);
  (void)decode_payload<Heartbeat>(bytes);
  return 0;
}
