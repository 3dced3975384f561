#pragma once
// ForwardTimeline: how long each batch kept a worker's device busy and how long the device
// stood idle since the previous batch ended: the "GPU idle between forwards" that overlap
// scheduling exists to remove (issue #15). On CUDA both come from events on the worker's
// stream (the device's clock: begin() before the batch's first copy, end() after its tokens
// came back); on the CPU from the host clock, which is the device there. A gap longer than
// `max_gap` counts as a time without work, not as idle time between forwards.
#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "kernels/stream.hpp"

namespace aerie::core {

struct ForwardTimes {
  double forward_seconds = 0;  // begin() to end()
  double gap_seconds = 0;      // the previous end() to this begin() (0 for the first, or past max_gap)
};

class ForwardTimeline {
 public:
  explicit ForwardTimeline(Device device, std::chrono::milliseconds max_gap = std::chrono::milliseconds(100));
  ~ForwardTimeline();
  ForwardTimeline(const ForwardTimeline&) = delete;
  ForwardTimeline& operator=(const ForwardTimeline&) = delete;
  // Before a batch's first copy is enqueued.
  void begin(const Stream& stream);
  // After the batch's work was enqueued (overlap scheduling: the next batch may begin before
  // this one's work has run).
  void mark_end(const Stream& stream);
  // The times of the oldest marked batch not collected yet; waits until its work has run.
  ForwardTimes collect();
  // The summed times of up to `most` of the oldest marked batches whose work has run, in order,
  // without waiting (a batch answered from the host before the device work enqueued behind it
  // ran: its times come with a later batch's); sets `collected` to how many.
  ForwardTimes collect_done(size_t most, size_t& collected);
  // mark_end and collect: a batch whose work was waited for.
  ForwardTimes end(const Stream& stream) {
    mark_end(stream);
    return collect();
  }

 private:
  struct Events;
  struct Batch {
    std::unique_ptr<Events> events;  // CUDA: begin and end
    std::chrono::steady_clock::time_point begin, end;  // CPU
  };
  Device device_;
  double max_gap_s_;
  std::deque<Batch> batches_;  // begun or marked, not collected, oldest first
  std::vector<std::unique_ptr<Events>> spare_;
  std::unique_ptr<Events> last_;  // the last collected batch's events (its end starts the next gap)
  std::chrono::steady_clock::time_point last_end_;
  bool has_last_ = false;
};

}  // namespace aerie::core
