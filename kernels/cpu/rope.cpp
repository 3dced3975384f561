#include <cmath>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

namespace {
void rotate(const TensorView& x, int64_t t, float pos, const float* inv_freq, float scaling) {
  const int64_t heads = x.dim(1), dim = x.dim(2), half = dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t base = (t * heads + h) * dim;
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      const float c = std::cos(angle) * scaling, s = std::sin(angle) * scaling;
      const float x1 = load_as_float(x.data, x.dtype, base + i);
      const float x2 = load_as_float(x.data, x.dtype, base + i + half);
      store_from_float(x.data, x.dtype, base + i, x1 * c - x2 * s);
      store_from_float(x.data, x.dtype, base + i + half, x2 * c + x1 * s);
    }
  }
}
}  // namespace

Status rope(const RopeParams& p) {
  const float* inv_freq = p.inv_freq.ptr<float>();
  const int32_t* pos = p.positions.ptr<int32_t>();
  for (int64_t t = 0; t < p.q.dim(0); ++t) {
    rotate(p.q, t, static_cast<float>(pos[t]), inv_freq, p.attention_scaling);
    rotate(p.k, t, static_cast<float>(pos[t]), inv_freq, p.attention_scaling);
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
