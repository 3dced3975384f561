#include "kernels/staging.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/device_runtime.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"

namespace aerie {

HostStaging::HostStaging(Device device, size_t bytes) : bytes_(bytes) {
  const size_t alloc = (bytes + 63) / 64 * 64 + 64;
  if (device == Device::kCuda) {
    data_ = cuda_runtime::malloc_host_pinned(alloc);
    pinned_ = true;
  } else {
    data_ = std::aligned_alloc(64, alloc);
    AERIE_CHECK(data_, "out of host memory allocating " << bytes << " bytes");
  }
}
HostStaging::~HostStaging() { release(); }
HostStaging::HostStaging(HostStaging&& o) noexcept : data_(o.data_), bytes_(o.bytes_), pinned_(o.pinned_) { o.data_ = nullptr; }
HostStaging& HostStaging::operator=(HostStaging&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_;
    bytes_ = o.bytes_;
    pinned_ = o.pinned_;
    o.data_ = nullptr;
  }
  return *this;
}
void HostStaging::release() {
  if (!data_) return;
  if (pinned_) cuda_runtime::free_host_pinned(data_);
  else std::free(data_);
  data_ = nullptr;
}

StreamEvent::StreamEvent(Device device) {
  if (device == Device::kCuda) event_ = cuda_runtime::create_event();
}
StreamEvent::~StreamEvent() {
  if (event_) cuda_runtime::destroy_event(event_);
}
StreamEvent::StreamEvent(StreamEvent&& o) noexcept : event_(o.event_), recorded_(o.recorded_) { o.event_ = nullptr; }
StreamEvent& StreamEvent::operator=(StreamEvent&& o) noexcept {
  if (this != &o) {
    if (event_) cuda_runtime::destroy_event(event_);
    event_ = o.event_;
    recorded_ = o.recorded_;
    o.event_ = nullptr;
  }
  return *this;
}
void StreamEvent::record(const Stream& stream) {
  if (!event_) return;
  AERIE_CHECK(stream.device() == Device::kCuda, "a CUDA event recorded on a CPU stream");
  cuda_runtime::record_event(event_, stream.handle());
  recorded_ = true;
}
void StreamEvent::wait() const {
  if (event_ && recorded_) cuda_runtime::event_synchronize(event_);
}
void StreamEvent::wait_in(const Stream& stream) const {
  if (event_ && recorded_ && stream.device() == Device::kCuda) cuda_runtime::stream_wait_event(stream.handle(), event_);
}
bool StreamEvent::done() const { return !event_ || !recorded_ || cuda_runtime::event_done(event_); }

StagingRing::StagingRing(Device device, size_t bytes, int count) : bytes_(bytes) {
  buffers_.reserve(static_cast<size_t>(count));
  AERIE_CHECK(count >= 1, "a staging ring needs at least one buffer");
  for (int i = 0; i < count; ++i) {
    buffers_.emplace_back(device, bytes);
    std::memset(buffers_.back().data(), 0, bytes);  // parts an upload leaves unwritten copy as zeros
    copied_.emplace_back(device);
  }
}
void* StagingRing::acquire() {
  AERIE_CHECK(!buffers_.empty(), "staging ring used before it was made");
  copied_[next_].wait();
  return buffers_[next_].data();
}
void StagingRing::release(const Stream& stream) {
  AERIE_CHECK(!buffers_.empty(), "staging ring used before it was made");
  copied_[next_].record(stream);
  next_ = (next_ + 1) % buffers_.size();
}

void copy_async(void* dst, const void* src, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  if (stream.device() == Device::kCpu) std::memcpy(dst, src, bytes);
  else cuda_runtime::copy_async(dst, src, bytes, stream.handle());
}

void copy_rows_async(void* dst, size_t dst_stride, const void* src, size_t src_stride, size_t row_bytes, size_t rows,
                     const Stream& stream) {
  if (rows == 0 || row_bytes == 0) return;
  if (stream.device() == Device::kCuda) return cuda_runtime::copy_2d_async(dst, dst_stride, src, src_stride, row_bytes, rows, stream.handle());
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dst_stride, static_cast<const char*>(src) + r * src_stride, row_bytes);
}

void synchronize(const Stream& stream) {
  if (stream.device() == Device::kCuda) cuda_runtime::synchronize(stream.handle());
}

void zero_async(const TensorView& t, const Stream& stream) {
  if (t.nbytes() == 0) return;
  if (stream.device() == Device::kCpu) std::memset(t.data, 0, static_cast<size_t>(t.nbytes()));
  else cuda_runtime::memset_async(t.data, 0, static_cast<size_t>(t.nbytes()), stream.handle());
}

TensorView upload_ints(Buffer& buffer, std::span<const int32_t> values, const Stream& stream, int64_t min_capacity) {
  const auto n = static_cast<int64_t>(values.size());
  if (!buffer.data() || buffer.view().numel() < n || buffer.view().dtype != DType::kI32)
    buffer = Buffer(stream.device(), DType::kI32, {std::max(n, min_capacity)});
  copy_async(buffer.data(), values.data(), values.size() * sizeof(int32_t), stream);
  return TensorView(buffer.data(), DType::kI32, {n}, stream.device());
}

OwnedStream::OwnedStream(Device device)
    : stream_(device == Device::kCpu ? Stream::cpu() : Stream::cuda(cuda_runtime::create_stream())) {}
OwnedStream::~OwnedStream() {
  if (stream_.device() == Device::kCuda) cuda_runtime::destroy_stream(stream_.handle());
}

SideCopyStream::SideCopyStream(const Stream& main) : main_(main), read_(main.device()), copied_(main.device()) {
  if (main.device() == Device::kCuda && kernels::env_knob_or("AERIE_SIDE_COPIES", 1) != 0) side_ = std::make_unique<OwnedStream>(Device::kCuda);
}

const Stream& SideCopyStream::begin() {
  if (!side_) return main_;
  read_.wait_in(side_->get());
  return side_->get();
}

void SideCopyStream::end() {
  if (!side_) return;
  copied_.record(side_->get());
  copied_.wait_in(main_);
}

void SideCopyStream::mark() {
  if (side_) read_.record(main_);
}

ReadBackBeside::ReadBackBeside(const Stream& main) : device_(main.device()), side_(main), copied_(main.device()) {}

void ReadBackBeside::copy(const void* src, size_t bytes) {
  if (host_.size() < bytes) host_ = HostStaging(device_, bytes);
  const Stream& out = side_.begin();
  copy_async(host_.data(), src, bytes, out);
  copied_.record(out);
}

}  // namespace aerie
