#include "model/rope_frequencies.hpp"

#include <cmath>
#include <numbers>

namespace aerie::model {

RopeFrequencies rope_frequencies(const LlamaConfig& c) {
  RopeFrequencies r;
  const int64_t half = c.head_dim / 2;
  const float base = static_cast<float>(c.rope_theta);
  r.inv_freq.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
    r.inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(base, exponent);
  }
  const auto& s = c.rope_scaling;
  if (s.type == "linear") {
    for (auto& f : r.inv_freq) f = f / static_cast<float>(s.factor);
  } else if (s.type == "llama3") {
    // Llama 3.1: long wavelengths are divided by `factor`, short ones kept, and the band in
    // between interpolated smoothly.
    const float factor = static_cast<float>(s.factor);
    const float old_len = static_cast<float>(s.original_max_position_embeddings);
    const float low = static_cast<float>(s.low_freq_factor), high = static_cast<float>(s.high_freq_factor);
    const float low_freq_wavelen = old_len / low, high_freq_wavelen = old_len / high;
    for (auto& f : r.inv_freq) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      float scaled = wavelen > low_freq_wavelen ? f / factor : f;
      const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
      if (medium) {
        const float smooth = (old_len / wavelen - low) / (high - low);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      f = scaled;
    }
  }
  return r;
}

}  // namespace aerie::model
