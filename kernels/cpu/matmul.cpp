#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cpu/parallel_for.hpp"

namespace aerie::kernels::cpu {

Status matmul(const MatmulParams& p) {
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  // Activations to fp32 once; each weight row is converted once and reused for all m rows.
  std::vector<float> x(static_cast<size_t>(m * k));
  convert_to_float(p.x.data, p.x.dtype, m * k, x.data());
  std::vector<float> y(static_cast<size_t>(m * n));
  parallel_for(n, m * k, [&](int64_t j) {
    thread_local std::vector<float> w;
    w.resize(static_cast<size_t>(k));
    convert_to_float(static_cast<const char*>(p.w.data) + j * k * static_cast<int64_t>(dtype_size(p.w.dtype)),
                     p.w.dtype, k, w.data());
    const float b = p.bias.defined() ? load_as_float(p.bias.data, p.bias.dtype, j) : 0.0f;
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x.data() + i * k;
      // Four partial sums: deterministic, and lets the compiler vectorise.
      float acc[4] = {0, 0, 0, 0};
      int64_t c = 0;
      for (; c + 4 <= k; c += 4)
        for (int u = 0; u < 4; ++u) acc[u] += xi[c + u] * w[static_cast<size_t>(c + u)];
      float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
      for (; c < k; ++c) sum += xi[c] * w[static_cast<size_t>(c)];
      y[static_cast<size_t>(i * n + j)] = sum + b;
    }
  });
  for (int64_t i = 0; i < m * n; ++i) store_from_float(p.y.data, p.y.dtype, i, y[static_cast<size_t>(i)]);
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
