#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cpu/cpu_clones.hpp"
#include "kernels/cpu/parallel_for.hpp"

namespace aerie::kernels::cpu {

namespace {

// Sum of squares in double, eight partial sums (vectorised, fixed order).
AERIE_CPU_CLONES double sum_of_squares(const float* h, int64_t n) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) acc[u] += static_cast<double>(h[i + u]) * h[i + u];
  double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += static_cast<double>(h[i]) * h[i];
  return sum;
}

// The f32 row: residual added (and kept), normalised, scaled by the weight.
AERIE_CPU_CLONES void norm_row_f32(const float* x, float* residual, const float* weight, float eps, int64_t n, float* h, float* y) {
  for (int64_t i = 0; i < n; ++i) h[i] = residual ? (residual[i] = x[i] + residual[i]) : x[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum_of_squares(h, n) / static_cast<double>(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = weight[i] * (h[i] * inv);
}

}  // namespace

Status rms_norm(const RmsNormParams& p) {
  const int64_t rows = p.x.dim(0), hidden = p.x.dim(1);
  // Rows are independent: one task each.
  parallel_for(rows, hidden * 4, [&](int64_t r) {
    thread_local std::vector<float> h;
    h.resize(static_cast<size_t>(hidden));
    const int64_t base = r * hidden;
    const bool f32 = p.x.dtype == DType::kF32 && p.y.dtype == DType::kF32 && p.weight.dtype == DType::kF32 &&
                     (!p.residual.defined() || p.residual.dtype == DType::kF32);
    if (f32) {
      norm_row_f32(p.x.ptr<float>() + base, p.residual.defined() ? p.residual.ptr<float>() + base : nullptr, p.weight.ptr<float>(),
                   p.eps, hidden, h.data(), p.y.ptr<float>() + base);
      return;
    }
    for (int64_t i = 0; i < hidden; ++i) {
      float v = load_as_float(p.x.data, p.x.dtype, base + i);
      if (p.residual.defined()) {
        v += load_as_float(p.residual.data, p.residual.dtype, base + i);
        store_from_float(p.residual.data, p.residual.dtype, base + i, v);
        v = load_as_float(p.residual.data, p.residual.dtype, base + i);  // what the next layer reads
      }
      h[static_cast<size_t>(i)] = v;
    }
    const double sum = sum_of_squares(h.data(), hidden);
    const float inv = 1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(hidden)) + p.eps);
    for (int64_t i = 0; i < hidden; ++i)
      store_from_float(p.y.data, p.y.dtype, base + i,
                       load_as_float(p.weight.data, p.weight.dtype, i) * (h[static_cast<size_t>(i)] * inv));
  });
  return Status::ok();
}

// Each half through rms_norm itself (so each equals it bit for bit), then into its columns.
Status rms_norm_pair(const RmsNormPairParams& p) {
  const int64_t rows = p.rows(), hidden = p.a.dim(1);
  const size_t es = dtype_size(p.a.dtype), row_bytes = static_cast<size_t>(hidden) * es;
  // a_ids: the table's rows gathered first by embedding() (which refuses an id outside the
  // table), then normalised as a's.
  std::vector<char> gathered;
  TensorView a = p.a;
  if (p.a_ids.defined()) {
    gathered.resize(static_cast<size_t>(rows) * row_bytes);
    a = TensorView(gathered.data(), p.a.dtype, {rows, hidden}, Device::kCpu);
    if (Status st = embedding({.ids = p.a_ids, .table = p.a, .out = a}); !st.is_ok()) return st;
  }
  if (p.b_copy.defined()) std::memcpy(p.b_copy.data, p.b.data, static_cast<size_t>(rows) * row_bytes);
  std::vector<char> half(static_cast<size_t>(rows) * row_bytes);
  const TensorView out(half.data(), p.a.dtype, {rows, hidden}, Device::kCpu);
  for (int side = 0; side < 2; ++side) {
    Status st = rms_norm({.x = side ? p.b : a, .weight = side ? p.weight_b : p.weight_a, .y = out, .eps = p.eps});
    if (!st.is_ok()) return st;
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(p.y.data) + (static_cast<size_t>(2 * r + side)) * row_bytes, half.data() + static_cast<size_t>(r) * row_bytes,
                  row_bytes);
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
