#pragma once
// LlamaModel: the Llama-family forward (embedding, decoder layers with GQA attention over
// the paged KV cache, SiLU MLP, final norm, LM head) on one device, through kernels/ ops.
//
// Two levels: forward() runs one batch eagerly (it stages inputs in a workspace it keeps
// and grows); run() only enqueues kernels over a workspace whose inputs are uploaded
// already, so it can be captured in a CUDA graph (spec/decode_graph_runner.hpp).
#include <memory>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "model/config.hpp"
#include "model/forward_batch.hpp"
#include "model/forward_workspace.hpp"
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
  int64_t weight_bytes() const { return weight_bytes_; }
  // Weight bytes one decode step must read: everything but the embedding table, of which
  // only `tokens` rows are read (unless it is tied to the LM head).
  int64_t weight_bytes_per_step(int64_t tokens) const;

  // Runs the batch eagerly, writing the new tokens' K/V into `kv`. Returns the logits of
  // batch.logit_rows, [rows, vocab] f32 on the model's device, valid until the next call.
  TensorView forward(const ForwardBatch& batch, KvCache& kv);

  // Enqueues the forward over inputs already uploaded to `ws`; no allocation, no host
  // synchronisation. Returns the logits view [dims.logit_rows, vocab].
  TensorView run(ForwardWorkspace& ws, KvCache& kv, const ForwardDims& dims);

  // The attention split count for a batch whose longest context is max_kv_len.
  int attention_splits(int64_t tokens, int64_t max_kv_len) const;

 private:
  LlamaConfig config_;
  LlamaWeights weights_;
  Stream stream_;
  DType act_dtype_;
  Buffer inv_freq_;
  float attention_scaling_ = 1.0f;
  int64_t weight_bytes_ = 0;
  int num_sms_ = 0;
  std::unique_ptr<ForwardWorkspace> eager_ws_;
};

}  // namespace aerie::model
