#include <cmath>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status silu_mul(const SiluMulParams& p) {
  const int64_t rows = p.out.dim(0), inter = p.out.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const float g = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + i);
      const float u = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + inter + i);
      store_from_float(p.out.data, p.out.dtype, r * inter + i, g / (1.0f + std::exp(-g)) * u);
    }
  }
  return Status::ok();
}

Status gated_matmul(const GatedMatmulParams& p) {
  Status s = silu_mul({.gate_up = p.gate_up, .out = p.act});
  if (!s.is_ok()) return s;
  return matmul({.x = p.act, .w = p.w, .bias = p.bias, .y = p.y});
}

}  // namespace aerie::kernels::cpu
