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
struct RmsNormPairParams {
  TensorView a, weight_a;    // [rows, hidden], [hidden]
  TensorView b, weight_b;    // [rows, hidden], [hidden]
  TensorView y;              // [rows, 2 * hidden], out
  TensorView b_copy = {};    // [rows, hidden], optional out (must not overlap b)
  float eps = 1e-5f;
  void validate() const;
};
Status rms_norm_pair(const RmsNormPairParams& p, const Stream& stream);

/// An RMSNorm in front of a projection (QkvRopeParams, GateUpSiluParams): when `weight` is
/// given the op reads rmsnorm(x) * weight where it would read x, with exactly rms_norm's numbers
/// (no residual: x is the residual stream already updated, MatmulParams::residual). A backend
/// that does not fuse the norm writes the normalised rows to `normed` (x's shape) and runs the
/// op on them; the CUDA GEMVs of one or two rows normalise each row in shared memory instead,
/// so a decode step saves two kernels a layer (input_norm_fuses says when).
struct InputNorm {
  TensorView weight = {};  // [hidden]; undefined: no norm
  TensorView normed = {};  // [rows, hidden] scratch (required: the unfused path writes it)
  float eps = 1e-5f;
  bool defined() const { return weight.defined(); }
  void validate(const TensorView& x) const;
};
/// Whether ops given x (rows of the residual stream) fuse an InputNorm, and the matmul's
/// residual add with it, into their kernels: a model lays its layer out for that only then,
/// since the unfused path costs a kernel more than rms_norm with its residual add.
/// AERIE_FUSE_INPUT_NORM=0 answers false (for measuring), as does set_input_norm_fusion(false).
bool input_norm_fuses(const TensorView& x);
void set_input_norm_fusion(bool on);

}  // namespace aerie::kernels
