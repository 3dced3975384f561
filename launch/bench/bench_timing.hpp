#pragma once
// Wall-clock helpers the benchmarks share.
#include <algorithm>
#include <chrono>
#include <vector>

namespace aerie::launch::bench {

using Clock = std::chrono::steady_clock;
inline double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
// The middle value (the upper one of an even count); 0 for none.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace aerie::launch::bench
