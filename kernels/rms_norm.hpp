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

/// Two row-wise norms side by side in one launch (an EAGLE3 head's attention input):
/// y[r] = [rmsnorm(a[r]) * weight_a, rmsnorm(b[r]) * weight_b], each half exactly what rms_norm
/// gives; with b_copy, b's rows are also copied there (the head's residual stream).
/// With a_ids, a is a table and row r's first half normalises a[a_ids[r]]: the head's token
/// embedding gathered in the same launch (what embedding() and then this op give, one launch
/// fewer a draft step). An id outside the table is an error (CPU) and is never read (CUDA: a
/// row of zeros, as embedding() with zero_outside).
struct RmsNormPairParams {
  TensorView a, weight_a;    // [rows, hidden] ([table rows, hidden] with a_ids), [hidden]
  TensorView b, weight_b;    // [rows, hidden], [hidden]
  TensorView y;              // [rows, 2 * hidden], out
  TensorView b_copy = {};    // [rows, hidden], optional out (must not overlap b)
  TensorView a_ids = {};     // [rows] i32, optional: the rows of a to take
  float eps = 1e-5f;
  void validate() const;
  int64_t rows() const { return b.dim(0); }
};
Status rms_norm_pair(const RmsNormPairParams& p, const Stream& stream);

}  // namespace aerie::kernels
