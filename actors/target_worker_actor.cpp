#include "actors/target_worker_actor.hpp"

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

}  // namespace aerie::actors
