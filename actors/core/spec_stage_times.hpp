#pragma once
// Wall time a verify round spends in each stage on the worker's thread, summed over rounds
// (aerie-bench and aerie-generate --graph-times print them): the draft proposal (which waits
// for the last round's draft extend), the target verify with its argmax, acceptance
// (log-probabilities, tree KV moves), and handing the draft its extend; how many rounds read a
// chain drafted ahead on the device; and the host's time between one verify's return from the
// worker and the next verify's arrival when no other batch comes between (the result's way to the
// Scheduler and the next verify's way back: what the device's extend and next chain must cover,
// unless the next verify was planned before the result, --enable-spec-overlap).
// The turnarounds are also counted by length (a few slow ones leave the device idle where the
// mean says little), doubling from 25 us.
#include <array>
#include <cstdint>

namespace aerie::core {

struct SpecStageTimes {
  // Upper edges of the turnaround buckets, ms; the last bucket takes everything longer.
  static constexpr std::array<double, 7> kTurnaroundEdgesMs = {0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6};

  int64_t rounds = 0;
  double propose_ms = 0, verify_ms = 0, accept_ms = 0, extend_ms = 0;
  int64_t chains_drafted_ahead = 0;
  int64_t turnarounds = 0;
  double turnaround_ms = 0;  // summed over the turnarounds
  double turnaround_max_ms = 0;
  std::array<int64_t, kTurnaroundEdgesMs.size() + 1> turnaround_buckets{};

  void add_turnaround(double ms) {
    turnarounds += 1;
    turnaround_ms += ms;
    turnaround_max_ms = ms > turnaround_max_ms ? ms : turnaround_max_ms;
    size_t b = 0;
    while (b < kTurnaroundEdgesMs.size() && ms >= kTurnaroundEdgesMs[b]) ++b;
    turnaround_buckets[b] += 1;
  }
};

}  // namespace aerie::core
