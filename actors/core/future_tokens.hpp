#pragma once
// Future tokens (overlap scheduling, sglang's future map): the Scheduler plans batch N+1
// while batch N runs, so a decode in N+1 cannot name the token N samples for its request.
// It names a future slot instead: N's message lists, per sampled row, the slot where the
// worker keeps that row's token (BatchMessage::future_slots), and N+1 carries the input id
// future_token_ref(slot), a negative number no vocabulary id can be. The worker resolves
// such ids from its FutureTokenMap before it runs N+1; it runs batches in order, so N's
// tokens are there by then. Each rank of a TP group keeps its own map (every rank samples
// the same tokens).
//
// A speculative Scheduler plans verify N+1 the same way while verify N runs: N keeps, per
// request, the last token it committed and how many it committed; N+1 names that token as
// its sequence's first input and is laid out as if N committed one token, with context slots
// for the most N may commit. The worker shifts the sequence by the count - 1 extra tokens
// (positions, its KV slots, its context, its sampling step) before it runs it.
#include <cstdint>
#include <span>
#include <vector>

#include "transport/messages.hpp"

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
  // The same for a whole batch; a VERIFY sequence whose first input is a future reference is
  // also shifted by the extra tokens that slot's verify committed. Throws on a reference
  // anywhere else in a verify sequence, a shift its context slots cannot hold, or a plain
  // reference to a multi-token result.
  void resolve(transport::BatchMessage& batch) const;
  // Keeps tokens[i] in slots[i] (a slot of -1 keeps nothing), each one committed token.
  // Throws on a length mismatch or a slot out of range before changing anything.
  void record(std::span<const int32_t> slots, std::span<const int32_t> tokens);
  // A VERIFY result: request i committed counts[i] tokens (tokens: all of them, in order);
  // slots[i] keeps its last token and the count.
  void record_verify(std::span<const int32_t> slots, std::span<const int32_t> counts, std::span<const int32_t> tokens);
  // Empties the slots (their batch failed): a later batch that names them fails too.
  void forget(std::span<const int32_t> slots);

 private:
  // The slot's token and count; throws when it holds none.
  std::pair<int32_t, int32_t> lookup(int32_t slot) const;
  void check_slots(std::span<const int32_t> slots, size_t values);
  std::vector<int32_t> tokens_;  // -1: empty
  std::vector<int32_t> counts_;  // tokens the slot's request committed (1 unless a verify)
};

}  // namespace aerie::core
