#pragma once
// The draft model of speculative decoding, built one way for every tool: Deployment (serve,
// generate) and aerie-bench's speculative benchmark. Two steps, so that a launch can check
// the draft's shape against its layout before any weight is read:
//   resolve_draft: the draft's shape (a STANDALONE model's config, or an EAGLE / EAGLE3
//     head's config and decoder layer);
//   load_draft: this rank's shard of its weights (or all of a replicated head's), with the
//     target it drafts for.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "spec/draft_port.hpp"
#include "kernels/tensor.hpp"
#include "model/config.hpp"
#include "model/eagle_head.hpp"
#include "model/llama_model.hpp"
#include "model/tp_shard.hpp"
#include "parallel/communicator.hpp"

namespace aerie::launch {

struct DraftChoice {
  spec::SpecAlgorithm algorithm = spec::SpecAlgorithm::kEagle;
  std::string path;         // the head / draft folder; empty: random weights shaped for the target
  std::string target_path;  // STANDALONE with no path (or this one): the target's own model as the draft
  std::string token_map;    // EAGLE: hot-token map file (model/token_map.hpp)
  bool dummy = false;       // random weights (seeded) in the shape the folder or the target gives
  uint64_t seed = 0;
  bool replicated = false;  // an EAGLE head whole on every rank (vLLM's draft_tensor_parallel_size 1)
  int64_t draft_vocab = 0;  // a random EAGLE3 head's reduced vocabulary (0: the target's)
  // --speculative-draft-model-quantization (EAGLE heads: model/fp8_weights.hpp)
  model::DraftQuantization quantization = model::DraftQuantization::kNone;
};

struct DraftShape {
  model::LlamaConfig config;  // STANDALONE: the model; EAGLE: the head's decoder layer
  std::optional<model::EagleHeadConfig> head;
  bool self = false;          // STANDALONE: the target's own model
};

// Throws aerie::Error naming the folder when it holds another kind of head.
DraftShape resolve_draft(const DraftChoice& choice, const model::LlamaConfig& target);

// The draft's per-rank shape: its KV pool holds this rank's KV heads (all of a replicated head's).
model::LlamaConfig draft_local_config(const DraftShape& shape, const model::TpShard& shard);

struct DraftModel {
  std::unique_ptr<model::EagleHead> head;    // EAGLE / EAGLE3
  std::unique_ptr<model::LlamaModel> model;  // STANDALONE
};

// The dtype an EAGLE head's weights are kept in: `weight_dtype` (the target's), except that on
// the CPU a head whose checkpoint is bf16 stays bf16. The CPU computes in f32 whatever the
// weights are and widens bf16 exactly in the product's registers (kernels/cpu/small_batch_gemm.hpp),
// so the head's outputs are the same bits as from an f32 copy, and a draft step reads half the
// bytes (the shipped SmolLM2 head: 19 MB of LM head instead of 38).
DType head_weight_dtype(const DraftChoice& choice, const DraftShape& shape, Device device, DType weight_dtype);

// This rank's draft: in the target's attention-TP group (`shard`'s attention part), sharing
// the target's embeddings (EAGLE) or a model of its own (STANDALONE; with dummy weights and no
// other folder, the target's seed: a self-draft that accepts everything).
DraftModel load_draft(const DraftChoice& choice, const DraftShape& shape, model::LlamaModel& target, const model::TpShard& shard,
                      std::shared_ptr<parallel::Communicator> tp, Device device, DType weight_dtype, DType act_dtype, Stream stream);

}  // namespace aerie::launch
