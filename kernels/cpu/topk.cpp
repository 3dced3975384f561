#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/backends.hpp"

namespace aerie::kernels::cpu {

Status topk(const TopKParams& p) {
  const int64_t rows = p.x.dim(0), n = p.x.dim(1), k = p.values.dim(1);
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = p.x.ptr<float>() + r * n;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return x[a] > x[b] || (x[a] == x[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) {
      p.values.ptr<float>()[r * k + i] = x[order[static_cast<size_t>(i)]];
      p.indices.ptr<int32_t>()[r * k + i] = order[static_cast<size_t>(i)];
    }
  }
  return Status::ok();
}

Status fill_normal(const FillNormalParams& p) {
  const int64_t n = p.x.numel();
  for (int64_t i = 0; i < n; ++i) {
    // Box-Muller on two Philox uniforms; 1 - u keeps the log argument in (0, 1].
    const float u1 = 1.0f - philox_uniform(p.seed, static_cast<uint64_t>(i) * 2);
    const float u2 = philox_uniform(p.seed, static_cast<uint64_t>(i) * 2 + 1);
    const float z = std::sqrt(-2.0f * std::log(u1)) * std::cos(6.2831853071795864f * u2);
    store_from_float(p.x.data, p.x.dtype, i, p.mean + p.std * z);
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
