#include <cmath>

#include "kernels/backends.hpp"
#include "kernels/cpu/cpu_clones.hpp"
#include "kernels/cpu/parallel_for.hpp"
#include "kernels/cpu/vector_exp.hpp"

namespace aerie::kernels::cpu {

namespace {
// One f32 row: gate_up holds (gate, up) pairs, out gets silu(gate) * up. Vectorised.
AERIE_CPU_CLONES void silu_mul_row_f32(const float* gate_up, float* out, int64_t inter) {
  for (int64_t i = 0; i < inter; ++i) {
    const float g = gate_up[2 * i], u = gate_up[2 * i + 1];
    out[i] = g / (1.0f + vector_exp(-g)) * u;
  }
}
}  // namespace

Status silu_mul(const SiluMulParams& p) {
  const int64_t rows = p.out.dim(0), inter = p.out.dim(1);
  const bool f32 = p.gate_up.dtype == DType::kF32 && p.out.dtype == DType::kF32;
  parallel_for(rows, inter * 16, [&](int64_t r) {  // rows are independent; exp is the cost
    if (f32) {
      silu_mul_row_f32(p.gate_up.ptr<float>() + r * 2 * inter, p.out.ptr<float>() + r * inter, inter);
      return;
    }
    for (int64_t i = 0; i < inter; ++i) {
      const float g = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + 2 * i);
      const float u = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + 2 * i + 1);
      store_from_float(p.out.data, p.out.dtype, r * inter + i, g / (1.0f + std::exp(-g)) * u);
    }
  });
  return Status::ok();
}

Status gate_up_silu(const GateUpSiluParams& p) {
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .w_fp8 = p.w_fp8, .w_scale = p.w_scale, .y = p.gate_up});
  if (!s.is_ok()) return s;
  return silu_mul({.gate_up = p.gate_up, .out = p.out});
}

}  // namespace aerie::kernels::cpu
