#include <cmath>
#include <vector>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status rms_norm(const RmsNormParams& p) {
  const int64_t rows = p.x.dim(0), hidden = p.x.dim(1);
  std::vector<float> h(static_cast<size_t>(hidden));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = r * hidden;
    for (int64_t i = 0; i < hidden; ++i) {
      float v = load_as_float(p.x.data, p.x.dtype, base + i);
      if (p.residual.defined()) {
        v += load_as_float(p.residual.data, p.residual.dtype, base + i);
        store_from_float(p.residual.data, p.residual.dtype, base + i, v);
        v = load_as_float(p.residual.data, p.residual.dtype, base + i);  // what the next layer reads
      }
      h[static_cast<size_t>(i)] = v;
    }
    double sum = 0.0;
    for (float v : h) sum += static_cast<double>(v) * v;
    const float inv = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(hidden)) + p.eps);
    for (int64_t i = 0; i < hidden; ++i)
      store_from_float(p.y.data, p.y.dtype, base + i,
                       load_as_float(p.weight.data, p.weight.dtype, i) * (h[static_cast<size_t>(i)] * inv));
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
