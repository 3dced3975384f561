#include "kernels/cpu/thread_budget.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace aerie::kernels::cpu {

int64_t thread_budget() {
  static const int64_t budget = [] {
    const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int64_t ranks = local ? std::max<int64_t>(1, std::atoll(local)) : 1;
    return std::max<int64_t>(1, hw / ranks);
  }();
  return budget;
}

}  // namespace aerie::kernels::cpu
