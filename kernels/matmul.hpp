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

/// The first half of a Llama MLP: out = silu(x w_gate^T) * (x w_up^T), with the gate and up
/// projections merged row-interleaved in w (row 2i = gate_i, row 2i+1 = up_i; see
/// silu_mul.hpp). The CUDA backend fuses the activation into the small-batch GEMV, whose
/// blocks own row pairs; otherwise (and on CPU) matmul writes gate_up, silu_mul reads it.
struct GateUpSiluParams {
  TensorView x;          // [m, k]
  TensorView w;          // [2 * inter, k], rows interleaved gate/up
  TensorView bias = {};  // [2 * inter], optional, interleaved the same way
  TensorView gate_up;    // [m, 2 * inter] scratch (the pre-activation, when not fused)
  TensorView out;        // [m, inter]
  void validate() const;
};
Status gate_up_silu(const GateUpSiluParams& p, const Stream& stream);

/// A pre-norm sublayer's input projection: residual_out = x [+ residual]; y = rmsnorm(
/// residual_out) * norm_weight, times w^T (+ bias), or with silu_pairs the gate/up SiLU of
/// GateUpSiluParams. The CUDA backend folds the norm into the small-batch GEMV (it scales
/// the dot products by the row's inverse RMS at the end); otherwise rms_norm writes
/// `normed` and matmul (or gate_up_silu, through `gate_up`) reads it.
struct NormMatmulParams {
  TensorView x;              // [m, k]
  TensorView residual = {};  // [m, k], optional (none at layer 0)
  TensorView residual_out;   // [m, k], out; must not alias residual
  TensorView norm_weight;    // [k]
  float eps = 1e-5f;
  TensorView normed;         // [m, k] scratch
  TensorView w;              // [n, k]
  TensorView bias = {};      // [n], optional
  bool silu_pairs = false;
  TensorView gate_up = {};   // [m, n] scratch, with silu_pairs
  TensorView y;              // [m, n], or [m, n / 2] with silu_pairs
  void validate() const;
};
Status norm_matmul(const NormMatmulParams& p, const Stream& stream);

/// Tuning knob of the CUDA backend: products with at most this many rows of x (<= 8) use
/// Aerie's GEMV kernel instead of cuBLAS (bf16/f16). 0 sends everything to cuBLAS.
void set_gemv_max_rows(int rows);
int gemv_max_rows();

}  // namespace aerie::kernels
