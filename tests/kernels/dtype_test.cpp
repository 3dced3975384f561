#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

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

TEST(DType, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_THROW(parse_dtype("float64"), Error);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
}
