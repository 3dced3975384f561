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
  AERIE_CHECK(std::is_sorted(options_.bucket_sizes.begin(), options_.bucket_sizes.end()), "bucket sizes must ascend");
}

uint64_t DpStepCoordinator::begin_step() {
  AERIE_CHECK(phase_ == Phase::kIdle, "a DP step began while another is " << (phase_ == Phase::kCollecting ? "collecting" : "running"));
  phase_ = Phase::kCollecting;
  const auto n = static_cast<size_t>(options_.dp_size);
  plans_.assign(n, std::nullopt);
  offered_.assign(n, false);
  answered_.assign(n, false);
  return next_step_++;
}

void DpStepCoordinator::offer(int group, std::optional<BatchMessage> plan) {
  AERIE_CHECK(phase_ == Phase::kCollecting, "DP group " << group << " offered a plan while no step is collecting");
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
  return phase_ == Phase::kCollecting && std::all_of(offered_.begin(), offered_.end(), [](bool b) { return b; });
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
  if (idle == options_.dp_size) {
    phase_ = Phase::kIdle;
    return std::nullopt;
  }
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
  for (auto& p : plans_) {
    BatchMessage m = p ? std::move(*p) : BatchMessage{};
    if (!p) m.mode = ForwardMode::kIdle;
    m.step_id = step_id;
    m.global_num_tokens = tokens;
    m.dp_padding = last_.dp_padding;
    m.bucket = last_.bucket;
    m.dp_tokens_per_request = last_.tokens_per_request;
    out.push_back(std::move(m));
  }
  answered_.assign(plans_.size(), false);  // idle groups run the step too: every rank answers
  plans_.clear();
  phase_ = Phase::kRunning;
  ++steps_run_;
  return out;
}

bool DpStepCoordinator::on_result(int group) {
  AERIE_CHECK(phase_ == Phase::kRunning, "a DP step result came back while no step runs");
  AERIE_CHECK(group >= 0 && group < options_.dp_size, "no DP group " << group);
  answered_[static_cast<size_t>(group)] = true;
  if (!std::all_of(answered_.begin(), answered_.end(), [](bool b) { return b; })) return false;
  phase_ = Phase::kIdle;
  return true;
}

}  // namespace aerie::core
