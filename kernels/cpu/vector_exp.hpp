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

// The constants, shared with the vector forms that must give vector_exp's bits (silu_mul.cpp).
namespace exp_poly {
constexpr float kMin = -87.3f, kMax = 88.3f;              // the clamp
constexpr float kLog2e = 1.44269504088896341f;            // n = floor(x log2(e) + 1/2)
constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;  // ln 2 in two parts: r = x - n Hi - n Lo
constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f, kP3 = 4.1665795894e-2f,
                kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;  // e^r = ((((P0 r + P1) r + P2) r + P3) r + P4) r + P5) r^2 + r + 1
}  // namespace exp_poly

inline float vector_exp(float x) {
  using namespace exp_poly;
  x = std::min(std::max(x, kMin), kMax);
  const float n = std::floor(x * kLog2e + 0.5f);
  float r = x - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  const float er = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return er * scale;
}

}  // namespace aerie::kernels::cpu
