#pragma once
// Element types of tensors: f32, bf16, f16 for values; i32, i64, u8 for ids and masks; f8e4m3
// (OCP FP8 E4M3, torch.float8_e4m3fn) only as the storage of quantized weights, which carry a
// scale per output row beside them (kernels/matmul.hpp).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace aerie {

enum class DType : uint8_t { kF32, kBF16, kF16, kI32, kI64, kU8, kF8E4M3 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", ...
bool is_floating(DType t);  // f32, bf16, f16: what ops compute on (not f8e4m3)
// Parses our own names and the usual aliases ("float32", "bfloat16", "float16", "half").
DType parse_dtype(std::string_view name);

// Conversions with round-to-nearest-even, matching torch's .to(bfloat16) / .to(float16).
inline float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float f16_to_float(uint16_t v);
uint16_t float_to_f16(float f);
// FP8 E4M3 (finite-only: 0x7f / 0xff are NaN, the largest finite value is 448), as CUDA's
// __nv_cvt_float_to_fp8(..., __NV_SATFINITE, __NV_E4M3): round to nearest even, magnitudes
// past 448 saturate to 448, NaN stays NaN. torch's .to(torch.float8_e4m3fn) gives the same
// bytes up to 464 (past it torch answers NaN); per-row scaling keeps weights within 448.
float f8e4m3_to_float(uint8_t v);
uint8_t float_to_f8e4m3(float f);
constexpr float kF8E4M3Max = 448.0f;

// Reads element i of a buffer of floating dtype t as float. Through memcpy: a buffer may sit
// at any byte offset (a safetensors tensor after an odd-sized one is not aligned to its dtype),
// and the compiler turns it into the same plain load.
template <class T>
inline T load_unaligned(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <class T>
inline void store_unaligned(void* data, int64_t i, T v) {
  std::memcpy(static_cast<char*>(data) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}
inline float load_as_float(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return load_unaligned<float>(data, i);
    case DType::kBF16: return bf16_to_float(load_unaligned<uint16_t>(data, i));
    case DType::kF16: return f16_to_float(load_unaligned<uint16_t>(data, i));
    case DType::kF8E4M3: return f8e4m3_to_float(static_cast<const uint8_t*>(data)[i]);
    default: return 0.0f;
  }
}
inline void store_from_float(void* data, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: store_unaligned<float>(data, i, v); break;
    case DType::kBF16: store_unaligned<uint16_t>(data, i, float_to_bf16(v)); break;
    case DType::kF16: store_unaligned<uint16_t>(data, i, float_to_f16(v)); break;
    case DType::kF8E4M3: static_cast<uint8_t*>(data)[i] = float_to_f8e4m3(v); break;
    default: break;
  }
}
// Converts n elements of a floating dtype (or f8e4m3) to float.
void convert_to_float(const void* src, DType t, int64_t n, float* dst);

// The largest |x[i]| of n floats, and whether all of them are finite (a NaN never wins the
// maximum): what the quantizers scale a block or row by, and refuse.
struct AbsMax {
  float value = 0.0f;
  bool finite = true;
};
AbsMax abs_max(const float* x, int64_t n);

}  // namespace aerie
