#pragma once
// Splits [0, n) into contiguous chunks over the machine's cores. Each index is handled by
// exactly one thread in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace aerie::kernels::cpu {

template <class Fn>
void parallel_for(int64_t n, int64_t work_per_item, Fn fn) {
  constexpr int64_t kMinWorkPerThread = 1 << 18;  // below this, threads cost more than they save
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::clamp<int64_t>(n * work_per_item / kMinWorkPerThread, 1, std::min(hw, n));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back([=] { for (int64_t i = begin; i < end; ++i) fn(i); });
  }
  for (auto& th : pool) th.join();
}

}  // namespace aerie::kernels::cpu
