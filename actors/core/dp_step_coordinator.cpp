#include "actors/core/dp_step_coordinator.hpp"

#include <algorithm>
#include <sstream>

#include "kernels/error.hpp"
#include "parallel/dp_padding.hpp"

namespace aerie::core {

using transport::BatchMessage;
using transport::ForwardMode;

std::string describe(const DpStepSummary& s) {
  std::ostringstream o;
  o << "step " << s.step_id << ": tokens [";
  for (size_t i = 0; i < s.global_num_tokens.size(); ++i) o << (i ? "," : "") << s.global_num_tokens[i];
  o << "] " << (s.dp_padding == 1 ? "MAX_LEN" : "SUM_LEN") << " bucket " << s.bucket;
  if (s.bucket > 0) o << " x " << s.tokens_per_request;
  o << ", " << s.idle_groups << " idle";
  return o.str();
}

DpStepCoordinator::DpStepCoordinator(DpStepOptions options) : options_(std::move(options)) {
  AERIE_CHECK(options_.dp_size >= 1, "DP attention needs at least one DP group");
  AERIE_CHECK(options_.depth >= 1, "at least one DP step must be able to run");
  AERIE_CHECK(std::is_sorted(options_.bucket_sizes.begin(), options_.bucket_sizes.end()), "bucket sizes must ascend");
}

DpStepCoordinator::Phase DpStepCoordinator::phase() const {
  return collecting_ ? Phase::kCollecting : (running_.empty() ? Phase::kIdle : Phase::kRunning);
}

uint64_t DpStepCoordinator::begin_step() {
  AERIE_CHECK(can_begin(), "a DP step began while another is " << (collecting_ ? "collecting" : "running")
                                                                << " (" << running_.size() << " running, at most " << options_.depth << ")");
  collecting_ = true;
  const auto n = static_cast<size_t>(options_.dp_size);
  plans_.assign(n, std::nullopt);
  offered_.assign(n, false);
  refused_.assign(n, "");
  return next_step_++;
}

void DpStepCoordinator::refuse(int group, std::string why) {
  const auto g = static_cast<size_t>(group);
  if (group >= 0 && group < options_.dp_size && offered_[g]) offered_[g] = false, plans_[g].reset();  // offer() threw after taking it
  offer(group, std::nullopt);
  refused_[g] = std::move(why);
}

void DpStepCoordinator::offer(int group, std::optional<BatchMessage> plan) {
  AERIE_CHECK(collecting_, "DP group " << group << " offered a plan while no step is collecting");
  AERIE_CHECK(group >= 0 && group < options_.dp_size, "no DP group " << group);
  const auto g = static_cast<size_t>(group);
  AERIE_CHECK(!offered_[g], "DP group " << group << " offered twice for one step");
  if (plan && plan->input_ids.empty()) plan.reset();  // an empty plan is an idle group
  if (plan) {
    AERIE_CHECK(plan->mode != ForwardMode::kIdle, "DP group " << group << " offered an IDLE plan with tokens");
    if (plan->mode == ForwardMode::kVerify)
      AERIE_CHECK(plan->spec_draft_tokens >= 1 && plan->input_ids.size() == plan->rids.size() * static_cast<size_t>(plan->spec_draft_tokens),
                  "DP group " << group << "'s verify has " << plan->input_ids.size() << " tokens for " << plan->rids.size() << " requests of "
                              << plan->spec_draft_tokens);
  }
  plans_[g] = std::move(plan);
  offered_[g] = true;
}

bool DpStepCoordinator::collected() const {
  return collecting_ && std::all_of(offered_.begin(), offered_.end(), [](bool b) { return b; });
}

namespace {

// Tokens every request of a plan brings when it is a uniform step that buckets apply to
// (a decode, or a verify of spec_draft_tokens per request); 0 when not (an extend, a mixed
// batch): such a step runs eagerly.
int64_t uniform_tokens_per_request(const BatchMessage& m) {
  if (m.mode == ForwardMode::kDecode && m.input_ids.size() == m.rids.size()) return 1;
  if (m.mode == ForwardMode::kVerify) return m.spec_draft_tokens;
  return 0;
}

}  // namespace

std::optional<std::vector<BatchMessage>> DpStepCoordinator::release() {
  AERIE_CHECK(collected(), "a DP step was released before every group offered its plan");
  const uint64_t step_id = next_step_ - 1;
  std::vector<int64_t> tokens;
  bool extend = false;
  int64_t tpr = -1;  // the common tokens per request of every group's plan (0: none)
  int idle = 0;
  for (const auto& p : plans_) {
    tokens.push_back(p ? static_cast<int64_t>(p->input_ids.size()) : 0);
    if (!p) {
      ++idle;
      continue;
    }
    const int64_t t = uniform_tokens_per_request(*p);
    if (t == 0) extend = true;
    tpr = tpr < 0 || tpr == t ? t : 0;
  }
  collecting_ = false;
  // A step of idle groups only is skipped, unless a refusal must come back through it.
  const bool refusals = std::any_of(refused_.begin(), refused_.end(), [](const std::string& r) { return !r.empty(); });
  if (idle == options_.dp_size && !refusals) return std::nullopt;
  // Groups whose steps differ in shape (a decode beside a verify) share no captured graph.
  const bool bucketable = !extend && tpr > 0;
  const std::vector<int64_t> none;
  const parallel::DpPaddingPlan plan =
      parallel::plan_dp_padding(tokens, !bucketable, bucketable ? options_.bucket_sizes : none, false, bucketable ? tpr : 1);
  last_ = {.step_id = step_id,
           .global_num_tokens = tokens,
           .dp_padding = plan.mode == parallel::DpPaddingMode::kMaxLen ? 1 : 2,
           .bucket = plan.bucket ? static_cast<int32_t>(*plan.bucket) : 0,
           .tokens_per_request = static_cast<int32_t>(plan.tokens_per_request),
           .idle_groups = idle};
  std::vector<BatchMessage> out;
  Running step{.has_batch = {}, .answered = std::vector<bool>(plans_.size(), false), .refused = std::move(refused_)};  // idle groups run the step too: every rank answers
  for (auto& p : plans_) {
    step.has_batch.push_back(p.has_value());
    BatchMessage m = p ? std::move(*p) : BatchMessage{};
    if (!p) m.mode = ForwardMode::kIdle;
    m.step_id = step_id;
    m.global_num_tokens = tokens;
    m.dp_padding = last_.dp_padding;
    m.bucket = last_.bucket;
    m.dp_tokens_per_request = last_.tokens_per_request;
    out.push_back(std::move(m));
  }
  plans_.clear();
  running_.push_back(std::move(step));
  ++steps_run_;
  return out;
}

const DpStepCoordinator::Running& DpStepCoordinator::awaiting(int group) const {
  AERIE_CHECK(group >= 0 && group < options_.dp_size, "no DP group " << group);
  const auto it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return !r.answered[static_cast<size_t>(group)]; });
  AERIE_CHECK(it != running_.end(), "DP group " << group << " answered a step it was not running");
  return *it;
}

bool DpStepCoordinator::answer_has_batch(int group) const { return awaiting(group).has_batch[static_cast<size_t>(group)]; }

const std::string& DpStepCoordinator::answer_refusal(int group) const { return awaiting(group).refused[static_cast<size_t>(group)]; }

bool DpStepCoordinator::on_result(int group) {
  AERIE_CHECK(!running_.empty(), "a DP step result came back while no step runs");
  auto& step = const_cast<Running&>(awaiting(group));
  step.answered[static_cast<size_t>(group)] = true;
  // Steps end in order: each group answers its steps in order, so the oldest completes first.
  if (&step != &running_.front() || !std::all_of(step.answered.begin(), step.answered.end(), [](bool b) { return b; })) return false;
  running_.pop_front();
  return true;
}

}  // namespace aerie::core
