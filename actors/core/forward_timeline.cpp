#include "actors/core/forward_timeline.hpp"

#include <utility>

#include "kernels/device_runtime.hpp"

namespace aerie::core {

struct ForwardTimeline::Events {
  void* begin = nullptr;
  void* end = nullptr;
  void* last_end = nullptr;
  Events() : begin(cuda_runtime::create_event()), end(cuda_runtime::create_event()), last_end(cuda_runtime::create_event()) {}
  ~Events() {
    cuda_runtime::destroy_event(begin);
    cuda_runtime::destroy_event(end);
    cuda_runtime::destroy_event(last_end);
  }
};

ForwardTimeline::ForwardTimeline(Device device, std::chrono::milliseconds max_gap)
    : device_(device), max_gap_s_(std::chrono::duration<double>(max_gap).count()) {
  if (device_ == Device::kCuda) events_ = std::make_unique<Events>();
}

ForwardTimeline::~ForwardTimeline() = default;

void ForwardTimeline::begin(const Stream& stream) {
  if (events_) cuda_runtime::record_event(events_->begin, stream.handle());
  else begin_ = std::chrono::steady_clock::now();
}

ForwardTimes ForwardTimeline::end(const Stream& stream) {
  ForwardTimes t;
  double gap = 0;
  if (events_) {
    cuda_runtime::record_event(events_->end, stream.handle());
    t.forward_seconds = cuda_runtime::elapsed_ms(events_->begin, events_->end) / 1e3;
    if (has_last_) gap = cuda_runtime::elapsed_ms(events_->last_end, events_->begin) / 1e3;
    std::swap(events_->end, events_->last_end);
  } else {
    const auto now = std::chrono::steady_clock::now();
    t.forward_seconds = std::chrono::duration<double>(now - begin_).count();
    if (has_last_) gap = std::chrono::duration<double>(begin_ - last_end_).count();
    last_end_ = now;
  }
  t.gap_seconds = gap <= max_gap_s_ ? gap : 0;
  has_last_ = true;
  return t;
}

}  // namespace aerie::core
