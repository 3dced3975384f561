#pragma once
#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// The k largest values of each row and their indices, largest first; equal values keep
/// the lower index first (so k = 1 is argmax). For EAGLE's draft expansion.
struct TopKParams {
  TensorView x;        // [rows, n] f32
  TensorView values;   // [rows, k] f32
  TensorView indices;  // [rows, k] i32
  void validate() const;  // 1 <= k <= min(n, kMaxTopK)
};
constexpr int64_t kMaxTopK = 64;
Status topk(const TopKParams& p, const Stream& stream);

/// Fills x with N(mean, std) values, element i drawn from Philox(seed, i): the same seed
/// gives the same tensor on CPU and GPU (dummy weights, tests).
struct FillNormalParams {
  TensorView x;  // any floating shape
  uint64_t seed = 0;
  float mean = 0.0f;
  float std = 1.0f;
  void validate() const;
};
Status fill_normal(const FillNormalParams& p, const Stream& stream);

}  // namespace aerie::kernels
