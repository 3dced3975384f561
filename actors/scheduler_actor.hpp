#pragma once
// The Scheduler actor of one DP group: a thin behavior over core::SchedulerCore. Requests
// come in as SubmitRequest (answered with RequestDone when they finish or are rejected),
// batches go to the group's worker actor as requests, results come back as their replies.
#include <caf/all.hpp>
#include <map>

#include <chrono>
#include <optional>

#include "actors/core/engine_fault.hpp"
#include "actors/core/scheduler_core.hpp"
#include "actors/core/step_watchdog.hpp"
#include "actors/messages.hpp"

namespace aerie::actors {

// Fault handling (docs/reliability.md): each batch sent is armed on `watchdog` (slot: the
// group) until its result comes back; a worker that dies raises `fault` (the launch's latch;
// null: none). EngineFailed (from the Router) fails every waiting request with 503 and
// refuses new ones.
struct SchedulerFaults {
  int group = 0;
  std::shared_ptr<core::StepWatchdog> watchdog;
  std::shared_ptr<core::EngineFault> fault;
};

struct SchedulerState {
  std::unique_ptr<core::SchedulerCore> core;
  caf::actor worker;
  std::map<uint64_t, caf::response_promise> waiting;  // rid -> the client's promise
  std::map<uint64_t, caf::actor> streams;             // rid -> where its TokenChunks go
  SchedulerFaults faults;
  std::optional<std::string> failed;       // the engine is down: why
  static inline const char* name = "aerie.scheduler";
};

caf::behavior scheduler_actor(caf::stateful_actor<SchedulerState>* self, model::KvCacheShape kv, core::SchedulerOptions options,
                              caf::actor worker, SchedulerFaults faults = {});

// The same Scheduler under DP attention: it does not dispatch on its own. The coordinator
// (actors/dp_coordinator_actor.hpp) asks for each global step's plan (PlanStep -> StepPlan,
// nothing when it has no work) and hands back the batch's result (StepOutcome); a request
// arriving while nothing is in flight wakes the coordinator (WorkArrived).
caf::behavior lockstep_scheduler_actor(caf::stateful_actor<SchedulerState>* self, model::KvCacheShape kv, core::SchedulerOptions options,
                                       caf::actor coordinator, SchedulerFaults faults = {});

}  // namespace aerie::actors
