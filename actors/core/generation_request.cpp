#include "actors/core/generation_request.hpp"

#include <cmath>

#include "kernels/error.hpp"

namespace aerie::core {

void SamplingOptions::validate() const {
  AERIE_CHECK(std::isfinite(temperature) && temperature >= 0.0f, "temperature must be a finite number >= 0, got " << temperature);
  AERIE_CHECK(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1], got " << top_p);
  AERIE_CHECK(std::isfinite(min_p) && min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1], got " << min_p);
  AERIE_CHECK(std::isfinite(frequency_penalty) && std::abs(frequency_penalty) <= 2.0f, "frequency_penalty must be in [-2, 2], got " << frequency_penalty);
  AERIE_CHECK(std::isfinite(presence_penalty) && std::abs(presence_penalty) <= 2.0f, "presence_penalty must be in [-2, 2], got " << presence_penalty);
  AERIE_CHECK(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f && repetition_penalty <= 2.0f,
              "repetition_penalty must be in (0, 2], got " << repetition_penalty);
  AERIE_CHECK(min_new_tokens >= 0, "min_new_tokens must be >= 0, got " << min_new_tokens);
  AERIE_CHECK(logit_bias.size() <= 1024, "logit_bias may name at most 1024 tokens");
  for (const auto& [id, bias] : logit_bias)
    AERIE_CHECK(std::isfinite(bias) && std::abs(bias) <= 100.0f, "logit_bias of token " << id << " must be in [-100, 100], got " << bias);
}

}  // namespace aerie::core
