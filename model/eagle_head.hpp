#pragma once
// EAGLE draft heads: one Llama decoder layer that reads the target's hidden states and
// proposes the next tokens, in the formats their authors publish and sglang loads.
//   EAGLE (1/2, LlamaForCausalLMEagle): fc [H, 2H] over concat(embed(token), hidden), then
//     `layers.0` without its input norm; logits through the target's LM head, no final norm.
//     `hidden` is the target's final normed hidden state, or the head's own output.
//   EAGLE3 (LlamaForCausalLMEagle3): the target's hidden states entering three layers,
//     concatenated [3H], go through fc [H, 3H]; `midlayer` norms the embedding and the
//     hidden separately and attends over their concatenation [2H]; `norm` + its own
//     `lm_head` [draft_vocab, H]; target id = draft id + d2t[draft id].
//   An EAGLE head with a hot-token map (model/token_map.hpp) keeps only those rows of the
//   target's LM head: draft id i is target id hot_tokens[i].
// The embedding table is the target's. The head writes its K/V into its own one-layer
// cache, at the same slots as the target's positions.
// Under tensor parallelism the head runs in its target's TP group (sglang's draft TP
// context): its decoder layer is sharded as the target's are (model/tp_shard.hpp), its
// EAGLE3 LM head is vocab-parallel over the draft vocabulary, fc is replicated, and a
// hot-token LM head is gathered whole onto every rank. With `replicated`, the layer and the
// EAGLE3 LM head are whole on every rank instead (docs/tensor_parallel.md: what was measured).
#include <filesystem>
#include <map>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "model/config.hpp"
#include "model/fp8_weights.hpp"
#include "model/forward_batch.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"

namespace aerie::model {

enum class EagleKind { kEagle1, kEagle3 };

struct EagleHeadConfig {
  EagleKind kind = EagleKind::kEagle3;
  LlamaConfig layer;               // the decoder layer's shape (num_layers 1); vocab_size is the target's
  int64_t draft_vocab = 0;         // rows of the EAGLE3 LM head
  std::vector<int64_t> aux_layers; // EAGLE3: target layers whose input hidden states feed fc
  // EAGLE (1/2) with --speculative-token-map: the target ids it drafts from; its LM head is
  // then those rows of the target's (empty: the full vocabulary).
  std::vector<int32_t> hot_tokens;
  // Under TP: the decoder layer and an EAGLE3 LM head whole on every rank (no collectives
  // but the shared embedding's), instead of sharded like the target. Load the weights with
  // no shard then.
  bool replicated = false;
  // --speculative-draft-model-quantization. kFp8: the head's products (fc, the layer's four, its
  // own LM head) get FP8 E4M3 copies with a scale per row (model/fp8_weights.hpp), made when the
  // head is built, which products of up to 16 rows read (half the bytes; kernels/matmul.hpp).
  // kW8A8Int8 (CPU, f32 activations): the same products as Q8_0 blocks in tile order over int8
  // activations on AMX (EagleHeadWeights::*_blocks), as AERIE_CPU_INT8_ACTIVATIONS=1 gives the
  // head with the target; here the target stays exact. Tokens still come from the target's
  // verify: only acceptance moves.
  DraftQuantization quantization = DraftQuantization::kNone;
  int64_t input_width() const { return kind == EagleKind::kEagle3 ? 3 * layer.hidden_size : layer.hidden_size; }
  // config.json of a head folder, checked against the target it drafts for.
  static EagleHeadConfig load(const std::filesystem::path& dir, const LlamaConfig& target);
  // A head shaped for `target` (dummy weights): the target's layer shape; EAGLE3 with the
  // default aux layers (2, L/2, L-3) and draft_vocab (0: the full vocabulary).
  static EagleHeadConfig for_target(EagleKind kind, const LlamaConfig& target, int64_t draft_vocab = 0);
};

struct EagleHeadWeights {
  Buffer fc;                     // [H, 2H] (EAGLE) or [H, 3H] (EAGLE3)
  Buffer input_norm, hidden_norm;  // EAGLE3 [H]
  Buffer qkv;                    // [q + 2kv, H or 2H], q/k rows pair-adjacent as the target's (this rank's heads)
  Buffer o_proj;                 // [H, q]
  Buffer post_norm;              // [H]
  Buffer gate_up;                // [2I, H] interleaved (this rank's rows)
  Buffer down;                   // [H, I]
  Buffer norm;                   // EAGLE3 [H]
  Buffer lm_head;                // EAGLE3 [draft_vocab, H] (this rank's vocab rows, padded)
  std::vector<int32_t> d2t;      // EAGLE3: draft id -> target id offset (empty: identity)
  // With fp8 weights (EagleHeadConfig::quantization kFp8): each product's fp8 copy and row scales,
  // read by products of up to kernels::kFp8MaxRows rows (empty otherwise).
  Fp8Rows fc_fp8, qkv_fp8, o_proj_fp8, gate_up_fp8, down_fp8, lm_head_fp8;
  // On the CPU with int8 activations (AERIE_CPU_INT8_ACTIVATIONS=1, model/llama_weights.hpp, or
  // EagleHeadConfig::quantization kW8A8Int8):
  // each product's Q8_0 blocks in tile order, made when the head is built (lossy, as fp8: only
  // acceptance moves), read by its products at every row count (empty otherwise).
  BlockBuffer fc_blocks, qkv_blocks, o_proj_blocks, gate_up_blocks, down_blocks, lm_head_blocks;
};

// The part of the head TP rank `shard` holds (the whole head by default).
EagleHeadWeights load_eagle_head(const std::filesystem::path& dir, const EagleHeadConfig& config, Device device, DType dtype,
                                 const TpShard& shard = {});
EagleHeadWeights random_eagle_head(const EagleHeadConfig& config, uint64_t seed, Device device, DType dtype, const TpShard& shard = {});

class EagleHead {
 public:
  // `target` lends its embedding table and (EAGLE) its LM head; it must outlive the head.
  EagleHead(EagleHeadConfig config, EagleHeadWeights weights, const LlamaModel& target);
  const EagleHeadConfig& config() const { return config_; }
  // The decoder layer's per-rank shape: what the head's KV cache is sized by.
  const LlamaConfig& local_layer() const { return local_; }
  // One forward over a ragged batch. in_hidden: [tokens, input_width()] (the target's
  // captured states) or [tokens, H] (the head's own output, EAGLE3 draft steps). Returns
  // logits [logit_rows, vocab of the head] f32; out_hidden() then holds [tokens, H], in the
  // workspace's residual stream: valid until the next forward over the same workspace.
  TensorView forward(const ForwardBatch& batch, const TensorView& in_hidden, KvCache& kv);
  // A workspace for run() (graph runners keep their own, at fixed addresses).
  std::unique_ptr<ForwardWorkspace> make_workspace(const ForwardCapacity& capacity) const;
  // forward() over inputs already uploaded to `ws`: only enqueues kernels (capturable).
  TensorView run(ForwardWorkspace& ws, const TensorView& in_hidden, KvCache& kv, const ForwardDims& dims);
  TensorView out_hidden() const { return out_hidden_; }
  // The target id of a head logit column.
  int32_t to_target(int32_t draft_id) const;
  int64_t vocab() const;

 private:
  // The head's own scratch for forwards over one workspace (the concatenated inputs).
  struct Scratch {
    Buffer fc_in, attn_in;
  };
  Scratch& scratch_for(const ForwardWorkspace& ws);
  // The products' fp8 copies and row scales (EagleHeadConfig::quantization kFp8).
  void quantize_to_fp8();
  // The products' Q8_0 blocks (EagleHeadWeights::fc_blocks ...).
  void quantize_to_int8_blocks();
  // The group the decoder layer's row-parallel products are summed over.
  parallel::Communicator& layer_group() const;
  // The group the LM head's rows are split over (one rank: a whole table).
  parallel::Communicator& lm_head_group() const;
  EagleHeadConfig config_;
  LlamaConfig local_;
  EagleHeadWeights w_;
  const LlamaModel& target_;
  Stream stream_;
  DType act_;
  std::unique_ptr<ForwardWorkspace> ws_;
  std::unique_ptr<parallel::Communicator> solo_;  // a replicated hot-token head's "group"
  std::map<const ForwardWorkspace*, Scratch> scratch_;
  TensorView out_hidden_;  // the last forward's [tokens, H] output, in its workspace's residual rows
};

}  // namespace aerie::model
