#pragma once
// Helpers shared by the C++ tests: seeded random host tensors and error measures.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/cpu/cpu_isa.hpp"

namespace aerie::testing {

inline Buffer random_buffer(std::mt19937& rng, DType dtype, std::initializer_list<int64_t> shape, float scale = 1.0f) {
  Buffer b(Device::kCpu, dtype, shape);
  std::normal_distribution<float> n(0.0f, scale);
  for (int64_t i = 0; i < b.view().numel(); ++i) store_from_float(b.data(), dtype, i, n(rng));
  return b;
}

inline std::vector<double> to_double(const TensorView& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = load_as_float(t.data, t.dtype, i);
  return out;
}

// ||a - b|| / ||b||
inline double rel_error(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

// The index of each row's largest value, for rows of `vocab` logits.
inline std::vector<int64_t> row_argmax(const std::vector<double>& l, int64_t vocab) {
  std::vector<int64_t> out;
  for (size_t r = 0; r < l.size() / static_cast<size_t>(vocab); ++r)
    out.push_back(std::max_element(l.begin() + static_cast<int64_t>(r) * vocab, l.begin() + static_cast<int64_t>(r + 1) * vocab) -
                  (l.begin() + static_cast<int64_t>(r) * vocab));
  return out;
}

// Caps the CPU kernels' instruction set for a scope (to test the AVX2 paths on an AVX-512 CPU)
// and puts the cap before back, also when a failed ASSERT leaves the test early.
class ScopedCpuIsaCap {
 public:
  explicit ScopedCpuIsaCap(kernels::cpu::CpuIsa cap) : before_(kernels::cpu::set_cpu_isa_cap(cap)) {}
  ~ScopedCpuIsaCap() { kernels::cpu::set_cpu_isa_cap(before_); }
  ScopedCpuIsaCap(const ScopedCpuIsaCap&) = delete;
  ScopedCpuIsaCap& operator=(const ScopedCpuIsaCap&) = delete;

 private:
  kernels::cpu::CpuIsa before_;
};

}  // namespace aerie::testing
