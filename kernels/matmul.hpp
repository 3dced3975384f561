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

}  // namespace aerie::kernels
