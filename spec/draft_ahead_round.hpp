#pragma once
// DraftAheadRound: the requests of a chain drafted ahead (DraftPort::propose_ahead) and which
// later round it covers. The DraftWorkerCore keeps one next to the chain it enqueued; the
// DraftWorkerClient keeps the same for what it asked, so it can tell whether the next verify
// may read the chain on the device without asking the DraftWorker (a round trip on the
// round's critical path).
#include <cstdint>
#include <optional>
#include <vector>

#include "spec/draft_port.hpp"

namespace aerie::spec {

struct DraftAheadRound {
  std::vector<DraftProposeSeq> seqs;  // each context: the slots of positions [0, first_position)
  int64_t steps = 0;

  // As asked for: the requests, each context trimmed to first_position.
  static DraftAheadRound of(const std::vector<DraftProposeSeq>& seqs, int64_t steps);
  bool empty() const { return seqs.empty(); }
  // A request extended or forgotten since: no round takes it any more.
  void drop(uint64_t rid);
  // Each asked request's row, when the round covers them all: the same request, position,
  // root and context slots, and the same chain length.
  std::optional<std::vector<size_t>> rows_for(const std::vector<DraftProposeSeq>& asked, int64_t asked_steps) const;
};

}  // namespace aerie::spec
