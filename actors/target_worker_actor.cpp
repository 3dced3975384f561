#include "actors/target_worker_actor.hpp"

#include "actors/core/tp_results.hpp"

namespace aerie::actors {

caf::behavior target_worker_actor(caf::event_based_actor*, std::shared_ptr<core::TargetWorkerCore> core) {
  return {
      [core](transport::BatchMessage& b) -> transport::BatchResult { return core->execute(b); },
  };
}

caf::behavior remote_worker_actor(caf::event_based_actor*, std::shared_ptr<RemoteWorkerLink> link) {
  return {
      [link](transport::BatchMessage& b) -> transport::BatchResult {
        const uint64_t step = b.step_id;
        link->to_worker->send(std::move(b));
        for (;;) {
          auto m = link->from_worker->receive(link->timeout);
          if (!m) return transport::BatchResult{.seq = 0, .step_id = step, .rids = {}, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = "remote worker timed out"};
          if (auto* r = std::get_if<transport::BatchResult>(&*m); r && r->step_id == step) return std::move(*r);
          // Anything else (a stale result) is skipped.
        }
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
