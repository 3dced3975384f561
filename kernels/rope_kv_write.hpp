#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// RoPE fused with the KV-cache write, straight from the merged q/k/v projection:
/// q_out[t] = rope(q part of qkv[t]); k_cache[slots[t]] = rope(k part); v_cache[slots[t]] =
/// v part. Same rotation as kernels/rope.hpp. A slot outside the cache is an error (CPU)
/// or skipped (CUDA, which cannot report from inside a graph).
struct RopeKvWriteParams {
  TensorView qkv;        // [tokens, (q_heads + 2 * kv_heads) * head_dim]
  TensorView positions;  // [tokens] i32
  TensorView inv_freq;   // [head_dim / 2] f32
  TensorView slots;      // [tokens] i32 (out_cache_loc)
  TensorView q_out;      // [tokens, q_heads, head_dim]
  TensorView k_cache;    // [num_slots, kv_heads, head_dim]
  TensorView v_cache;    // [num_slots, kv_heads, head_dim]
  float attention_scaling = 1.0f;
  void validate() const;
};
Status rope_kv_write(const RopeKvWriteParams& p, const Stream& stream);

}  // namespace aerie::kernels
