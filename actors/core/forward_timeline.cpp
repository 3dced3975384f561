#include "actors/core/forward_timeline.hpp"

#include <utility>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

namespace aerie::core {

struct ForwardTimeline::Events {
  void* begin = nullptr;
  void* end = nullptr;
  Events() : begin(cuda_runtime::create_event()), end(cuda_runtime::create_event()) {}
  ~Events() {
    cuda_runtime::destroy_event(begin);
    cuda_runtime::destroy_event(end);
  }
};

ForwardTimeline::ForwardTimeline(Device device, std::chrono::milliseconds max_gap)
    : device_(device), max_gap_s_(std::chrono::duration<double>(max_gap).count()) {}

ForwardTimeline::~ForwardTimeline() = default;

void ForwardTimeline::begin(const Stream& stream) {
  Batch b;
  if (device_ == Device::kCuda) {
    if (spare_.empty()) spare_.push_back(std::make_unique<Events>());
    b.events = std::move(spare_.back());
    spare_.pop_back();
    cuda_runtime::record_event(b.events->begin, stream.handle());
  } else {
    b.begin = std::chrono::steady_clock::now();
  }
  batches_.push_back(std::move(b));
}

void ForwardTimeline::mark_end(const Stream& stream) {
  AERIE_CHECK(!batches_.empty(), "forward timeline: mark_end without begin");
  Batch& b = batches_.back();
  if (b.events) cuda_runtime::record_event(b.events->end, stream.handle());
  else b.end = std::chrono::steady_clock::now();  // the CPU ran the work as it was enqueued
}

ForwardTimes ForwardTimeline::collect() {
  AERIE_CHECK(!batches_.empty(), "forward timeline: nothing to collect");
  Batch b = std::move(batches_.front());
  batches_.pop_front();
  ForwardTimes t;
  double gap = 0;
  if (b.events) {
    t.forward_seconds = cuda_runtime::elapsed_ms(b.events->begin, b.events->end) / 1e3;
    if (has_last_) gap = cuda_runtime::elapsed_ms(last_->end, b.events->begin) / 1e3;
    if (last_) spare_.push_back(std::move(last_));
    last_ = std::move(b.events);
  } else {
    t.forward_seconds = std::chrono::duration<double>(b.end - b.begin).count();
    if (has_last_) gap = std::chrono::duration<double>(b.begin - last_end_).count();
    last_end_ = b.end;
  }
  // A batch begun before the last one ended (enqueued ahead) has no idle gap before it.
  t.gap_seconds = gap > 0 && gap <= max_gap_s_ ? gap : 0;
  has_last_ = true;
  return t;
}

ForwardTimes ForwardTimeline::collect_done(size_t most, size_t& collected) {
  ForwardTimes sum;
  collected = 0;
  while (collected < most && !batches_.empty()) {
    const Batch& b = batches_.front();
    if (b.events && !cuda_runtime::event_done(b.events->end)) break;
    const ForwardTimes t = collect();
    sum.forward_seconds += t.forward_seconds;
    sum.gap_seconds += t.gap_seconds;
    ++collected;
  }
  return sum;
}

}  // namespace aerie::core
