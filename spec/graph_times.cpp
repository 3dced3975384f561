#include "spec/graph_times.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "kernels/device_runtime.hpp"

namespace aerie::spec {

namespace {

struct Record {
  std::string label;
  void* begin = nullptr;  // CUDA events, or null on the CPU
  void* end = nullptr;
  double host_ms = 0;  // the CPU's time
};

struct State {
  std::mutex mu;
  std::vector<Record> records;
  std::vector<void*> spare_events;
  void* event() {
    if (spare_events.empty()) return cuda_runtime::create_event();
    void* e = spare_events.back();
    spare_events.pop_back();
    return e;
  }
};

std::atomic<bool> g_enabled{false};

State& state() {
  static State s;  // events are returned to the pool, never destroyed: the process ends first
  return s;
}

}  // namespace

void GraphTimes::enable(bool on) { g_enabled.store(on); }

bool GraphTimes::enabled() { return g_enabled.load(); }

void GraphTimes::run(const std::string& label, const Stream& stream, const std::function<void()>& fn) {
  if (!enabled()) {
    fn();
    return;
  }
  State& s = state();
  Record r{.label = label};
  if (stream.device() == Device::kCuda) {
    {
      std::lock_guard lock(s.mu);
      r.begin = s.event();
      r.end = s.event();
    }
    cuda_runtime::record_event(r.begin, stream.handle());
    fn();
    cuda_runtime::record_event(r.end, stream.handle());
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    r.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::lock_guard lock(s.mu);
  s.records.push_back(std::move(r));
}

std::map<std::string, GraphTime> GraphTimes::collect() {
  State& s = state();
  std::vector<Record> records;
  {
    std::lock_guard lock(s.mu);
    records.swap(s.records);
  }
  std::map<std::string, GraphTime> out;
  for (const Record& r : records) {
    GraphTime& t = out[r.label];
    t.runs += 1;
    t.ms += r.begin ? static_cast<double>(cuda_runtime::elapsed_ms(r.begin, r.end)) : r.host_ms;
  }
  std::lock_guard lock(s.mu);
  for (const Record& r : records)
    if (r.begin) s.spare_events.push_back(r.begin), s.spare_events.push_back(r.end);
  return out;
}

}  // namespace aerie::spec
