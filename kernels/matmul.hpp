#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// y = x w^T (+ bias): the nn.Linear convention, fp32 accumulation.
struct MatmulParams {
  TensorView x;          // [m, k]
  TensorView w;          // [n, k]
  TensorView bias = {};  // [n], optional
  TensorView y;          // [m, n], out
  void validate() const;
};
Status matmul(const MatmulParams& p, const Stream& stream);

/// y = (silu(gate) * up) w^T (+ bias) where gate_up = [gate | up]: a Llama MLP's down
/// projection with its activation. The CUDA backend fuses the activation into the
/// small-batch GEMV; otherwise (and on CPU) silu_mul writes `act` and matmul reads it.
struct GatedMatmulParams {
  TensorView gate_up;    // [m, 2k]
  TensorView w;          // [n, k]
  TensorView bias = {};  // [n], optional
  TensorView act;        // [m, k] scratch (also the activation, when not fused)
  TensorView y;          // [m, n], out
  void validate() const;
};
Status gated_matmul(const GatedMatmulParams& p, const Stream& stream);

/// Tuning knob of the CUDA backend: products with at most this many rows of x (<= 8) use
/// Aerie's GEMV kernel instead of cuBLAS (bf16/f16). 0 sends everything to cuBLAS.
void set_gemv_max_rows(int rows);
int gemv_max_rows();

}  // namespace aerie::kernels
