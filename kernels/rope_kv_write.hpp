#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// RoPE fused with the KV-cache write, straight from the merged q/k/v projection:
/// q_out[t] = rope(q part of qkv[t]); k_cache[slots[t]] = rope(k part); v_cache[slots[t]] =
/// v part. Same rotation as kernels/rope.hpp. A slot outside the cache is an error (CPU)
/// or skipped (CUDA, which cannot report from inside a graph).
///
/// In qkv, each q and k head keeps its rotation pairs adjacent: element 2i holds dim i and
/// element 2i + 1 holds dim i + head_dim/2 (LlamaWeights permutes the q/k rows so), which
/// lets one GEMM block own a whole pair (QkvRopeParams). V heads and the outputs use the
/// natural order.
struct RopeKvWriteParams {
  TensorView qkv;        // [tokens, (q_heads + 2 * kv_heads) * head_dim], q/k pairs adjacent
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

/// The attention block's input projection: qkv = x w^T (+ bias), then rope_kv_write. The
/// CUDA backend fuses both into the small-batch GEMV (a block owns one rotation pair);
/// otherwise the projection goes through `qkv` (scratch).
struct QkvRopeParams {
  TensorView x;          // [tokens, hidden]
  TensorView w;          // [(q_heads + 2 * kv_heads) * head_dim, hidden], q/k rows pair-adjacent
  TensorView bias = {};  // [(q_heads + 2 * kv_heads) * head_dim], optional, same order
  TensorView w_fp8 = {}, w_scale = {};  // optional fp8 copy of w with row scales (kernels/matmul.hpp)
  WeightBlocks w_blocks = {};           // optional GGUF blocks of w (kernels/matmul.hpp)
  TensorView qkv;        // [tokens, (q_heads + 2 * kv_heads) * head_dim] scratch
  TensorView positions;  // [tokens] i32
  TensorView inv_freq;   // [head_dim / 2] f32
  TensorView slots;      // [tokens] i32
  TensorView q_out;      // [tokens, q_heads, head_dim]
  TensorView k_cache;    // [num_slots, kv_heads, head_dim]
  TensorView v_cache;    // [num_slots, kv_heads, head_dim]
  float attention_scaling = 1.0f;
  void validate() const;
};
Status qkv_rope(const QkvRopeParams& p, const Stream& stream);

}  // namespace aerie::kernels
