#include <algorithm>
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
  // Blocked for the caches: a block of weight rows (converted once) meets every activation
  // row in small tiles, so neither is streamed from memory once per output column.
  constexpr int64_t kRowsPerBlock = 32, kTile = 16;
  const int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  parallel_for(blocks, m * k * kRowsPerBlock, [&](int64_t blk) {
    const int64_t j0 = blk * kRowsPerBlock, j1 = std::min(n, j0 + kRowsPerBlock);
    thread_local std::vector<float> w;
    w.resize(static_cast<size_t>((j1 - j0) * k));
    convert_to_float(static_cast<const char*>(p.w.data) + j0 * k * static_cast<int64_t>(dtype_size(p.w.dtype)), p.w.dtype,
                     (j1 - j0) * k, w.data());
    for (int64_t i0 = 0; i0 < m; i0 += kTile) {
      const int64_t i1 = std::min(m, i0 + kTile);
      for (int64_t j = j0; j < j1; ++j) {
        const float* wj = w.data() + (j - j0) * k;
        const float b = p.bias.defined() ? load_as_float(p.bias.data, p.bias.dtype, j) : 0.0f;
        for (int64_t i = i0; i < i1; ++i) {
          const float* xi = x.data() + i * k;
          // Eight partial sums: deterministic, and lets the compiler vectorise.
          float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          int64_t c = 0;
          for (; c + 8 <= k; c += 8)
            for (int u = 0; u < 8; ++u) acc[u] += xi[c + u] * wj[c + u];
          float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
          for (; c < k; ++c) sum += xi[c] * wj[c];
          y[static_cast<size_t>(i * n + j)] = sum + b;
        }
      }
    }
  });
  for (int64_t i = 0; i < m * n; ++i) store_from_float(p.y.data, p.y.dtype, i, y[static_cast<size_t>(i)]);
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
