#include "actors/dp_coordinator_actor.hpp"

#include "kernels/error.hpp"
#include "kernels/log.hpp"

namespace aerie::actors {

namespace {

using Self = caf::stateful_actor<DpCoordinatorState>;

void start_step(Self* self);

// Group g's answer for the running step: its result goes to its Scheduler (an idle group's
// reply only says its ranks ran the collectives); the step's last answer starts the next.
void on_result(Self* self, int g, transport::BatchResult& r) {
  auto& st = self->state;
  if (const std::string& refused = st.core->answer_refusal(g); !refused.empty()) {
    transport::BatchResult failed;  // its plan ran idle: its Scheduler learns why, in order
    failed.error = refused;
    self->send(st.schedulers[static_cast<size_t>(g)], StepOutcome{std::move(failed)});
  } else if (st.core->answer_has_batch(g)) {
    self->send(st.schedulers[static_cast<size_t>(g)], StepOutcome{std::move(r)});
  } else if (!r.error.empty()) {
    AERIE_LOG_ERROR("DP group " << g << " failed an idle step: " << r.error);
  }
  if (st.core->on_result(g)) {
    if (st.watchdog) st.watchdog->disarm(st.core->dp_size());
    // Overlap: the step behind it is still running; the watchdog follows it from now on.
    if (st.watchdog && st.core->steps_running() > 0) st.watchdog->arm(st.core->dp_size(), "DP attention step after " + std::to_string(r.step_id));
    start_step(self);
  }
}

void on_plan(Self* self, int g, StepPlan& p) {
  auto& st = self->state;
  try {
    st.core->offer(g, p.has_batch ? std::optional<transport::BatchMessage>(std::move(p.batch)) : std::nullopt);
  } catch (const std::exception& e) {
    // A plan the step cannot take fails that group's batch, not the launch.
    AERIE_LOG_ERROR("DP group " << g << ": " << e.what());
    st.core->refuse(g, p.has_batch ? ::aerie::client_message(e) : std::string());  // "": it planned nothing, so nothing waits
  }
  if (!st.core->collected()) return;
  auto messages = st.core->release();
  if (!messages) {  // nothing anywhere: idle until work arrives (or already has)
    if (st.wake) start_step(self);
    return;
  }
  AERIE_LOG_DEBUG("DP attention " << core::describe(st.core->last_step()));
  if (st.watchdog && st.core->steps_running() == 1)  // the oldest step running is the one watched
    st.watchdog->arm(st.core->dp_size(), "DP attention step " + std::to_string(st.core->last_step().step_id));
  for (int i = 0; i < static_cast<int>(messages->size()); ++i) {
    self->request(st.workers[static_cast<size_t>(i)], caf::infinite, std::move((*messages)[static_cast<size_t>(i)]))
        .then([self, i](transport::BatchResult& r) { on_result(self, i, r); },
              [self, i](caf::error& e) {
                transport::BatchResult failed;
                failed.error = "worker unreachable: " + self->system().render(e);
                if (self->state.fault) self->state.fault->raise("DP group " + std::to_string(i) + ": " + failed.error);
                on_result(self, i, failed);
              });
  }
  start_step(self);  // overlap: collect the next step while this one runs
}

void start_step(Self* self) {
  auto& st = self->state;
  if (st.schedulers.empty() || !st.core->can_begin()) return;
  st.wake = false;
  const uint64_t id = st.core->begin_step();
  for (int g = 0; g < st.core->dp_size(); ++g) {
    self->request(st.schedulers[static_cast<size_t>(g)], caf::infinite, PlanStep{id})
        .then([self, g](StepPlan& p) { on_plan(self, g, p); },
              [self, g](caf::error&) {
                StepPlan none;
                on_plan(self, g, none);
              });
  }
}

}  // namespace

caf::behavior dp_coordinator_actor(Self* self, std::vector<caf::actor> workers, core::DpStepOptions options,
                                   std::shared_ptr<core::StepWatchdog> watchdog, std::shared_ptr<core::EngineFault> fault) {
  AERIE_CHECK(static_cast<int>(workers.size()) == options.dp_size, "one worker per DP group");
  self->state.watchdog = watchdog;
  self->state.fault = std::move(fault);
  self->state.core = std::make_unique<core::DpStepCoordinator>(std::move(options));
  self->state.workers = std::move(workers);
  return {
      [self](DpSchedulers& s) {
        AERIE_CHECK(static_cast<int>(s.schedulers.size()) == self->state.core->dp_size(), "one Scheduler per DP group");
        self->state.schedulers = std::move(s.schedulers);
        start_step(self);
      },
      [self](WorkArrived) {
        self->state.wake = true;
        start_step(self);
      },
  };
}

}  // namespace aerie::actors
