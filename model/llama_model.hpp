#pragma once
// LlamaModel: the Llama-family forward (embedding, decoder layers with GQA attention over
// the paged KV cache, SiLU MLP, final norm, LM head) on one device, through kernels/ ops.
#include <filesystem>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "model/config.hpp"
#include "model/forward_batch.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_weights.hpp"
#include "model/rope_frequencies.hpp"

namespace aerie::model {

class LlamaModel {
 public:
  // act_dtype: the dtype of activations (f32 on CPU; bf16 or f16 on CUDA).
  LlamaModel(LlamaConfig config, LlamaWeights weights, Stream stream, DType act_dtype);

  const LlamaConfig& config() const { return config_; }
  const Stream& stream() const { return stream_; }
  DType act_dtype() const { return act_dtype_; }

  // Runs the batch, writing the new tokens' K/V into `kv`. Returns the logits of
  // batch.logit_rows: [rows, vocab] f32 on the model's device.
  Buffer forward(const ForwardBatch& batch, KvCache& kv);

 private:
  Buffer upload(const std::vector<int32_t>& v) const;
  LlamaConfig config_;
  LlamaWeights weights_;
  Stream stream_;
  DType act_dtype_;
  Buffer inv_freq_;
  float attention_scaling_ = 1.0f;
};

}  // namespace aerie::model
