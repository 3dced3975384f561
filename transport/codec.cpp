#include "transport/codec.hpp"

namespace aerie::transport {

const std::vector<uint16_t>& known_message_kinds() {
  static const std::vector<uint16_t> kinds = {static_cast<uint16_t>(MessageKind::kBatch), static_cast<uint16_t>(MessageKind::kBatchResult),
                                              static_cast<uint16_t>(MessageKind::kShutdown), static_cast<uint16_t>(MessageKind::kHeartbeat)};
  return kinds;
}

}  // namespace aerie::transport
