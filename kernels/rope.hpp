#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// Rotary embedding, Hugging Face rotate-half convention, in place on q and k:
///   angle_i = position * inv_freq[i],  x[i] <- x[i] cos - x[i+d/2] sin,
///   x[i+d/2] <- x[i+d/2] cos + x[i] sin   for i < d/2 (d = head_dim).
/// cos and sin are scaled by attention_scaling (1 for default, linear and llama3 rope).
struct RopeParams {
  TensorView q;          // [tokens, q_heads, head_dim] in/out
  TensorView k;          // [tokens, kv_heads, head_dim] in/out
  TensorView positions;  // [tokens] i32
  TensorView inv_freq;   // [head_dim / 2] f32
  float attention_scaling = 1.0f;
  void validate() const;
};
Status rope(const RopeParams& p, const Stream& stream);

}  // namespace aerie::kernels
