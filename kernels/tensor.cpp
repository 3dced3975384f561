#include "kernels/tensor.hpp"

#include <sstream>

#include "kernels/error.hpp"

namespace aerie {

const char* device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda" || name == "gpu") return Device::kCuda;
  AERIE_FAIL("unknown device '" << name << "' (expected cpu or cuda)");
}

TensorView::TensorView(void* d, DType t, std::initializer_list<int64_t> dims, Device dev)
    : data(d), dtype(t), device(dev), ndim(static_cast<int>(dims.size())) {
  AERIE_CHECK(dims.size() <= kMaxDims, "tensor rank " << dims.size() << " exceeds " << kMaxDims);
  size_t i = 0;
  for (int64_t x : dims) shape[i++] = x;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

TensorView TensorView::slice_rows(int64_t begin, int64_t end) const {
  AERIE_CHECK(ndim >= 1 && begin >= 0 && begin <= end && end <= shape[0],
              "slice_rows [" << begin << ", " << end << ") out of range for " << describe());
  TensorView v = *this;
  int64_t row = numel() / (shape[0] == 0 ? 1 : shape[0]);
  v.data = static_cast<char*>(data) + begin * row * static_cast<int64_t>(dtype_size(dtype));
  v.shape[0] = end - begin;
  return v;
}

TensorView TensorView::reshape(std::initializer_list<int64_t> dims) const {
  TensorView v(data, dtype, dims, device);
  AERIE_CHECK(v.numel() == numel(), "reshape of " << describe() << " changes the element count");
  return v;
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[static_cast<size_t>(i)];
  os << "] " << device_name(device);
  return os.str();
}

void check_tensor(const TensorView& t, const char* field, int ndim, Device device) {
  AERIE_CHECK(t.defined(), field << " is not set");
  AERIE_CHECK(t.ndim == ndim, field << " must have " << ndim << " dims, got " << t.describe());
  AERIE_CHECK(t.device == device, field << " is on " << device_name(t.device) << ", expected "
                                        << device_name(device));
}

void check_dtype(const TensorView& t, const char* field, DType dtype) {
  AERIE_CHECK(t.dtype == dtype, field << " must be " << dtype_name(dtype) << ", got " << t.describe());
}

void check_floating(const TensorView& t, const char* field) {
  AERIE_CHECK(is_floating(t.dtype), field << " must be f32, bf16 or f16, got " << t.describe());
}

}  // namespace aerie
