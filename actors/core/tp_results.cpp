#include "actors/core/tp_results.hpp"

#include <sstream>

#include "kernels/error.hpp"

namespace aerie::core {

TpResults::TpResults(size_t ranks) : results_(ranks) { AERIE_CHECK(ranks >= 1, "a TP group has at least one rank"); }

std::optional<transport::BatchResult> TpResults::add(size_t rank, transport::BatchResult result) {
  AERIE_CHECK(rank < results_.size(), "TP rank " << rank << " of a group of " << results_.size());
  AERIE_CHECK(!results_[rank], "TP rank " << rank << " answered twice for step " << result.step_id);
  results_[rank] = std::move(result);
  if (++received_ < results_.size()) return std::nullopt;
  return merged();
}

transport::BatchResult TpResults::merged() const {
  transport::BatchResult out = *results_[0];
  // The first error any rank reports is the group's.
  for (size_t r = 0; r < results_.size(); ++r)
    if (!results_[r]->error.empty()) {
      out = *results_[r];
      out.error = "TP rank " + std::to_string(r) + ": " + results_[r]->error;
      out.next_tokens.clear();
      out.token_counts.clear();
      out.logprobs.clear();
      return out;
    }
  for (size_t r = 1; r < results_.size(); ++r) {
    const auto& x = *results_[r];
    if (x.step_id != out.step_id || x.rids != out.rids || x.next_tokens != out.next_tokens || x.token_counts != out.token_counts) {
      std::ostringstream msg;
      msg << "TP ranks 0 and " << r << " disagree on step " << out.step_id << " (" << out.next_tokens.size() << " vs " << x.next_tokens.size()
          << " tokens): the group's ranks computed different results";
      out.error = msg.str();
      out.next_tokens.clear();
      out.token_counts.clear();
      out.logprobs.clear();
      return out;
    }
  }
  return out;
}

}  // namespace aerie::core
