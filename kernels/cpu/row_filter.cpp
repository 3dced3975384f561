#include "kernels/cpu/row_filter.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "kernels/cpu/cpu_isa.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AERIE_HAVE_SIMD_ARGMAX 1
#endif

namespace aerie::kernels::cpu {

namespace {

// The first index of the row's largest value, as the scalar loop `if (row[v] > row[best]) best
// = v` finds it: NaNs never win, ties keep the lowest index, and a NaN at index 0 wins (nothing
// compares greater). The vector forms take the maximum of the non-NaN values first (max_ps
// returns its second operand, the running maximum, for a NaN), then the first index equal to it:
// a greedy row of 49,152 logits in a few microseconds instead of ~50 (one compare-and-branch a
// value), for every decode step and verify row.
int32_t argmax_scalar(const float* row, int64_t n) {
  int32_t best = 0;
  for (int64_t v = 1; v < n; ++v)
    if (row[v] > row[best]) best = static_cast<int32_t>(v);
  return best;
}

#if AERIE_HAVE_SIMD_ARGMAX
// The largest non-NaN of `lanes` and of row[from, n) (-inf if none).
float largest_of(const float* lanes, int width, const float* row, int64_t from, int64_t n) {
  float mx = lanes[0];
  for (int l = 1; l < width; ++l) mx = lanes[l] > mx ? lanes[l] : mx;
  for (int64_t v = from; v < n; ++v) mx = row[v] > mx ? row[v] : mx;
  return mx;
}
// The first index in [from, n) holding mx; 0 when none does (every value NaN).
int32_t first_equal(const float* row, int64_t from, int64_t n, float mx) {
  for (int64_t v = from; v < n; ++v)
    if (row[v] == mx) return static_cast<int32_t>(v);
  return 0;
}

// One vector width's two passes: the lanes' running maximum (max_ps keeps its second operand,
// the running one, for a NaN), then the first vector holding the maximum.
__attribute__((target("avx512f"))) int32_t argmax_avx512(const float* row, int64_t n) {
  constexpr __mmask16 kAll = 0xFFFF;  // the masked forms: GCC 12's unmasked ones warn about an undefined source
  __m512 m = _mm512_set1_ps(-INFINITY);
  int64_t v = 0;
  for (; v + 16 <= n; v += 16) m = _mm512_maskz_max_ps(kAll, _mm512_loadu_ps(row + v), m);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  const float mx = largest_of(lanes, 16, row, v, n);
  for (v = 0; v + 16 <= n; v += 16)
    if (const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(row + v), _mm512_set1_ps(mx), _CMP_EQ_OQ)) return static_cast<int32_t>(v + __builtin_ctz(eq));
  return first_equal(row, v, n, mx);
}

__attribute__((target("avx2"))) int32_t argmax_avx2(const float* row, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) m = _mm256_max_ps(_mm256_loadu_ps(row + v), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  const float mx = largest_of(lanes, 8, row, v, n);
  for (v = 0; v + 8 <= n; v += 8)
    if (const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(row + v), _mm256_set1_ps(mx), _CMP_EQ_OQ)))
      return static_cast<int32_t>(v + __builtin_ctz(static_cast<unsigned>(eq)));
  return first_equal(row, v, n, mx);
}
#endif

}  // namespace

int32_t row_argmax(const float* row, int64_t n) {
  if (n <= 1 || std::isnan(row[0])) return 0;
#if AERIE_HAVE_SIMD_ARGMAX
  switch (cpu_isa()) {
    case CpuIsa::kAvx512: return argmax_avx512(row, n);
    case CpuIsa::kAvx2: return argmax_avx2(row, n);
    case CpuIsa::kNone: break;
  }
#endif
  return argmax_scalar(row, n);
}

namespace {

// The largest value t among `probs` such that the values >= t sum to at least top_p: the
// top-p set's smallest probability. Most of the mass sits in a few tokens, so the largest
// 1024 are sorted first and the whole row only when they fall short.
float top_p_threshold(std::vector<float> probs, float top_p) {
  auto walk = [&](size_t n) -> float {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i)
      if ((cum += probs[i]) >= top_p) return probs[i];
    return -1.0f;
  };
  const size_t head = std::min<size_t>(1024, probs.size());
  std::partial_sort(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(head), probs.end(), std::greater<float>());
  const float t = walk(head);
  if (t >= 0.0f) return t;
  std::sort(probs.begin(), probs.end(), std::greater<float>());
  const float all = walk(probs.size());
  return all >= 0.0f ? all : probs.back();  // rounding short of top_p: keep everything
}

}  // namespace

RowFilter row_filter(const float* row, int64_t vocab, float temperature, float top_p, int32_t top_k, float min_p, std::vector<float>& probs) {
  RowFilter f;
  f.argmax = row_argmax(row, vocab);
  f.mx = row[f.argmax];
  if (!(temperature > 0.0f)) return f;
  const float inv_t = 1.0f / temperature;
  probs.resize(static_cast<size_t>(vocab));
  double z = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const float e = std::exp((row[v] - f.mx) * inv_t);
    probs[static_cast<size_t>(v)] = e;
    z += e;
  }
  const float inv_z = static_cast<float>(1.0 / z);
  for (auto& p : probs) p *= inv_z;
  const float p_max = inv_z;  // the argmax's e is 1
  f.tau = min_p * p_max;
  if (top_k > 0 && top_k < vocab) {
    std::vector<float> copy(probs);
    std::nth_element(copy.begin(), copy.begin() + (top_k - 1), copy.end(), std::greater<float>());
    f.tau = std::max(f.tau, copy[static_cast<size_t>(top_k - 1)]);
  }
  if (top_p < 1.0f) f.tau = std::max(f.tau, top_p_threshold(probs, top_p));
  f.tau = std::min(f.tau, p_max);  // the most likely token always survives
  double kept = 0.0;
  for (const float p : probs)
    if (p >= f.tau) kept += p;
  f.kept = static_cast<float>(kept);
  return f;
}

int32_t draw_in_id_order(const std::vector<float>& probs, const RowFilter& f, const std::vector<int32_t>& removed, float u, float left) {
  const float target = u * left;
  double run = 0.0;
  int32_t last = -1;
  for (size_t v = 0; v < probs.size(); ++v) {
    const float p = probs[v];
    if (p < f.tau || std::find(removed.begin(), removed.end(), static_cast<int32_t>(v)) != removed.end()) continue;
    last = static_cast<int32_t>(v);
    run += p;
    if (target < run) return last;
  }
  return last >= 0 ? last : f.argmax;
}

}  // namespace aerie::kernels::cpu
