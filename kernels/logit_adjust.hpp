#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// Per-request changes to logits before sampling: sglang's / OpenAI's penalties, logit_bias
/// and min_new_tokens, computed by the Scheduler as one entry per (row, token). Entry e:
///   x = logits[rows[e], ids[e]] + bias[e]                   (logit_bias)
///   if rep[e] != 1: x = x > 0 ? x / rep[e] : x * rep[e]   (repetition penalty, transformers' rule)
///   x += add[e]                                          (-frequency * count - presence + bias; -inf bans)
/// The entries of one row name distinct ids. The order is transformers' and vLLM's: the bias
/// first, then the repetition penalty, then OpenAI's frequency / presence penalties.
struct LogitAdjustParams {
  TensorView logits;  // [rows, vocab] f32, in/out
  TensorView rows;    // [entries] i32
  TensorView ids;     // [entries] i32
  TensorView bias;    // [entries] f32, added first
  TensorView rep;     // [entries] f32
  TensorView add;     // [entries] f32, added last
  void validate() const;
};
Status logit_adjust(const LogitAdjustParams& p, const Stream& stream);

}  // namespace aerie::kernels
