#include <cmath>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status silu_mul(const SiluMulParams& p) {
  const int64_t rows = p.out.dim(0), inter = p.out.dim(1);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const float g = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + 2 * i);
      const float u = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + 2 * i + 1);
      store_from_float(p.out.data, p.out.dtype, r * inter + i, g / (1.0f + std::exp(-g)) * u);
    }
  }
  return Status::ok();
}

Status gate_up_silu(const GateUpSiluParams& p) {
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .y = p.gate_up});
  if (!s.is_ok()) return s;
  return silu_mul({.gate_up = p.gate_up, .out = p.out});
}

}  // namespace aerie::kernels::cpu
