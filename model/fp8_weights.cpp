#include "model/fp8_weights.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/error.hpp"

namespace aerie::model {

void quantize_fp8_rows(const float* w, int64_t n, int64_t k, uint8_t* codes, float* scales, int64_t first_row) {
  for (int64_t r = 0; r < n; ++r) {
    const float* row = w + r * k;
    const AbsMax m = abs_max(row, k);
    const float amax = m.value;
    AERIE_CHECK(m.finite, "fp8 quantization: row " << first_row + r << " holds a non-finite weight");
    const float scale = amax > 0.0f ? amax / kF8E4M3Max : 1.0f;
    scales[r] = scale;
    for (int64_t c = 0; c < k; ++c) codes[r * k + c] = float_to_f8e4m3(row[c] / scale);
  }
}

Fp8Rows quantize_fp8_rows(const Buffer& w) {
  const TensorView& v = w.view();
  AERIE_CHECK(v.ndim == 2 && is_floating(v.dtype), "fp8 quantization needs a 2-D floating weight, got " << v.describe());
  const int64_t n = v.dim(0), k = v.dim(1);
  std::vector<char> raw(static_cast<size_t>(w.nbytes()));
  w.copy_to_host(raw.data(), w.nbytes());
  Fp8Rows out{Buffer(v.device, DType::kF8E4M3, {n, k}), Buffer(v.device, DType::kF32, {n})};
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  std::vector<float> scales(static_cast<size_t>(n)), row(static_cast<size_t>(k));
  const size_t es = dtype_size(v.dtype);
  for (int64_t r = 0; r < n; ++r) {  // a row at a time: no float copy of the whole weight
    convert_to_float(raw.data() + static_cast<size_t>(r * k) * es, v.dtype, k, row.data());
    quantize_fp8_rows(row.data(), 1, k, codes.data() + r * k, scales.data() + r, r);
  }
  out.values.copy_from_host(codes.data(), out.values.nbytes());
  out.scales.copy_from_host(scales.data(), out.scales.nbytes());
  return out;
}

DraftQuantization parse_draft_quantization(const std::string& name) {
  if (name.empty()) return DraftQuantization::kNone;
  if (name == "fp8") return DraftQuantization::kFp8;
  if (name == "w8a8_int8") return DraftQuantization::kW8A8Int8;
  AERIE_FAIL("--speculative-draft-model-quantization '" << name
                                                        << "' is not supported (fp8, w8a8_int8, or leave it out for the weights as loaded)");
}

}  // namespace aerie::model
