#pragma once
#include <cstdint>

#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// Logits processing and sampling, one row per request:
///  - temperature == 0: greedy (argmax; ties go to the lowest id, as torch.argmax).
///  - otherwise probs = softmax(logits / temperature); the kept tokens are those with
///    p >= tau, tau the largest of the top_k-th probability (top_k <= 0: none), the top-p
///    set's smallest probability (the smallest most-likely-first prefix whose mass reaches
///    top_p) and min_p * p_max; one token is drawn from them, renormalised, walking them in
///    id order with u = philox_uniform(seed, step): the same (seed, step) gives the same
///    token. CPU and CUDA filter and draw by this rule, and so does speculative acceptance.
struct SampleParams {
  TensorView logits;       // [batch, vocab] f32 (not modified)
  TensorView temperature;  // [batch] f32
  TensorView top_p;        // [batch] f32 in (0, 1]
  TensorView top_k;        // [batch] i32 (<= 0 means no limit)
  TensorView min_p;        // [batch] f32 in [0, 1]
  TensorView seed;         // [batch] i64
  TensorView step;         // [batch] i64: how many tokens the request has sampled so far
  TensorView out;          // [batch] i32
  // Optional: the chosen token's id read through this map (out[b] = id_map[token]), e.g. an
  // EAGLE-3 head's reduced draft vocabulary to the target's ids; [vocab] or [vocab, 1] i32.
  TensorView id_map = {};
  // Optional: a second [batch] i32 output written with the same ids (a draft step's token is
  // both its proposal and the next forward's input: one launch instead of a copy).
  TensorView out_copy = {};
  // Optional scratch (CUDA): with it, the maximum of a row over kSampleOneBlockArgmaxVocab
  // logits is found by many blocks at once (a stage before the sampling kernel), which is what
  // a greedy row costs; a shorter row's one block reads it in a few memory round trips, so it
  // takes one launch. [>= sample_workspace_floats(batch)] f32.
  TensorView workspace = {};
  void validate() const;
};
constexpr int64_t kSampleOneBlockArgmaxVocab = 65536;
int64_t sample_workspace_floats(int64_t batch);
Status sample(const SampleParams& p, const Stream& stream);

/// Counter-based uniform number in [0, 1) from (seed, step): stateless, so CPU and GPU
/// draw the same number for a request at a step.
float philox_uniform(uint64_t seed, uint64_t step);

/// log-softmax of each row (for logprobs): out[b, v] = logits[b, v] - logsumexp(logits[b]).
struct LogSoftmaxParams {
  TensorView logits;  // [batch, vocab] f32
  TensorView out;     // [batch, vocab] f32
  void validate() const;
};
Status log_softmax(const LogSoftmaxParams& p, const Stream& stream);

}  // namespace aerie::kernels
