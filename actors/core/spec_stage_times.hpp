#pragma once
// Wall time a verify round spends in each stage on the worker's thread, summed over rounds
// (aerie-bench and aerie-generate --graph-times print them): the draft proposal (which waits
// for the last round's draft extend), the target verify with its argmax, acceptance
// (log-probabilities, tree KV moves), and handing the draft its extend; how many rounds read a
// chain drafted ahead on the device; and the host's time between one verify's return from the
// worker and the next verify's arrival when no other batch comes between (the result's way to the
// Scheduler and the next verify's way back: what the device's extend and next chain must cover,
// unless the next verify was planned before the result, --enable-spec-overlap).
#include <cstdint>

namespace aerie::core {

struct SpecStageTimes {
  int64_t rounds = 0;
  double propose_ms = 0, verify_ms = 0, accept_ms = 0, extend_ms = 0;
  int64_t chains_drafted_ahead = 0;
  int64_t turnarounds = 0;
  double turnaround_ms = 0;  // summed over the turnarounds
};

}  // namespace aerie::core
