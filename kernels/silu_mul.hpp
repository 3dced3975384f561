#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// out[:, i] = silu(gate_up[:, 2i]) * gate_up[:, 2i + 1]: the merged gate/up projection of
/// a Llama MLP stores gate and up interleaved, so one GEMM block can own both rows of a pair.
struct SiluMulParams {
  TensorView gate_up;  // [rows, 2 * inter], (gate_i, up_i) interleaved
  TensorView out;      // [rows, inter]
  void validate() const;
};
Status silu_mul(const SiluMulParams& p, const Stream& stream);

}  // namespace aerie::kernels
