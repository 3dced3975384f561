#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// y = rmsnorm(x [+ residual]) * weight, computed in fp32 (Hugging Face's LlamaRMSNorm).
/// With residual, the sum x + residual is stored (to residual_out when given, else back
/// into residual) and normalised: the residual stream of a pre-norm decoder layer.
/// With residual_out but no residual, x itself is stored there (layer 0).
struct RmsNormParams {
  TensorView x;                  // [rows, hidden]
  TensorView weight;             // [hidden]
  TensorView residual = {};      // [rows, hidden], optional, in (and out without residual_out)
  TensorView residual_out = {};  // [rows, hidden], optional, out; must not alias residual
  TensorView y;                  // [rows, hidden], out (may alias x)
  float eps = 1e-5f;
  void validate() const;
};
Status rms_norm(const RmsNormParams& p, const Stream& stream);

}  // namespace aerie::kernels
