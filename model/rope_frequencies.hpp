#pragma once
#include <vector>

#include "model/config.hpp"

namespace aerie::model {

/// The rotary inverse frequencies [head_dim / 2], as transformers computes them
/// (fp32; default, linear and llama3 rope types), and the attention scaling of cos/sin.
struct RopeFrequencies {
  std::vector<float> inv_freq;
  float attention_scaling = 1.0f;
};
RopeFrequencies rope_frequencies(const LlamaConfig& config);

}  // namespace aerie::model
