#include "actors/core/generation_request.hpp"

#include <cmath>

#include "kernels/error.hpp"

namespace aerie::core {

void SamplingOptions::validate() const {
  AERIE_CHECK(std::isfinite(temperature) && temperature >= 0.0f, "temperature must be a finite number >= 0, got " << temperature);
  AERIE_CHECK(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1], got " << top_p);
  AERIE_CHECK(std::isfinite(min_p) && min_p >= 0.0f && min_p <= 1.0f, "min_p must be in [0, 1], got " << min_p);
}

}  // namespace aerie::core
