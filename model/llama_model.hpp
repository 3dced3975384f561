#pragma once
// LlamaModel: the Llama-family forward (embedding, decoder layers with GQA attention over
// the paged KV cache, SiLU MLP, final norm, LM head) on one device, through kernels/ ops.
//
// Two levels: forward() runs one batch eagerly (it stages inputs in a workspace it keeps
// and grows); run() only enqueues kernels over a workspace whose inputs are uploaded
// already, so it can be captured in a CUDA graph (spec/decode_graph_runner.hpp).
//
// Tensor parallelism: given a TP communicator of T ranks, the weights are this rank's
// shard (model/tp_shard.hpp, loaded with the matching TpShard) and the forward calls the
// collectives (model/decoder_layer.hpp, model/vocab_parallel.hpp); every rank of the group
// runs the same batches and ends with the same logits.
//
// DP attention (model/dp_attention.hpp): `tp` is then the attention-TP group (attention,
// embedding and LM head are split over it) and the MLP is split over every rank of the
// launch; each forward must first be given the step's padding plan (set_dp_plan), and a
// rank with nothing to run still calls forward_idle() so the MLP collectives meet.
#include <memory>
#include <optional>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "model/config.hpp"
#include "model/decoder_layer.hpp"
#include "model/dp_attention.hpp"
#include "model/forward_batch.hpp"
#include "model/forward_workspace.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_weights.hpp"
#include "model/rope_frequencies.hpp"
#include "model/tp_shard.hpp"
#include "parallel/communicator.hpp"

namespace aerie::model {

// Hidden states a speculative draft head reads, captured by forward(): the final normed
// hidden state (EAGLE-1/2) and/or the residual stream entering chosen layers (EAGLE-3),
// side by side per token: [tokens, (final + aux layers) * hidden].
struct HiddenCapture {
  bool final_normed = false;
  std::vector<int64_t> aux_layers;
  int64_t count() const { return (final_normed ? 1 : 0) + static_cast<int64_t>(aux_layers.size()); }
};

class LlamaModel {
 public:
  // act_dtype: the dtype of activations (f32 on CPU; bf16 or f16 on CUDA). tp: the TP
  // group (null: this process alone); `weights` must be its rank's shard.
  // dp: the groups of DP attention (null: none); the weights' MLP rows are then rank
  // dp->mlp->rank() of dp->mlp->size().
  LlamaModel(LlamaConfig config, LlamaWeights weights, Stream stream, DType act_dtype,
             std::shared_ptr<parallel::Communicator> tp = nullptr, std::shared_ptr<DpAttentionGroups> dp = nullptr);

  // The whole model's shape.
  const LlamaConfig& config() const { return config_; }
  // This rank's shape (its heads, KV heads and intermediate rows; the whole vocabulary): what
  // its KV cache and workspaces are sized by.
  const LlamaConfig& local_config() const { return local_; }
  const TpShard& shard() const { return shard_; }
  parallel::Communicator& tp() const { return *tp_; }
  const std::shared_ptr<parallel::Communicator>& tp_ptr() const { return tp_; }
  // A workspace for this model's forwards (run()).
  std::unique_ptr<ForwardWorkspace> make_workspace(const ForwardCapacity& capacity) const;
  const Stream& stream() const { return stream_; }
  DType act_dtype() const { return act_dtype_; }
  int64_t weight_bytes() const { return weight_bytes_; }
  // Weight bytes one decode step must read: everything but the embedding table, of which
  // only `tokens` rows are read (unless it is tied to the LM head); GGUF blocks instead of
  // f32 copies where the CPU keeps them (LlamaWeights::decode_bytes).
  int64_t weight_bytes_per_step(int64_t tokens) const;

  // Runs the batch eagerly, writing the new tokens' K/V into `kv`. Returns the logits of
  // batch.logit_rows, [rows, vocab] f32 on the model's device, valid until the next call.
  // Under DP attention the batch is first padded to the plan's bucket when it has one.
  TensorView forward(const ForwardBatch& batch, KvCache& kv);

  bool dp_attention() const { return dp_ != nullptr; }
  // DP attention: the plan of the next forward (or forward_idle), which uses it up.
  void set_dp_plan(parallel::DpPaddingPlan plan);
  // DP attention, a rank with no tokens this step: joins the MLP collectives of every layer
  // with zero rows of its own (or, when the plan has a bucket, runs that many padded
  // requests as a captured graph would).
  void forward_idle(KvCache& kv);

  // Enqueues the forward over inputs already uploaded to `ws`; no allocation, no host
  // synchronisation. Returns the logits view [dims.logit_rows, vocab].
  TensorView run(ForwardWorkspace& ws, KvCache& kv, const ForwardDims& dims);

  // Hidden states to capture from now on (nothing by default).
  void set_hidden_capture(HiddenCapture capture);
  // The captured hidden states of the last forward's tokens, [tokens, count * hidden] in the
  // activation dtype on the model's device; valid until the next forward.
  TensorView captured_hidden() const;
  // A replayed graph over `ws` ran the last forward, of `tokens` real tokens: the captured
  // hidden states are that workspace's (run() sets them itself).
  void captured_by_replay(const ForwardWorkspace& ws, int64_t tokens);
  // Weights a draft head shares with its target (EAGLE reads the embedding and LM head).
  const LlamaWeights& weights() const { return weights_; }
  const Buffer& inv_freq() const { return inv_freq_; }
  float attention_scaling() const { return attention_scaling_; }

  // The attention split count for `query_blocks` blocks of query tokens whose longest
  // context is max_kv_len.
  int attention_splits(int64_t query_blocks, int64_t max_kv_len) const;
  // Query tokens per attention block for this batch (kernels/attention.hpp).
  int attention_tokens_per_block(const ForwardBatch& batch) const;
  // Both for an eager forward of this batch (a draft head on this model's geometry uses
  // them too).
  struct AttentionPlan {
    int tokens_per_block = 1;
    int num_splits = 1;
  };
  AttentionPlan attention_plan(const ForwardBatch& batch) const;

 private:
  // DP attention: the MLP of layer l on every group's rows; normed_local [n, hidden] in,
  // out_local [n, hidden] the summed MLP output of this group's rows.
  void dp_mlp(int64_t layer, const TensorView& normed_local, const TensorView& out_local);
  DecoderLayerWeights layer_views(int64_t layer) const;

  LlamaConfig config_;
  LlamaConfig local_;
  std::shared_ptr<parallel::Communicator> tp_;
  std::shared_ptr<DpAttentionGroups> dp_;
  std::optional<parallel::DpPaddingPlan> dp_plan_;
  DpAttentionBuffers dp_buf_;
  TpShard shard_;
  LlamaWeights weights_;
  Stream stream_;
  DType act_dtype_;
  Buffer inv_freq_;
  float attention_scaling_ = 1.0f;
  int64_t weight_bytes_ = 0;
  int num_sms_ = 0;
  std::unique_ptr<ForwardWorkspace> eager_ws_;
  HiddenCapture capture_;
  TensorView captured_;  // the last forward's rows of its workspace's capture buffer
};

}  // namespace aerie::model
