#include "kernels/buffer.hpp"

#include <cstdlib>
#include <cstring>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

namespace aerie {

namespace {
constexpr size_t kHostAlignment = 64;
}

Buffer::Buffer(Device device, DType dtype, std::initializer_list<int64_t> shape) {
  allocate(device, dtype, std::vector<int64_t>(shape));
}
Buffer::Buffer(Device device, DType dtype, const std::vector<int64_t>& shape) {
  allocate(device, dtype, shape);
}
Buffer::~Buffer() { release(); }
Buffer::Buffer(Buffer&& o) noexcept : view_(o.view_) { o.view_ = TensorView(); }
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    view_ = o.view_;
    o.view_ = TensorView();
  }
  return *this;
}

void Buffer::allocate(Device device, DType dtype, const std::vector<int64_t>& shape) {
  AERIE_CHECK(shape.size() <= kMaxDims, "buffer rank " << shape.size() << " exceeds " << kMaxDims);
  view_.dtype = dtype;
  view_.device = device;
  view_.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    AERIE_CHECK(shape[i] >= 0, "negative buffer dimension " << shape[i]);
    view_.shape[i] = shape[i];
  }
  size_t bytes = static_cast<size_t>(view_.nbytes());
  size_t alloc = bytes == 0 ? kHostAlignment : bytes;  // a defined view even when empty
  if (device == Device::kCpu) {
    alloc = (alloc + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
    view_.data = std::aligned_alloc(kHostAlignment, alloc);
    AERIE_CHECK(view_.data != nullptr, "out of host memory allocating " << bytes << " bytes");
  } else {
    view_.data = cuda_runtime::malloc_device(alloc);
  }
}

void Buffer::release() {
  if (!view_.data) return;
  if (view_.device == Device::kCpu) std::free(view_.data);
  else cuda_runtime::free_device(view_.data);
  view_.data = nullptr;
}

void Buffer::zero() {
  if (view_.device == Device::kCpu) std::memset(view_.data, 0, static_cast<size_t>(nbytes()));
  else cuda_runtime::memset_device(view_.data, 0, static_cast<size_t>(nbytes()));
}

void Buffer::copy_from_host(const void* src, int64_t bytes, int64_t off) {
  AERIE_CHECK(off >= 0 && bytes >= 0 && off + bytes <= nbytes(), "copy_from_host out of range");
  char* dst = static_cast<char*>(view_.data) + off;
  if (view_.device == Device::kCpu) std::memcpy(dst, src, static_cast<size_t>(bytes));
  else cuda_runtime::copy_host_to_device(dst, src, static_cast<size_t>(bytes));
}

void Buffer::copy_to_host(void* dst, int64_t bytes, int64_t off) const {
  AERIE_CHECK(off >= 0 && bytes >= 0 && off + bytes <= nbytes(), "copy_to_host out of range");
  const char* src = static_cast<const char*>(view_.data) + off;
  if (view_.device == Device::kCpu) std::memcpy(dst, src, static_cast<size_t>(bytes));
  else cuda_runtime::copy_device_to_host(dst, src, static_cast<size_t>(bytes));
}

bool cuda_available() { return cuda_runtime::available(); }

}  // namespace aerie
