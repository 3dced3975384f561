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
    // Each run's gap is to the run before it on its stream, in the order the device began
    // them: two threads may enqueue on one stream at once (the DraftWorker's chain drafted
    // ahead for a request that just ended, the TargetWorker's next prefill), so the order the
    // records were pushed in is not always the stream's.
    gaps->clear();
    std::map<void*, std::vector<std::pair<double, const Record*>>> by_stream;
    for (const Record& r : records) {
      auto& runs = by_stream[r.stream];
      const Record* first = runs.empty() ? &r : runs.front().second;
      const double at = r.begin ? static_cast<double>(cuda_runtime::elapsed_ms(first->begin, r.begin)) : host_ms(first->host_begin, r.host_begin);
      runs.emplace_back(at, &r);
    }
    std::map<std::string, std::vector<double>> between;
    for (auto& [stream, runs] : by_stream) {
      std::stable_sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t i = 1; i < runs.size(); ++i) {
        const Record& before = *runs[i - 1].second;
        const Record& r = *runs[i].second;
        between[before.label + " -> " + r.label].push_back(
            r.begin ? static_cast<double>(cuda_runtime::elapsed_ms(before.end, r.begin)) : host_ms(before.host_end, r.host_begin));
      }
    }
    for (auto& [label, ms] : between) (*gaps)[label] = GraphGap::of(std::move(ms));
  }
  std::lock_guard lock(s.mu);
  for (const Record& r : records)
    if (r.begin) s.spare_events.push_back(r.begin), s.spare_events.push_back(r.end);
  return out;
}

}  // namespace aerie::spec
