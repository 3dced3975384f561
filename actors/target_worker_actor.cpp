#include "actors/target_worker_actor.hpp"

#include <deque>

#include "actors/core/completion_waiter.hpp"
#include "actors/core/tp_results.hpp"

namespace aerie::actors {

caf::behavior target_worker_actor(caf::event_based_actor* self, std::shared_ptr<core::TargetWorkerCore> core) {
  struct State {
    std::deque<caf::response_promise> owed;       // one per launched batch, oldest first
    std::vector<caf::response_promise> stop_owed;  // WorkerStop requests waiting for the batches in flight
    std::unique_ptr<core::CompletionWaiter> waiter;  // null once stopped
    bool stopping = false;
  };
  auto st = std::make_shared<State>();
  // The waiter must not keep the actor alive: it holds a weak handle.
  st->waiter = std::make_unique<core::CompletionWaiter>([weak = caf::actor_cast<caf::weak_actor_ptr>(self)] {
    if (auto strong = weak.lock()) caf::anon_send(caf::actor_cast<caf::actor>(strong), BatchWorkDone{});
  });
  // Hands over every result whose work has run, in launch order; never waits. Once idle, a
  // stop asked for ends the waiter thread here, on the actor's thread (it joins it).
  auto deliver_done = [core, st] {
    while (core->in_flight() > 0 && core->oldest_done()) {
      st->owed.front().deliver(core->collect());
      st->owed.pop_front();
    }
    if (core->in_flight() == 0 && st->stopping) {
      st->waiter.reset();
      for (auto& p : st->stop_owed) p.deliver(WorkerStop{});
      st->stop_owed.clear();
    }
  };
  return {
      // Enqueued behind the batch that runs (overlap scheduling), answered when it has run.
      [self, core, st, deliver_done](transport::BatchMessage& b) -> caf::result<transport::BatchResult> {
        if (st->stopping) {
          transport::BatchResult refused;
          refused.step_id = b.step_id;
          refused.rids = b.rids;
          refused.error = "the target worker has stopped";
          return refused;
        }
        auto promise = self->make_response_promise<transport::BatchResult>();
        st->owed.push_back(promise);
        core->launch(b);
        // A batch whose work has run already (a speculative round ends on the host) is answered
        // now; the waiter thread is woken only for work still on the device.
        deliver_done();
        if (core->in_flight() > 0) st->waiter->watch(core->newest_done_event());
        return promise;
      },
      [deliver_done](BatchWorkDone) { deliver_done(); },
      [self, st, deliver_done](WorkerStop) -> caf::result<WorkerStop> {
        st->stopping = true;
        auto promise = self->make_response_promise<WorkerStop>();
        st->stop_owed.push_back(promise);
        deliver_done();  // answers at once when nothing is in flight
        return promise;
      },
  };
}

caf::behavior remote_worker_actor(caf::event_based_actor* self, std::shared_ptr<RemoteWorkerLink> link) {
  struct Owed {
    uint64_t step_id;
    caf::response_promise promise;
    std::chrono::steady_clock::time_point deadline;
  };
  auto owed = std::make_shared<std::deque<Owed>>();  // batches forwarded, oldest first
  return {
      [self, link, owed](transport::BatchMessage& b) -> caf::result<transport::BatchResult> {
        auto promise = self->make_response_promise<transport::BatchResult>();
        owed->push_back({b.step_id, promise, std::chrono::steady_clock::now() + link->timeout});
        link->to_worker->send(std::move(b));
        if (owed->size() == 1) self->send(self, CollectRemoteResult{});  // starts the collecting loop
        return promise;
      },
      // One short wait for the oldest result per message, so that a batch arriving meanwhile
      // is forwarded at once instead of behind a blocking wait.
      [self, link, owed](CollectRemoteResult) {
        if (owed->empty()) return;
        Owed& o = owed->front();
        if (auto m = link->from_worker->receive(std::chrono::milliseconds(2))) {
          if (auto* r = std::get_if<transport::BatchResult>(&*m); r && r->step_id == o.step_id) {
            o.promise.deliver(std::move(*r));
            owed->pop_front();
          }
          // Anything else (a stale result) is skipped.
        } else if (std::chrono::steady_clock::now() > o.deadline) {
          o.promise.deliver(transport::BatchResult{.seq = 0, .step_id = o.step_id, .rids = {}, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = "remote worker timed out"});
          owed->pop_front();
        }
        if (!owed->empty()) self->send(self, CollectRemoteResult{});
      },
  };
}

caf::behavior tp_group_worker_actor(caf::event_based_actor* self, std::vector<caf::actor> ranks) {
  return {
      [self, ranks](transport::BatchMessage& b) -> caf::result<transport::BatchResult> {
        auto promise = self->make_response_promise<transport::BatchResult>();
        auto results = std::make_shared<core::TpResults>(ranks.size());
        auto done = [promise, results](size_t rank, transport::BatchResult r) mutable {
          if (auto merged = results->add(rank, std::move(r))) promise.deliver(std::move(*merged));
        };
        for (size_t i = 0; i < ranks.size(); ++i) {
          self->request(ranks[i], caf::infinite, b)
              .then([done, i](transport::BatchResult& r) mutable { done(i, std::move(r)); },
                    [done, i, step = b.step_id, self](caf::error& e) mutable {
                      transport::BatchResult failed;
                      failed.step_id = step;
                      failed.error = "worker unreachable: " + self->system().render(e);
                      done(i, std::move(failed));
                    });
        }
        return promise;
      },
  };
}

}  // namespace aerie::actors
