#pragma once
// DpStepCoordinator: the lock-step of DP attention, CAF-free (the coordinator actor drives
// it). Under DP attention the MLP's collectives span every rank, so every rank must run
// one forward per global step, whether its DP group has work or not. Each step:
//   1. begin_step(): a new step id; every group's Scheduler is asked for its plan.
//   2. offer(group, plan or nothing), once per group.
//   3. release(): when every group has offered, one message per group, all carrying the
//      same step id and plan of the step: every group's token count (global_num_tokens),
//      the padding mode (SUM_LEN when a group extends or the counts are skewed, MAX_LEN
//      otherwise: parallel/dp_padding.hpp) and, under MAX_LEN, the bucket every rank
//      replays or pads to — chosen from the max over groups of requests (tokens / tokens
//      per request: 1 for a decode, num_draft_tokens for a verify). A group without a plan
//      gets an IDLE message. When no group has work the step is skipped.
//   4. on_result(group) for every group that ran; done() when all have answered.
// Only one step is ever collecting or running; a plan offered out of turn is an error.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/messages.hpp"

namespace aerie::core {

struct DpStepOptions {
  int dp_size = 1;
  std::vector<int64_t> bucket_sizes;  // requests per bucket, ascending (empty: no padding to buckets)
};

// What a released step looked like (for logs and tests).
struct DpStepSummary {
  uint64_t step_id = 0;
  std::vector<int64_t> global_num_tokens;
  int32_t dp_padding = 0;  // 1 MAX_LEN, 2 SUM_LEN
  int32_t bucket = 0;      // 0: none
  int32_t tokens_per_request = 1;
  int idle_groups = 0;
};
std::string describe(const DpStepSummary& s);

class DpStepCoordinator {
 public:
  explicit DpStepCoordinator(DpStepOptions options);
  int dp_size() const { return options_.dp_size; }

  enum class Phase { kIdle, kCollecting, kRunning };
  Phase phase() const { return phase_; }
  // Starts collecting the next step (phase must be kIdle); returns its id.
  uint64_t begin_step();
  // Group g's plan for the step being collected; nullopt: nothing to run this step.
  void offer(int group, std::optional<transport::BatchMessage> plan);
  bool collected() const;
  // Every group's message for the step (phase kCollecting -> kRunning), or nothing when
  // every group is idle (-> kIdle: the step is skipped).
  std::optional<std::vector<transport::BatchMessage>> release();
  // Group g's result came back; true when it was the step's last (-> kIdle).
  bool on_result(int group);
  const DpStepSummary& last_step() const { return last_; }
  uint64_t steps_run() const { return steps_run_; }

 private:
  DpStepOptions options_;
  Phase phase_ = Phase::kIdle;
  uint64_t next_step_ = 1;
  std::vector<std::optional<transport::BatchMessage>> plans_;
  std::vector<bool> offered_, answered_;
  DpStepSummary last_;
  uint64_t steps_run_ = 0;
};

}  // namespace aerie::core
