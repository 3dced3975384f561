#include "actors/target_worker_actor.hpp"

#include <deque>

#include "actors/core/tp_results.hpp"

namespace aerie::actors {

caf::behavior target_worker_actor(caf::event_based_actor*, std::shared_ptr<core::TargetWorkerCore> core) {
  return {
      [core](transport::BatchMessage& b) -> transport::BatchResult { return core->execute(b); },
      [](WorkerIdle) { return WorkerIdle{}; },
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
