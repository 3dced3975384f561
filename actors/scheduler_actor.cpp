#include "actors/scheduler_actor.hpp"

#include "kernels/error.hpp"

namespace aerie::actors {

namespace {

void deliver(caf::stateful_actor<SchedulerState>* self, core::RequestUpdate& u) {
  if (!u.new_tokens.empty()) {
    auto s = self->state.streams.find(u.rid);
    if (s != self->state.streams.end()) self->send(s->second, TokenChunk{u.rid, u.new_tokens, u.new_logprobs});
  }
  if (!u.finished) return;
  self->state.streams.erase(u.rid);
  auto it = self->state.waiting.find(u.rid);
  if (it == self->state.waiting.end()) return;
  // A batch the engine failed ends its requests with finish reason "error: ..." : a 500.
  const std::string& reason = u.result.finish_reason;
  if (reason.rfind("error", 0) == 0) it->second.deliver(RequestDone{u.rid, std::move(u.result), reason, 500});
  else it->second.deliver(RequestDone{u.rid, std::move(u.result), ""});
  self->state.waiting.erase(it);
}

// The engine is down: every waiting request ends with 503 now, later ones are refused.
void fail_all(caf::stateful_actor<SchedulerState>* self, const std::string& reason) {
  auto& st = self->state;
  if (!st.failed) st.failed = reason;
  for (auto& [rid, promise] : st.waiting) promise.deliver(RequestDone{rid, {}, "engine unavailable: " + reason, 503});
  st.waiting.clear();
  st.streams.clear();
}

void raise_fault(caf::stateful_actor<SchedulerState>* self, const std::string& reason) {
  auto& st = self->state;
  if (st.faults.fault) st.faults.fault->raise(reason);  // its handler tells the Router, which tells every Scheduler
  else fail_all(self, reason);
}

// Arms the watchdog for the batch just sent.
void watch(caf::stateful_actor<SchedulerState>* self, uint64_t step_id) {
  auto& f = self->state.faults;
  if (f.watchdog) f.watchdog->arm(f.group, "DP group " + std::to_string(f.group) + ", step " + std::to_string(step_id));
}

// The next batch, or nothing when there is no work (or one is in flight). When nothing can
// run (the pool holds no request's next step), what is waiting fails.
std::optional<transport::BatchMessage> plan(caf::stateful_actor<SchedulerState>* self) {
  auto& st = self->state;
  try {
    return st.core->plan_next();
  } catch (const std::exception& e) {
    for (auto& [rid, promise] : st.waiting) promise.deliver(RequestDone{rid, {}, ::aerie::client_message(e), 500});
    st.waiting.clear();
    return std::nullopt;
  }
}

void dispatch(caf::stateful_actor<SchedulerState>* self);
void send_batch(caf::stateful_actor<SchedulerState>* self, transport::BatchMessage batch);

void take_result(caf::stateful_actor<SchedulerState>* self, const transport::BatchResult& r) {
  auto& st = self->state;
  if (st.faults.watchdog) st.faults.watchdog->disarm(st.faults.group);
  for (auto& u : st.core->on_result(r)) deliver(self, u);
  // Overlap: the batch behind it is still out; the watchdog follows it from now on.
  if (st.core->in_flight() > 0) watch(self, r.step_id + 1);
}

// Sends batches while the Scheduler may plan (one in flight, or two with overlap
// scheduling); each reply drives the next iteration.
void dispatch(caf::stateful_actor<SchedulerState>* self) {
  auto& st = self->state;
  while (!st.failed) {
    const bool idle = st.core->in_flight() == 0;
    std::optional<transport::BatchMessage> batch = plan(self);
    if (!batch) return;
    if (idle) watch(self, batch->step_id);  // the oldest batch out is the one watched
    send_batch(self, std::move(*batch));
  }
}

void send_batch(caf::stateful_actor<SchedulerState>* self, transport::BatchMessage batch) {
  auto& st = self->state;
  self->request(st.worker, caf::infinite, std::move(batch))
      .then(
          [self](transport::BatchResult& r) {
            if (self->state.failed) return;
            take_result(self, r);
            dispatch(self);
          },
          [self](caf::error& e) {
            // The worker actor is gone: its batch fails, and the engine with it.
            transport::BatchResult failed;
            failed.error = "worker unreachable: " + self->system().render(e);
            take_result(self, failed);
            raise_fault(self, "DP group " + std::to_string(self->state.faults.group) + ": " + failed.error);
          });
}

// Queues a request; `wake` runs when another batch may be planned now.
template <class Wake>
caf::result<RequestDone> submit(caf::stateful_actor<SchedulerState>* self, SubmitRequest& s, Wake wake) {
  if (self->state.failed) return RequestDone{s.rid, {}, "engine unavailable: " + *self->state.failed, 503};
  // A member of a group whose next member follows waits for it: the group is admitted together
  // (the last member wakes the planner, rejected or not).
  const auto wake_unless_followed = [&] {
    if (!s.group_follows && self->state.core->can_plan() && self->state.core->has_work()) wake();
  };
  try {
    self->state.core->submit(s.rid, std::move(s.request));
  } catch (const std::exception& e) {
    wake_unless_followed();
    return RequestDone{s.rid, {}, ::aerie::client_message(e)};
  }
  auto promise = self->make_response_promise();
  self->state.waiting.emplace(s.rid, promise);
  if (s.stream_to) self->state.streams.emplace(s.rid, s.stream_to);
  wake_unless_followed();
  return caf::delegated<RequestDone>{};
}

LoadReport load_of(const core::SchedulerCore& c) {
  return LoadReport{.running = c.num_running(), .queued = c.num_queued(), .kv_used_tokens = c.kv_used_tokens(),
                    .kv_total_tokens = c.kv_total_tokens(), .spec_verify_ct = c.stats().spec_verifies,
                    .spec_accepted_tokens = c.stats().spec_committed_tokens, .forward_seconds = c.stats().forward_seconds,
                    .forward_gap_seconds = c.stats().forward_gap_seconds,
                    .forward_batches = c.stats().iterations};
}

}  // namespace

caf::behavior scheduler_actor(caf::stateful_actor<SchedulerState>* self, model::KvCacheShape kv, core::SchedulerOptions options,
                              caf::actor worker, SchedulerFaults faults) {
  self->state.core = std::make_unique<core::SchedulerCore>(kv, std::move(options));
  self->state.worker = std::move(worker);
  self->state.faults = std::move(faults);
  return {
      [self](EngineFailed& f) { fail_all(self, f.reason); },
      [self](SubmitRequest& s) -> caf::result<RequestDone> { return submit(self, s, [self] { dispatch(self); }); },
      [self](AbortRequest& a) {
        if (auto u = self->state.core->abort(a.rid)) deliver(self, *u);
      },
      [self](GetLoad) { return load_of(*self->state.core); },
  };
}

caf::behavior lockstep_scheduler_actor(caf::stateful_actor<SchedulerState>* self, model::KvCacheShape kv, core::SchedulerOptions options,
                                       caf::actor coordinator, SchedulerFaults faults) {
  self->state.core = std::make_unique<core::SchedulerCore>(kv, std::move(options));
  self->state.worker = coordinator;
  self->state.faults = std::move(faults);  // the coordinator runs the step watchdog
  return {
      [self](EngineFailed& f) { fail_all(self, f.reason); },
      [self](SubmitRequest& s) -> caf::result<RequestDone> {
        return submit(self, s, [self] { self->send(self->state.worker, WorkArrived{}); });
      },
      [self](AbortRequest& a) {
        if (auto u = self->state.core->abort(a.rid)) deliver(self, *u);
      },
      [self](GetLoad) { return load_of(*self->state.core); },
      [self](PlanStep) {
        if (self->state.failed) return StepPlan{};
        std::optional<transport::BatchMessage> b = plan(self);
        return b ? StepPlan{.has_batch = true, .batch = std::move(*b)} : StepPlan{};
      },
      [self](StepOutcome& o) {
        if (self->state.failed) return;
        take_result(self, o.result);
        // A result can make work plannable that was not when the coordinator last asked (the
        // batch in flight held the overlap slot, or its request's pages): under overlap the
        // coordinator may already have collected the next step's plans, found nothing and gone
        // idle, and no submit will wake it. Tell it, as a new request would.
        if (self->state.core->can_plan() && self->state.core->has_work()) self->send(self->state.worker, WorkArrived{});
      },
  };
}

}  // namespace aerie::actors
