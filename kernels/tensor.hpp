#pragma once
// TensorView: a non-owning, contiguous, row-major view of device or host memory.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernels/dtype.hpp"

namespace aerie {

enum class Device : uint8_t { kCpu, kCuda };
const char* device_name(Device d);
Device parse_device(const std::string& name);  // "cpu" | "cuda"

constexpr int kMaxDims = 4;

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};

  TensorView() = default;
  TensorView(void* d, DType t, std::initializer_list<int64_t> dims, Device dev = Device::kCpu);

  bool defined() const { return data != nullptr; }
  int64_t dim(int i) const { return shape[static_cast<size_t>(i < 0 ? ndim + i : i)]; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * static_cast<int64_t>(dtype_size(dtype)); }
  template <class T>
  T* ptr() const { return static_cast<T*>(data); }
  // Rows [begin, end) of the first dimension.
  TensorView slice_rows(int64_t begin, int64_t end) const;
  // Same memory seen with another shape of equal element count.
  TensorView reshape(std::initializer_list<int64_t> dims) const;
  std::string describe() const;  // "bf16[4, 128] cuda"
};

// Checks used by Params::validate(): throw aerie::Error naming the field.
void check_tensor(const TensorView& t, const char* field, int ndim, Device device);
void check_dtype(const TensorView& t, const char* field, DType dtype);
void check_floating(const TensorView& t, const char* field);

}  // namespace aerie
