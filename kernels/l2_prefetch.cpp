#include "kernels/l2_prefetch.hpp"

#include <algorithm>

namespace aerie::kernels {

TensorView l2_prefetch_hint(const TensorView& weight, int64_t rows, int64_t max_bytes) {
  if (!weight.defined() || rows > kL2PrefetchMaxRows || weight.ndim < 1 || weight.dim(0) == 0) return {};
  if (max_bytes <= 0 || max_bytes >= weight.nbytes()) return weight;
  const int64_t row_bytes = weight.nbytes() / weight.dim(0);
  const int64_t keep = std::clamp<int64_t>((max_bytes + row_bytes - 1) / row_bytes, 1, weight.dim(0));
  return weight.slice_rows(0, keep);
}

}  // namespace aerie::kernels
