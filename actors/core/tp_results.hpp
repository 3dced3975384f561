#pragma once
// TpResults: the results every rank of a TP group returns for one batch, merged into the
// group's one result. All ranks ran the same batch on the same logits, so they must agree
// on every token; a rank that disagrees (or fails) makes the step fail with an error that
// names it, instead of the group committing tokens that some ranks did not compute.
#include <cstddef>
#include <optional>
#include <vector>

#include "transport/messages.hpp"

namespace aerie::core {

class TpResults {
 public:
  explicit TpResults(size_t ranks);
  // Rank `rank`'s result; returns the group's result once every rank has answered.
  std::optional<transport::BatchResult> add(size_t rank, transport::BatchResult result);

 private:
  transport::BatchResult merged() const;
  std::vector<std::optional<transport::BatchResult>> results_;
  size_t received_ = 0;
};

}  // namespace aerie::core
