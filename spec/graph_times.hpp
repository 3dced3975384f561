#pragma once
// GraphTimes: how long the device spent in each graph runner's work (decode, verify, draft
// chain, draft tree, draft extend), for aerie-bench speculative: a round's wall time minus
// these is the time the device was idle or ran work outside the runners (uploads, host
// round trips), which is what a round kept on the device would win back. Off unless a bench
// turns it on (it records two events around every run). On CUDA the times come from events
// on the runner's stream (a run enqueued behind other work is timed from when the stream
// reaches it), on the CPU from the host clock, which is the device there.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kernels/stream.hpp"

namespace aerie::spec {

struct GraphTime {
  int64_t runs = 0;
  double ms = 0;  // summed over the runs
};

// The device's time between one runner's work and the next runner's on the same stream
// ("verify -> draft extend"): idle time, or work outside the runners (uploads, eager kernels,
// prefills), which is what keeping a round on the device would win back. The median says
// what a typical round waits; the mean also carries the rare prefill between two runners.
struct GraphGap {
  int64_t count = 0;
  double mean_ms = 0;
  double median_ms = 0;
  // Of these gaps (ms): the middle one (the mean of the two middle ones for an even count).
  static GraphGap of(std::vector<double> ms);
};

class GraphTimes {
 public:
  // Process-wide: the draft's runners may run on the DraftWorker actor's thread.
  static void enable(bool on);
  static bool enabled();
  // Runs fn (which enqueues a runner's work on stream) and, when enabled, times it under label.
  static void run(const std::string& label, const Stream& stream, const std::function<void()>& fn);
  // Waits for the timed work, returns each label's runs and time since the last collect(),
  // and starts afresh; `gaps`, when given, gets the time between consecutive runs on one
  // stream under "<label before> -> <label after>".
  static std::map<std::string, GraphTime> collect(std::map<std::string, GraphGap>* gaps = nullptr);
};

}  // namespace aerie::spec
