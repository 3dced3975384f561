#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/error.hpp"

using namespace aerie;

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 lies halfway between two bf16 values: ties go to the even one (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_f16(f), h) << "half bits " << h;
  }
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(1e6f), 0x7c00);  // overflow to inf
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -26)), 0x0000);
}

TEST(DType, F16RoundingMatchesNearestEven) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 20000; ++i) {
    const float f = u(rng) * (i % 2 ? 1e-5f : 1.0f);
    const uint16_t h = float_to_f16(f);
    const float back = f16_to_float(h);
    if (std::isinf(back)) continue;
    // No other half value is closer to f.
    const float up = f16_to_float(static_cast<uint16_t>(h + 1)), down = f16_to_float(static_cast<uint16_t>(h - 1));
    EXPECT_LE(std::fabs(back - f), std::fabs(up - f) + 0.0f) << f;
    if ((h & 0x7fff) != 0) {
      EXPECT_LE(std::fabs(back - f), std::fabs(down - f)) << f;
    }
  }
}

TEST(DType, F8E4M3KnownValues) {
  EXPECT_EQ(f8e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(f8e4m3_to_float(0xb8), -1.0f);
  EXPECT_EQ(f8e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f8e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(f8e4m3_to_float(0x7e), 448.0f);
  EXPECT_TRUE(std::isnan(f8e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(f8e4m3_to_float(0xff)));
  EXPECT_EQ(float_to_f8e4m3(1.0f + 1.0f / 16), 0x38);  // a tie goes to the even code
  EXPECT_EQ(float_to_f8e4m3(1.0f + 3.0f / 16), 0x3a);
  EXPECT_EQ(float_to_f8e4m3(std::ldexp(0.5f, -9)), 0x00);
  EXPECT_EQ(float_to_f8e4m3(std::ldexp(1.5f, -9)), 0x02);
  EXPECT_EQ(float_to_f8e4m3(1e6f), 0x7e);  // saturates
  EXPECT_EQ(float_to_f8e4m3(-std::numeric_limits<float>::infinity()), 0xfe);
  EXPECT_EQ(float_to_f8e4m3(std::numeric_limits<float>::quiet_NaN()) & 0x7f, 0x7f);
}

TEST(DType, F8E4M3RoundTripsEveryCodeAndRoundsToTheNearest) {
  std::vector<float> finite;  // the non-negative finite values, in code order
  for (uint32_t c = 0; c < 256; ++c) {
    const float f = f8e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(f)) continue;
    if (f == 0.0f && c == 0x80) continue;  // -0 encodes as itself
    EXPECT_EQ(float_to_f8e4m3(f), c) << "code " << c;
    if (c < 0x80) finite.push_back(f);
  }
  ASSERT_EQ(finite.size(), 127u);
  // Against a brute-force oracle: the nearest code, ties to the even code, capped at 448.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int i = 0; i < 20000; ++i) {
    const float f = std::ldexp(u(rng), static_cast<int>(rng() % 20) - 11);
    size_t best = 0;
    for (size_t c = 1; c < finite.size(); ++c) {
      const float d = std::fabs(finite[c] - f), db = std::fabs(finite[best] - f);
      if (d < db || (d == db && c % 2 == 0)) best = c;
    }
    EXPECT_EQ(float_to_f8e4m3(f), best) << f;
    EXPECT_EQ(float_to_f8e4m3(-f), best | 0x80u) << -f;
  }
}

TEST(DType, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_THROW(parse_dtype("float64"), Error);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
}
