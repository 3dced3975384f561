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
  it->second.deliver(RequestDone{u.rid, std::move(u.result), ""});
  self->state.waiting.erase(it);
}

// The next batch, or nothing when there is no work (or one is in flight). When nothing can
// run (the pool holds no request's next step), what is waiting fails.
std::optional<transport::BatchMessage> plan(caf::stateful_actor<SchedulerState>* self) {
  auto& st = self->state;
  try {
    return st.core->plan_next();
  } catch (const std::exception& e) {
    for (auto& [rid, promise] : st.waiting) promise.deliver(RequestDone{rid, {}, ::aerie::client_message(e)});
    st.waiting.clear();
    return std::nullopt;
  }
}

void take_result(caf::stateful_actor<SchedulerState>* self, const transport::BatchResult& r) {
  for (auto& u : self->state.core->on_result(r)) deliver(self, u);
}

// Sends the next batch when the worker is free; its reply drives the next iteration.
void dispatch(caf::stateful_actor<SchedulerState>* self) {
  auto& st = self->state;
  std::optional<transport::BatchMessage> batch = plan(self);
  if (!batch) return;
  self->request(st.worker, caf::infinite, std::move(*batch))
      .then(
          [self](transport::BatchResult& r) {
            take_result(self, r);
            dispatch(self);
          },
          [self](caf::error& e) {
            transport::BatchResult failed;
            failed.error = "worker unreachable: " + self->system().render(e);
            take_result(self, failed);
          });
}

// Queues a request; `wake` runs when it arrived while nothing was in flight.
template <class Wake>
caf::result<RequestDone> submit(caf::stateful_actor<SchedulerState>* self, SubmitRequest& s, Wake wake) {
  try {
    self->state.core->submit(s.rid, std::move(s.request));
  } catch (const std::exception& e) {
    return RequestDone{s.rid, {}, ::aerie::client_message(e)};
  }
  auto promise = self->make_response_promise();
  self->state.waiting.emplace(s.rid, promise);
  if (s.stream_to) self->state.streams.emplace(s.rid, s.stream_to);
  if (!self->state.core->in_flight()) wake();
  return caf::delegated<RequestDone>{};
}

LoadReport load_of(const core::SchedulerCore& c) {
  return LoadReport{.running = c.num_running(), .queued = c.num_queued(), .kv_used_tokens = c.kv_used_tokens(),
                    .kv_total_tokens = c.kv_total_tokens(), .spec_verify_ct = c.stats().spec_verifies,
                    .spec_accepted_tokens = c.stats().spec_committed_tokens};
}

}  // namespace

caf::behavior scheduler_actor(caf::stateful_actor<SchedulerState>* self, model::KvCacheShape kv, core::SchedulerOptions options,
                              caf::actor worker) {
  self->state.core = std::make_unique<core::SchedulerCore>(kv, std::move(options));
  self->state.worker = std::move(worker);
  return {
      [self](SubmitRequest& s) -> caf::result<RequestDone> { return submit(self, s, [self] { dispatch(self); }); },
      [self](AbortRequest& a) {
        if (auto u = self->state.core->abort(a.rid)) deliver(self, *u);
      },
      [self](GetLoad) { return load_of(*self->state.core); },
  };
}

caf::behavior lockstep_scheduler_actor(caf::stateful_actor<SchedulerState>* self, model::KvCacheShape kv, core::SchedulerOptions options,
                                       caf::actor coordinator) {
  self->state.core = std::make_unique<core::SchedulerCore>(kv, std::move(options));
  self->state.worker = coordinator;
  return {
      [self](SubmitRequest& s) -> caf::result<RequestDone> {
        return submit(self, s, [self] { self->send(self->state.worker, WorkArrived{}); });
      },
      [self](AbortRequest& a) {
        if (auto u = self->state.core->abort(a.rid)) deliver(self, *u);
      },
      [self](GetLoad) { return load_of(*self->state.core); },
      [self](PlanStep) {
        std::optional<transport::BatchMessage> b = plan(self);
        return b ? StepPlan{.has_batch = true, .batch = std::move(*b)} : StepPlan{};
      },
      [self](StepOutcome& o) { take_result(self, o.result); },
  };
}

}  // namespace aerie::actors
