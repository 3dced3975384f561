#pragma once
// LogprobReader: the log-probabilities a batch's rows asked for (SamplingRowMsg::logprobs),
// read after sampling. It runs log-softmax over the logits on the model's device, copies
// back only the rows that asked, and picks the sampled token's value and the top k on the
// host (ties: lower id first, as kernels::topk). Costs nothing for batches that ask none.
#include <span>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

class LogprobReader {
 public:
  // logits: [rows, vocab] f32 on the device; tokens: the ids sampled from them.
  // Returns one entry per row when any row asked, else an empty vector.
  std::vector<transport::TokenLogprobs> read(const TensorView& logits, std::span<const transport::SamplingRowMsg> rows,
                                             std::span<const int32_t> tokens, const Stream& stream);

 private:
  Buffer scratch_;  // [rows, vocab] f32, grown on demand
};

}  // namespace aerie::core
