#include "kernels/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/error.hpp"

namespace aerie {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kF8E4M3: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kF8E4M3: return "f8e4m3";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

DType parse_dtype(std::string_view n) {
  if (n == "f32" || n == "float32" || n == "float" || n == "F32") return DType::kF32;
  if (n == "bf16" || n == "bfloat16" || n == "BF16") return DType::kBF16;
  if (n == "f16" || n == "float16" || n == "half" || n == "F16") return DType::kF16;
  if (n == "i32" || n == "int32" || n == "I32") return DType::kI32;
  if (n == "i64" || n == "int64" || n == "I64") return DType::kI64;
  if (n == "u8" || n == "uint8" || n == "U8") return DType::kU8;
  if (n == "f8e4m3" || n == "float8_e4m3fn" || n == "F8_E4M3") return DType::kF8E4M3;
  AERIE_FAIL("unknown dtype '" << n << "' (expected f32, bf16 or f16)");
}

float f16_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) { man <<= 1; --exp; }
      man &= 0x3ffu;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t exp = absx >> 23;
    uint32_t man = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // f16 subnormal unit is 2^-24; value = man * 2^(exp - 150)
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t man = absx & 0x7fffffu;
  uint32_t half = (exp << 10) | (man >> 13);
  uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into exponent: correct
  return static_cast<uint16_t>(sign | half);
}

float f8e4m3_to_float(uint8_t v) {
  const uint32_t sign = (v & 0x80u) << 24, exp = (v >> 3) & 0xfu, man = v & 0x7u;
  if (exp == 0xfu && man == 0x7u) return std::numeric_limits<float>::quiet_NaN();
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(man), -9);  // subnormal: man / 8 * 2^-6
  } else {
    uint32_t bits = ((exp + 127 - 7) << 23) | (man << 20);
    std::memcpy(&mag, &bits, sizeof mag);
  }
  uint32_t bits;
  std::memcpy(&bits, &mag, sizeof bits);
  bits |= sign;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint8_t float_to_f8e4m3(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  if (absx >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448 (and inf): saturate
  if (absx < 0x3c800000u) {  // below 2^-6: subnormal (unit 2^-9) or zero
    // value / 2^-9 rounded to nearest even; 2^-6 itself (8 units) is the smallest normal, 0x08.
    float mag;
    std::memcpy(&mag, &absx, sizeof mag);
    const float units = std::ldexp(mag, 9);   // exact: a power-of-two scaling
    const float r = std::nearbyint(units);    // FE_TONEAREST (ties to even) is the default mode
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(r));
  }
  // Normal: keep 3 mantissa bits, round the 20 dropped ones to nearest even.
  uint32_t exp = (absx >> 23) - 127 + 7, man = absx & 0x7fffffu;
  uint32_t q = (exp << 3) | (man >> 20);
  const uint32_t rem = man & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (q & 1u))) ++q;  // may carry into the exponent: correct
  if (q > 0x7eu) q = 0x7eu;  // rounding up past 448 saturates
  return static_cast<uint8_t>(sign | q);
}

void convert_to_float(const void* src, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::kBF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
      return;
    }
    case DType::kF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(s[i]);
      return;
    }
    case DType::kF8E4M3: {
      auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f8e4m3_to_float(s[i]);
      return;
    }
    default: AERIE_FAIL("convert_to_float: " << dtype_name(t) << " is not a floating dtype");
  }
}

AbsMax abs_max(const float* x, int64_t n) {
  AbsMax m;
  for (int64_t i = 0; i < n; ++i) {
    m.finite = m.finite && std::isfinite(x[i]);
    m.value = std::max(m.value, std::fabs(x[i]));
  }
  return m;
}

}  // namespace aerie
