#pragma once
// The tiny CPU models and request layouts the draft worker and draft runner tests share.
#include <memory>
#include <vector>

#include "spec/draft_worker_core.hpp"
#include "model/config.hpp"
#include "model/llama_model.hpp"
#include "model/llama_weights.hpp"

namespace aerie::testing {

inline const model::LlamaConfig& tiny() {
  static const auto c = model::LlamaConfig::named_shape("tiny");
  return c;
}

inline std::unique_ptr<model::LlamaModel> tiny_model(uint64_t seed) {
  return std::make_unique<model::LlamaModel>(tiny(), model::random_llama_weights(tiny(), seed, Device::kCpu, DType::kF32, 0.1f), Stream::cpu(),
                                             DType::kF32);
}

inline std::vector<int32_t> slots(int32_t from, int32_t to) {  // slots of positions [from, to): position p lives in slot p + 1
  std::vector<int32_t> s;
  for (int32_t p = from; p < to; ++p) s.push_back(p + 1);
  return s;
}

inline spec::DraftExtendSeq prompt_extend(uint64_t rid, const std::vector<int32_t>& prompt) {
  const auto n = static_cast<int32_t>(prompt.size());
  return {.rid = rid, .tokens = prompt, .first_position = 0, .slots = slots(0, n), .context = slots(0, n), .hidden_rows = {}, .keep = true};
}

}  // namespace aerie::testing
