#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// out[t] = table[ids[t]]. An id outside [0, vocab) is an error (CPU) and is never read.
struct EmbeddingParams {
  TensorView ids;    // [tokens] i32
  TensorView table;  // [vocab, hidden] f32|bf16|f16
  TensorView out;    // [tokens, hidden] f32|bf16|f16
  void validate() const;
};
Status embedding(const EmbeddingParams& p, const Stream& stream);

}  // namespace aerie::kernels
