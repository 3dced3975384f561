#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// out = silu(gate) * up, where gate_up holds [gate | up] along the last dimension
/// (the merged gate/up projection of a Llama MLP).
struct SiluMulParams {
  TensorView gate_up;  // [rows, 2 * inter]
  TensorView out;      // [rows, inter]
  void validate() const;
};
Status silu_mul(const SiluMulParams& p, const Stream& stream);

}  // namespace aerie::kernels
