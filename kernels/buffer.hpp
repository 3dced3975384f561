#pragma once
// Buffer: owning memory for one tensor, on the host or on the GPU.
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/tensor.hpp"

namespace aerie {

class Buffer {
 public:
  Buffer() = default;
  Buffer(Device device, DType dtype, std::initializer_list<int64_t> shape);
  Buffer(Device device, DType dtype, const std::vector<int64_t>& shape);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const TensorView& view() const { return view_; }
  void* data() const { return view_.data; }
  int64_t nbytes() const { return view_.nbytes(); }
  // Fills with zeros (device memset for CUDA buffers).
  void zero();
  // Copies host bytes in / out (cudaMemcpy for CUDA buffers), complete when it returns: work
  // on any stream may read the bytes next.
  void copy_from_host(const void* src, int64_t bytes, int64_t offset_bytes = 0);
  void copy_to_host(void* dst, int64_t bytes, int64_t offset_bytes = 0) const;

 private:
  void allocate(Device device, DType dtype, const std::vector<int64_t>& shape);
  void release();
  TensorView view_;
};

// True when a CUDA device can be used by this process (false without a GPU or CUDA build).
bool cuda_available();

}  // namespace aerie
