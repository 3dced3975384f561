#include "launch/bench/bench_timing.hpp"

#include "kernels/device_runtime.hpp"

namespace aerie::launch::bench {

std::vector<double> stream_times_ms(const Stream& s, int reps, int warmup, const std::function<void(int)>& fn) {
  for (int i = 0; i < warmup; ++i) fn(i);
  void* e0 = cuda_runtime::create_event();
  void* e1 = cuda_runtime::create_event();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    cuda_runtime::record_event(e0, s.handle());
    fn(r);
    cuda_runtime::record_event(e1, s.handle());
    times.push_back(cuda_runtime::elapsed_ms(e0, e1));
  }
  cuda_runtime::destroy_event(e0);
  cuda_runtime::destroy_event(e1);
  return times;
}

}  // namespace aerie::launch::bench
