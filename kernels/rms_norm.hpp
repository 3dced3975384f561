#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// y = rmsnorm(x [+ residual]) * weight, computed in fp32 (Hugging Face's LlamaRMSNorm).
/// When residual is given, it is first updated in place to x + residual and normalised.
struct RmsNormParams {
  TensorView x;              // [rows, hidden]
  TensorView weight;         // [hidden]
  TensorView residual = {};  // [rows, hidden], optional, in/out
  TensorView y;              // [rows, hidden], out (may alias x)
  float eps = 1e-5f;
  void validate() const;
};
Status rms_norm(const RmsNormParams& p, const Stream& stream);

}  // namespace aerie::kernels
