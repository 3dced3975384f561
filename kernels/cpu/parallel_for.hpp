#pragma once
// Splits [0, n) into contiguous chunks over the process's share of the cores (thread_budget).
// Each index is handled by exactly one thread in a fixed order, so results do not depend on
// the thread count. With OpenMP (the build with oneDNN has it) the chunks run on OpenMP's
// pool, the same threads oneDNN's products use: no thread is started per op, and no idle
// OpenMP worker spins on a core that a thread of ours needs.
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_budget.hpp"

namespace aerie::kernels::cpu {

template <class Fn>
void parallel_for(int64_t n, int64_t work_per_item, Fn fn) {
  constexpr int64_t kMinWorkPerThread = 1 << 16;  // below this, threads cost more than they save
  const int64_t threads = std::clamp<int64_t>(n * work_per_item / kMinWorkPerThread, 1, std::min(thread_budget(), n));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(static)
  for (int64_t i = 0; i < n; ++i) fn(i);
#else
  std::vector<std::thread> pool;
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = t * chunk, end = std::min(n, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back([=] { for (int64_t i = begin; i < end; ++i) fn(i); });
  }
  for (auto& th : pool) th.join();
#endif
}

}  // namespace aerie::kernels::cpu
