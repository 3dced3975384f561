#include "launch/draft_builder.hpp"

#include "kernels/error.hpp"
#include "model/llama_weights.hpp"
#include "model/token_map.hpp"

namespace aerie::launch {

DraftShape resolve_draft(const DraftChoice& c, const model::LlamaConfig& target) {
  DraftShape shape;
  if (c.algorithm == spec::SpecAlgorithm::kStandalone) {
    AERIE_CHECK(c.quantization == model::DraftQuantization::kNone, "--speculative-draft-model-quantization is for EAGLE and EAGLE3 heads "
                                                                   "(a STANDALONE draft runs with the weights as loaded)");
    shape.self = c.path.empty() || c.path == c.target_path;
    shape.config = shape.self ? target : model::LlamaConfig::load(c.path);
    return shape;
  }
  const auto kind = c.algorithm == spec::SpecAlgorithm::kEagle3 ? model::EagleKind::kEagle3 : model::EagleKind::kEagle1;
  auto hc = c.path.empty() ? model::EagleHeadConfig::for_target(kind, target, c.draft_vocab) : model::EagleHeadConfig::load(c.path, target);
  if (!c.token_map.empty()) hc.hot_tokens = model::load_token_map(c.token_map, target.vocab_size);
  AERIE_CHECK(hc.kind == kind, c.path << " is an " << (hc.kind == model::EagleKind::kEagle3 ? "EAGLE3" : "EAGLE") << " head, not "
                                      << (kind == model::EagleKind::kEagle3 ? "EAGLE3" : "EAGLE"));
  hc.replicated = c.replicated;
  hc.quantization = c.quantization;
  shape.config = hc.layer;
  shape.head = std::move(hc);
  return shape;
}

model::LlamaConfig draft_local_config(const DraftShape& shape, const model::TpShard& shard) {
  return shape.head && shape.head->replicated ? shape.config : shard.attention_only().local(shape.config);
}

DType head_weight_dtype(const DraftChoice& c, const DraftShape& shape, Device device, DType weight_dtype) {
  if (device == Device::kCpu && !c.dummy && shape.head && shape.config.dtype == DType::kBF16) return DType::kBF16;
  return weight_dtype;
}

DraftModel load_draft(const DraftChoice& c, const DraftShape& shape, model::LlamaModel& target, const model::TpShard& shard,
                      std::shared_ptr<parallel::Communicator> tp, Device device, DType weight_dtype, DType act_dtype, Stream stream) {
  DraftModel out;
  if (!shape.head) {
    // In the attention-TP group under DP attention (the TP group otherwise): its forwards then
    // need no other group in step.
    const model::TpShard draft_shard = shard.attention_only();
    auto w = c.dummy ? model::random_llama_weights(shape.config, shape.self ? c.seed : c.seed + 1, device, weight_dtype, 0.02f, {}, draft_shard)
                     : model::load_llama_weights(shape.self ? c.target_path : c.path, shape.config, device, weight_dtype, {}, draft_shard);
    out.model = std::make_unique<model::LlamaModel>(shape.config, std::move(w), stream, act_dtype, std::move(tp));
    return out;
  }
  const model::TpShard head_shard = shape.head->replicated ? model::TpShard{} : shard.attention_only();
  const DType head_dtype = head_weight_dtype(c, shape, device, weight_dtype);
  auto hw = c.dummy ? model::random_eagle_head(*shape.head, c.seed, device, head_dtype, head_shard)
                    : model::load_eagle_head(c.path, *shape.head, device, head_dtype, head_shard);
  out.head = std::make_unique<model::EagleHead>(*shape.head, std::move(hw), target);
  return out;
}

}  // namespace aerie::launch
