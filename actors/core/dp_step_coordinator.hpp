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
// One step is collecting at a time, and at most `depth` steps run: with overlap scheduling
// (depth 2) step N+1 is collected and released while step N runs, its Schedulers planning
// ahead with future tokens; each group's answers come back in step order. A plan offered
// out of turn is an error.
#include <deque>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "transport/messages.hpp"

namespace aerie::core {

struct DpStepOptions {
  int dp_size = 1;
  std::vector<int64_t> bucket_sizes;  // requests per bucket, ascending (empty: no padding to buckets)
  int depth = 1;                      // steps running at once (2: overlap scheduling)
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
  // kCollecting while a step collects, else kRunning while any step runs, else kIdle.
  Phase phase() const;
  // True when the next step may start collecting (none collects, fewer than depth run).
  bool can_begin() const { return !collecting_ && static_cast<int>(running_.size()) < options_.depth; }
  int64_t steps_running() const { return static_cast<int64_t>(running_.size()); }
  // Starts collecting the next step (can_begin() must hold); returns its id.
  uint64_t begin_step();
  // Group g's plan for the step being collected; nullopt: nothing to run this step.
  void offer(int group, std::optional<transport::BatchMessage> plan);
  // Group g's plan could not be taken (offer threw): the group runs the step idle, and its
  // answer for the step becomes this error for its Scheduler (answer_refusal), so that its
  // results still come back in the order of its plans.
  void refuse(int group, std::string why);
  bool collected() const;
  // Every group's message for the step (phase kCollecting -> kRunning), or nothing when
  // every group is idle (-> kIdle: the step is skipped).
  std::optional<std::vector<transport::BatchMessage>> release();
  // Whether group g's next answer (for the oldest running step it has not answered) is for
  // a batch of its own, not an IDLE message.
  bool answer_has_batch(int group) const;
  // Why group g's plan for that step was refused ("" when it was not).
  const std::string& answer_refusal(int group) const;
  // Group g's result came back (for the oldest step it has not answered); true when it was
  // that step's last.
  bool on_result(int group);
  const DpStepSummary& last_step() const { return last_; }
  uint64_t steps_run() const { return steps_run_; }

 private:
  struct Running {
    std::vector<bool> has_batch, answered;
    std::vector<std::string> refused;
  };
  // The oldest running step group g has not answered.
  const Running& awaiting(int group) const;
  DpStepOptions options_;
  bool collecting_ = false;
  std::deque<Running> running_;  // oldest first
  uint64_t next_step_ = 1;
  std::vector<std::optional<transport::BatchMessage>> plans_;
  std::vector<bool> offered_;
  std::vector<std::string> refused_;  // the collecting step's
  DpStepSummary last_;
  uint64_t steps_run_ = 0;
};

}  // namespace aerie::core
