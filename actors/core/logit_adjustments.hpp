#pragma once
// The logit adjustments of one sampled row (kernels/logit_adjust.hpp), from a request's
// sampling options and its tokens so far: sglang's and OpenAI's penalties, logit_bias and
// min_new_tokens. The Scheduler appends them to the batch message; the worker applies them
// to the logits before sampling (on every rank alike, so TP and DP-attention ranks agree).
//  - logit_bias: x += bias, first (as transformers' and vLLM's processors run);
//  - repetition_penalty r (transformers' RepetitionPenaltyLogitsProcessor): every token of the
//    prompt and the output: x > 0 ? x / r : x * r;
//  - frequency_penalty f, presence_penalty p (OpenAI's): each output token seen c times:
//    x -= f * c + p;
//  - min_new_tokens m: while fewer than m tokens are out, the ids in `banned` (EOS and stop
//    ids) get -inf.
// One entry per token, in ascending id order.
#include <cstdint>
#include <span>

#include "actors/core/generation_request.hpp"
#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

void append_logit_adjustments(transport::BatchMessage& b, int32_t row, std::span<const int32_t> prompt, std::span<const int32_t> output,
                              const SamplingOptions& s, std::span<const int32_t> banned);

// The worker's side: the message's adjustments applied to a copy of the logits (the raw ones
// stay for log-probabilities, which are the model's own).
class LogitAdjuster {
 public:
  // logits [rows, vocab] f32 on the stream's device. Returns the adjusted copy (valid until
  // the next call). Throws aerie::Error when the entries do not fit the logits.
  TensorView apply(const TensorView& logits, const transport::BatchMessage& m, const Stream& stream);

 private:
  Buffer adjusted_, ints_, floats_;
};

}  // namespace aerie::core
