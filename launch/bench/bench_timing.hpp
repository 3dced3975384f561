#pragma once
// Timing helpers the benchmarks share: wall clock, and device time from CUDA events.
#include <algorithm>
#include <chrono>
#include <functional>
#include <numeric>
#include <vector>

#include "kernels/stream.hpp"

namespace aerie::launch::bench {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The arithmetic mean; 0 for none.
inline double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The device time of fn(r) for r in [0, reps), each between two CUDA events on stream s,
// after `warmup` untimed calls fn(0) .. fn(warmup - 1). Milliseconds, in run order.
std::vector<double> stream_times_ms(const Stream& s, int reps, int warmup, const std::function<void(int)>& fn);

}  // namespace aerie::launch::bench
