#include "spec/draft_ahead_round.hpp"

#include <algorithm>
#include <limits>

namespace aerie::spec {

DraftAheadRound DraftAheadRound::of(const std::vector<DraftProposeSeq>& seqs, int64_t steps) {
  DraftAheadRound r{.seqs = seqs, .steps = steps};
  for (auto& s : r.seqs) s.context.resize(std::min(s.context.size(), static_cast<size_t>(std::max(s.first_position, 0))));
  return r;
}

void DraftAheadRound::drop(uint64_t rid) {
  for (auto& s : seqs)
    if (s.rid == rid) s.rid = std::numeric_limits<uint64_t>::max();  // matches no request
}

std::optional<std::vector<size_t>> DraftAheadRound::rows_for(const std::vector<DraftProposeSeq>& asked, int64_t asked_steps) const {
  if (seqs.empty() || asked_steps != steps) return std::nullopt;
  std::vector<size_t> rows;
  for (const auto& s : asked) {
    const auto same = [&](const DraftProposeSeq& a) {
      return a.rid == s.rid && a.first_position == s.first_position && a.root_token == s.root_token &&
             static_cast<int64_t>(s.context.size()) >= s.first_position && a.context.size() == static_cast<size_t>(s.first_position) &&
             std::equal(a.context.begin(), a.context.end(), s.context.begin());
    };
    const auto it = std::find_if(seqs.begin(), seqs.end(), same);
    if (it == seqs.end()) return std::nullopt;
    rows.push_back(static_cast<size_t>(it - seqs.begin()));
  }
  return rows;
}

}  // namespace aerie::spec
