#pragma once
// The DP-attention coordinator: a thin behavior over core::DpStepCoordinator. It drives
// the Schedulers of every DP group in lock-step: asks each for its plan of a step, sends
// every group's message (its batch or an IDLE one, all with the step's id, global token
// counts, padding and bucket) to that group's worker at once, waits for every group's
// answer, hands each Scheduler its result and starts the next step. With no work
// anywhere it idles until a Scheduler sends WorkArrived. Each step's plan is logged at
// debug level (AERIE_LOG_LEVEL=debug or --log-level debug).
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "actors/core/dp_step_coordinator.hpp"
#include "actors/core/engine_fault.hpp"
#include "actors/core/step_watchdog.hpp"
#include "actors/messages.hpp"

namespace aerie::actors {

struct DpCoordinatorState {
  std::unique_ptr<core::DpStepCoordinator> core;
  std::vector<caf::actor> workers;     // one per DP group (its ranks behind it)
  std::vector<caf::actor> schedulers;  // one per DP group, from DpSchedulers
  bool wake = false;                   // work arrived while a step was collecting or running
  std::shared_ptr<core::StepWatchdog> watchdog;  // armed for every step (slot: the number of groups)
  std::shared_ptr<core::EngineFault> fault;      // raised when a worker dies
  static inline const char* name = "aerie.dp_coordinator";
};

// Each step is armed on `watchdog` until every group has answered (null: no watchdog).
caf::behavior dp_coordinator_actor(caf::stateful_actor<DpCoordinatorState>* self, std::vector<caf::actor> workers,
                                   core::DpStepOptions options, std::shared_ptr<core::StepWatchdog> watchdog,
                                   std::shared_ptr<core::EngineFault> fault);

}  // namespace aerie::actors
