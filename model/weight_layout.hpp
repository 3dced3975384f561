#pragma once
// How checkpoint tensors become Aerie's weight layouts, shared by the Llama model and the
// EAGLE draft heads: dtype conversion into device buffers, q/k rows reordered so rotary
// pairs are adjacent, gate/up rows interleaved, and seeded random buffers for dummy weights.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/buffer.hpp"
#include "model/config.hpp"
#include "model/safetensors.hpp"

namespace aerie::model {

// Copies host tensors, converted to `dtype`, into consecutive rows of one new buffer.
Buffer concat_rows(const std::vector<TensorView>& parts, Device device, DType dtype);
Buffer copy_of(const TensorView& t, Device device, DType dtype);
// The rows of a q or k projection reordered so that each head's rotation pairs are
// adjacent (rope_kv_write.hpp). Returns a view of `storage`.
TensorView pair_adjacent_rows(const TensorView& t, int64_t head_dim, std::vector<unsigned char>& storage);
// Rows of a and b alternating: the merged gate/up projection (kernels/silu_mul.hpp).
Buffer interleave_rows(const TensorView& a, const TensorView& b, Device device, DType dtype);
// Throws naming the file and tensor unless it is F32, BF16 or F16.
void check_float_tensor(const CheckpointReader& ckpt, const std::string& name, const TensorView& t);
// Reads a checkpoint tensor by name, checked against the expected shape.
using TensorGetter = std::function<TensorView(const std::string& name, std::initializer_list<int64_t> shape)>;
// The attention and MLP projections of one decoder layer (Hugging Face names under
// `prefix`: self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj)
// in Aerie's layouts: q/k/v merged with rotation pairs adjacent, gate/up interleaved.
// in_width: what q/k/v read (the hidden size, or 2x for an EAGLE3 midlayer).
struct LayerProjections {
  Buffer qkv, o_proj, post_norm, gate_up, down;
};
LayerProjections load_layer_projections(const TensorGetter& get, const std::string& prefix, const LlamaConfig& layer, int64_t in_width,
                                        Device device, DType dtype);
// N(0, std) (or `constant` when std is 0) drawn by Philox on the buffer's device.
Buffer random_buffer(uint64_t seed, std::vector<int64_t> shape, float std, Device device, DType dtype, float constant = 0.0f);

}  // namespace aerie::model
