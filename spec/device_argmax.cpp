#include "spec/device_argmax.hpp"

#include <vector>

#include "kernels/error.hpp"
#include "kernels/sampling.hpp"

namespace aerie::spec {

DeviceArgmax::DeviceArgmax(Device device, int64_t max_rows)
    : max_rows_(max_rows),
      params_(device, DType::kI64, {max_rows}),
      top_p_(device, DType::kF32, {max_rows}),
      workspace_(device, DType::kF32, {kernels::sample_workspace_floats(max_rows)}) {
  params_.zero();  // temperature 0 (greedy), no top-k, min-p 0, seed and step 0
  const std::vector<float> ones(static_cast<size_t>(max_rows), 1.0f);
  top_p_.copy_from_host(ones.data(), top_p_.nbytes());
}

void DeviceArgmax::run(const TensorView& logits, const TensorView& out, const Stream& stream, const TensorView& id_map,
                       const TensorView& out_copy) {
  const int64_t rows = logits.dim(0);
  AERIE_CHECK(rows <= max_rows_, "argmax of " << rows << " rows, made for " << max_rows_);
  const Device d = params_.view().device;
  const TensorView zeros_f(params_.data(), DType::kF32, {rows}, d);
  const TensorView zeros_i32(params_.data(), DType::kI32, {rows}, d);
  const TensorView zeros_i64(params_.data(), DType::kI64, {rows}, d);
  AERIE_CHECK_STATUS(kernels::sample({.logits = logits, .temperature = zeros_f, .top_p = top_p_.view().slice_rows(0, rows),
                                      .top_k = zeros_i32, .min_p = zeros_f, .seed = zeros_i64, .step = zeros_i64,
                                      .out = out.reshape({rows}), .id_map = id_map,
                                      .out_copy = out_copy.defined() ? out_copy.reshape({rows}) : TensorView(),
                                      .workspace = workspace_.view().slice_rows(0, kernels::sample_workspace_floats(rows))},
                                     stream));
}

}  // namespace aerie::spec
