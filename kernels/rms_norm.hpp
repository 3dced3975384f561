#pragma once
#include <cmath>
#include <cstdint>

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

/// Sums of squares of residual-stream rows as a projection adds them up while it updates the
/// stream (MatmulParams::residual_squares), for the norm that reads the stream next
/// (InputNorm::squares): each element's square in fixed point (times 2^kSquareFractionBits,
/// rounded to an integer) added as i64, so the sum does not depend on the order of the adds;
/// a row's sum is spread over kSquareSlots slots so that writers do not contend for one, and
/// readers add the slots. Exact to 2^-25 per element; rms_norm's own float sum differs from it
/// only in rounding.
inline constexpr int64_t kSquareSlots = 16;
inline constexpr int kSquareFractionBits = 24;
/// One element's square in that fixed point (the square is exact in double for every dtype
/// the stream has; rounded half to even, as the CUDA kernels round it).
inline int64_t square_fixed_point(float v) { return std::llrint(static_cast<double>(v) * v * 0x1p24); }
static_assert(kSquareFractionBits == 24, "square_fixed_point scales by 2^24");

/// An RMSNorm in front of a projection (QkvRopeParams, GateUpSiluParams): when `weight` is
/// given the op reads rmsnorm(x) * weight where it would read x (no residual: x is the residual
/// stream already updated, MatmulParams::residual). A backend that does not fuse the norm
/// writes the normalised rows to `normed` (x's shape) with rms_norm and runs the op on them.
/// The CUDA GEMVs of one or two rows fuse it when `squares` holds the rows' sums of squares
/// (accumulated by the matmul that updated the stream): each block then normalises x as it
/// loads it, as rms_norm would from that sum, and a decode step saves two kernels a layer
/// (input_norm_fuses says when). Without `squares` every backend uses rms_norm.
struct InputNorm {
  TensorView weight = {};   // [hidden]; undefined: no norm
  TensorView normed = {};   // [rows, hidden] scratch (required: the unfused path writes it)
  TensorView squares = {};  // [rows, kSquareSlots] i64, optional: the rows' sums of squares
  float eps = 1e-5f;
  bool defined() const { return weight.defined(); }
  void validate(const TensorView& x) const;
};
/// Whether ops given x (rows of the residual stream) fuse an InputNorm with squares, and the
/// matmul's residual add with it, into their kernels: a model lays its layer out for that only
/// then, since the unfused path costs a kernel more than rms_norm with its residual add.
/// AERIE_FUSE_INPUT_NORM=0 answers false (for measuring), as does set_input_norm_fusion(false).
bool input_norm_fuses(const TensorView& x);
void set_input_norm_fusion(bool on);

}  // namespace aerie::kernels
