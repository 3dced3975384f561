#pragma once
// exp(x) for f32 written so that the compiler vectorises loops over it (libm's expf is a
// call per element): Cody-Waite reduction x = n ln2 + r, |r| <= ln2 / 2, Cephes' degree-6
// polynomial for e^r (about 1 ulp), 2^n put into the exponent bits. x is clamped to
// [-87.3, 88.3], where the result stays a normal float: below, it returns e^-87.3 (~1e-38)
// instead of a denormal or 0, which no caller (softmax weights, SiLU) can tell apart.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace aerie::kernels::cpu {

inline float vector_exp(float x) {
  x = std::min(std::max(x, -87.3f), 88.3f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return er * scale;
}

}  // namespace aerie::kernels::cpu
