#pragma once
// The device side of the future map (overlap scheduling, sglang's FutureMap): a plain batch's
// sampled tokens are recorded into a device table at the slots its message names, in stream
// order, and the next batch's input ids that name those slots are resolved from the table on
// the device (kernels/future_tokens.hpp, done by the forward's upload). So the worker enqueues
// batch N + 1 while N still runs, without waiting for N's tokens on the host; the host learns
// them later, only to report them.
//
// The host keeps which slots hold a token: a batch naming a slot no batch recorded (never
// filled, or its batch failed) is refused before it runs, as the host-side FutureTokenMap
// refuses it for speculative batches.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "kernels/stream.hpp"

namespace aerie::core {

class DeviceFutureTokens {
 public:
  // `slots`: the table's size (the Scheduler's ring of future slots must fit).
  DeviceFutureTokens(Device device, int32_t slots);
  TensorView table() const { return table_.view(); }
  // Throws aerie::Error when an id names a slot outside the table or one that holds no token.
  void check(std::span<const int32_t> input_ids) const;
  // table[slots[i]] = tokens[i] (device, [rows] i32) in stream order; slots of -1 keep nothing.
  // Throws, before enqueuing anything, on a length mismatch or a slot outside the table.
  void record(const TensorView& tokens, std::span<const int32_t> slots, const Stream& stream);
  // The slots hold no token any more (their batch failed): a batch naming them is refused.
  void forget(std::span<const int32_t> slots);

 private:
  Buffer table_;
  Buffer slots_device_;
  StagingRing slots_host_;
  std::vector<bool> filled_;
};

}  // namespace aerie::core
