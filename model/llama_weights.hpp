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
#include "kernels/weight_blocks.hpp"
#include "model/config.hpp"
#include "model/tp_shard.hpp"

namespace aerie::model {

// A weight's GGUF blocks kept beside its f32 copy, for the CPU's small-batch products
// (kernels/weight_blocks.hpp); empty for weights without them.
struct BlockBuffer {
  Buffer bytes;  // u8 [rows, row bytes]
  kernels::BlockFormat format = kernels::BlockFormat::kQ8_0;
  kernels::BlockLayout layout = kernels::BlockLayout::kRows;
  kernels::WeightBlocks view() const { return bytes.data() ? kernels::WeightBlocks{bytes.view(), format, layout} : kernels::WeightBlocks{}; }
  int64_t nbytes() const { return bytes.data() ? bytes.nbytes() : 0; }
};

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
  // The projections' GGUF blocks (a GGUF model of Q4_0/Q4_1/Q8_0 projections, whole, on the CPU;
  // load_llama_weights): what decode and verify products read there.
  BlockBuffer qkv_blocks, o_proj_blocks, gate_up_blocks, down_blocks;
};

struct LlamaWeights {
  Buffer embed;                          // [vocab (shard rows), hidden]
  std::vector<LlamaLayerWeights> layers;
  Buffer final_norm;                     // [hidden]
  Buffer lm_head;                        // [vocab, hidden]; empty when tied to embed
  BlockBuffer lm_head_blocks;            // the LM head's (or tied embedding's) GGUF blocks, as the layers'
  const TensorView& lm_head_view() const { return lm_head.data() ? lm_head.view() : embed.view(); }
  int64_t total_bytes() const;  // what a forward reads (the LM head once even when tied)
  // total_bytes() with the blocks counted where a weight has them (what a product of up to
  // kernels::kBlocksMaxRows rows reads).
  int64_t decode_bytes() const;
};

// Called after each layer is in place: (layers done, layers in all), for a progress display.
using LoadProgress = std::function<void(int64_t done, int64_t total)>;

// Loads model.safetensors (or its shards) from dir, or a llama GGUF file when dir names one: the part `shard` holds, reading only
// its rows from the memory-mapped files. Weights are stored in `dtype` on `device`. A GGUF file's
// Q4_0/Q4_1/Q8_0 projections and LM head also keep their blocks (BlockBuffer) when the model is
// whole, on the CPU, in f32 (gguf_blocks_kept; AERIE_CPU_GGUF_BLOCKS=0 drops them).
// Missing tensors, wrong shapes and unreadable dtypes throw naming file and tensor.
LlamaWeights load_llama_weights(const std::filesystem::path& dir, const LlamaConfig& config, Device device, DType dtype,
                                const LoadProgress& progress = {}, const TpShard& shard = {});

// n rows of k weights' blocks in row order (kernels/weight_blocks.hpp), copied into tile order
// (n a multiple of 16) for the products over int8 activations.
BlockBuffer tile_order_blocks(kernels::BlockFormat f, const unsigned char* rows, int64_t n, int64_t k);

// Whether the kept blocks go into tile order for the products over int8 activations
// (kernels/cpu/int8_block_gemm.hpp; AERIE_CPU_INT8_ACTIVATIONS=1): llama.cpp's numbers, not the
// f32 model's.
bool int8_activations_asked();

// Whether load_llama_weights keeps a GGUF file's blocks for these settings.
bool gguf_blocks_kept(Device device, DType dtype, const TpShard& shard);

// Seeded random weights (normal with std init_std, transformers' 0.02 by default; norms
// 1), for --load-format dummy. The same seed gives the same weights on CPU and GPU, and
// the same model at every TP size (each tensor is drawn whole, then cut).
LlamaWeights random_llama_weights(const LlamaConfig& config, uint64_t seed, Device device, DType dtype, float init_std = 0.02f,
                                  const LoadProgress& progress = {}, const TpShard& shard = {});

}  // namespace aerie::model
