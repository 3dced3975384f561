#pragma once
// Future tokens (overlap scheduling, sglang's future map): the Scheduler plans batch N+1
// while batch N runs, so a decode in N+1 cannot name the token N samples for its request.
// It names a future slot instead: N's message lists, per sampled row, the slot where the
// worker keeps that row's token (BatchMessage::future_slots), and N+1 carries the input id
// future_token_ref(slot), a negative number no vocabulary id can be. The worker resolves
// such ids from its FutureTokenMap before it runs N+1; it runs batches in order, so N's
// tokens are there by then. Each rank of a TP group keeps its own map (every rank samples
// the same tokens).
#include <cstdint>
#include <span>
#include <vector>

namespace aerie::core {

// The input id that stands for the token kept in future slot `slot` (slot >= 0).
constexpr int32_t future_token_ref(int32_t slot) { return -slot - 1; }
// The slot an input id refers to, or -1 when it is a plain token id.
constexpr int32_t future_slot_of(int32_t input_id) { return input_id < 0 ? -input_id - 1 : -1; }

class FutureTokenMap {
 public:
  // Slots above this are refused (a hostile or corrupted message must not grow the map without bound).
  static constexpr int32_t kMaxSlots = 1 << 20;

  // True when any id is a future reference.
  static bool references(std::span<const int32_t> input_ids);
  // Replaces every future reference by its token. Throws aerie::Error for a slot that holds
  // no token (never filled, or its batch failed): running on would feed a wrong token.
  void resolve(std::vector<int32_t>& input_ids) const;
  // Keeps tokens[i] in slots[i] (a slot of -1 keeps nothing). Throws on a length mismatch
  // or a slot out of range before changing anything.
  void record(std::span<const int32_t> slots, std::span<const int32_t> tokens);
  // Empties the slots (their batch failed): a later batch that names them fails too.
  void forget(std::span<const int32_t> slots);

 private:
  std::vector<int32_t> tokens_;  // -1: empty
};

}  // namespace aerie::core
