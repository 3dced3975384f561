#pragma once
// The weights of a Llama-family model, on one device, laid out for the forward:
// q/k/v merged into one projection and gate/up into another (one GEMM each; gate and up
// rows interleaved, see kernels/silu_mul.hpp). Under tensor parallelism, a rank's part
// (model/tp_shard.hpp): shapes below are then the shard's (heads, intermediate and vocab
// rows divided; o_bias and down_bias only on TP rank 0).
#include <filesystem>
#include <functional>
#include <vector>

#include "kernels/buffer.hpp"
#include "model/config.hpp"
#include "model/tp_shard.hpp"

namespace aerie::model {

struct LlamaLayerWeights {
  Buffer input_norm;     // [hidden]
  Buffer qkv;            // [q_size + 2 * kv_size, hidden]; q/k rotation pairs adjacent (rope_kv_write.hpp)
  Buffer qkv_bias;       // [q_size + 2 * kv_size], when attention_bias, same order
  Buffer o_proj;         // [hidden, q_size]
  Buffer o_bias;         // [hidden], when attention_bias
  Buffer post_norm;      // [hidden]
  Buffer gate_up;        // [2 * intermediate, hidden], rows gate_0, up_0, gate_1, up_1, ...
  Buffer gate_up_bias;   // [2 * intermediate], when mlp_bias, interleaved the same way
  Buffer down;           // [hidden, intermediate]
  Buffer down_bias;      // [hidden], when mlp_bias
};

struct LlamaWeights {
  Buffer embed;                          // [vocab (shard rows), hidden]
  std::vector<LlamaLayerWeights> layers;
  Buffer final_norm;                     // [hidden]
  Buffer lm_head;                        // [vocab, hidden]; empty when tied to embed
  const TensorView& lm_head_view() const { return lm_head.data() ? lm_head.view() : embed.view(); }
  int64_t total_bytes() const;  // what a forward reads (the LM head once even when tied)
};

// Called after each layer is in place: (layers done, layers in all), for a progress display.
using LoadProgress = std::function<void(int64_t done, int64_t total)>;

// Loads model.safetensors (or its shards) from dir, or a llama GGUF file when dir names one: the part `shard` holds, reading only
// its rows from the memory-mapped files. Weights are stored in `dtype` on `device`.
// Missing tensors, wrong shapes and unreadable dtypes throw naming file and tensor.
LlamaWeights load_llama_weights(const std::filesystem::path& dir, const LlamaConfig& config, Device device, DType dtype,
                                const LoadProgress& progress = {}, const TpShard& shard = {});

// Seeded random weights (normal with std init_std, transformers' 0.02 by default; norms
// 1), for --load-format dummy. The same seed gives the same weights on CPU and GPU, and
// the same model at every TP size (each tensor is drawn whole, then cut).
LlamaWeights random_llama_weights(const LlamaConfig& config, uint64_t seed, Device device, DType dtype, float init_std = 0.02f,
                                  const LoadProgress& progress = {}, const TpShard& shard = {});

}  // namespace aerie::model
