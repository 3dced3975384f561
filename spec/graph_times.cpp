#include "spec/graph_times.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#include "kernels/device_runtime.hpp"

namespace aerie::spec {

namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  std::string label;
  void* stream = nullptr;  // the stream's handle: gaps are taken between runs on one stream
  void* begin = nullptr;   // CUDA events, or null on the CPU
  void* end = nullptr;
  Clock::time_point host_begin, host_end;  // the CPU's clock, the device there
};

double host_ms(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double, std::milli>(to - from).count(); }

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

GraphGap GraphGap::of(std::vector<double> ms) {
  GraphGap g{.count = static_cast<int64_t>(ms.size()), .mean_ms = 0, .median_ms = 0};
  if (ms.empty()) return g;
  for (double x : ms) g.mean_ms += x;
  g.mean_ms /= static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  g.median_ms = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  return g;
}

void GraphTimes::enable(bool on) { g_enabled.store(on); }

bool GraphTimes::enabled() { return g_enabled.load(); }

void GraphTimes::run(const std::string& label, const Stream& stream, const std::function<void()>& fn) {
  if (!enabled()) {
    fn();
    return;
  }
  State& s = state();
  Record r{.label = label, .stream = stream.handle()};
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
    r.host_begin = Clock::now();
    fn();
    r.host_end = Clock::now();
  }
  std::lock_guard lock(s.mu);
  s.records.push_back(std::move(r));
}

std::map<std::string, GraphTime> GraphTimes::collect(std::map<std::string, GraphGap>* gaps) {
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
    t.ms += r.begin ? static_cast<double>(cuda_runtime::elapsed_ms(r.begin, r.end)) : host_ms(r.host_begin, r.host_end);
  }
  if (gaps) {
    // Records are pushed in the order their work was enqueued (a stream runs it in that
    // order); each run's gap is to the run before it on its stream.
    gaps->clear();
    std::map<void*, const Record*> last;
    std::map<std::string, std::vector<double>> between;
    for (const Record& r : records) {
      const Record*& before = last[r.stream];
      if (before)
        between[before->label + " -> " + r.label].push_back(
            r.begin ? static_cast<double>(cuda_runtime::elapsed_ms(before->end, r.begin)) : host_ms(before->host_end, r.host_begin));
      before = &r;
    }
    for (auto& [label, ms] : between) (*gaps)[label] = GraphGap::of(std::move(ms));
  }
  std::lock_guard lock(s.mu);
  for (const Record& r : records)
    if (r.begin) s.spare_events.push_back(r.begin), s.spare_events.push_back(r.end);
  return out;
}

}  // namespace aerie::spec
