#include "actors/router_actor.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

namespace aerie::actors {

caf::behavior router_actor(caf::stateful_actor<RouterState>* self, std::vector<caf::actor> schedulers, std::shared_ptr<core::EngineFault> fault) {
  self->state.schedulers = std::move(schedulers);
  self->state.in_progress.assign(self->state.schedulers.size(), 0);
  self->state.fault = std::move(fault);
  for (const auto& s : self->state.schedulers) self->monitor(s);
  self->set_down_handler([self](caf::down_msg& d) {
    if (self->state.fault && d.reason && d.reason != caf::exit_reason::user_shutdown) self->state.fault->raise("a Scheduler actor died: " + self->system().render(d.reason));
  });
  return {
      [self](EngineFailed& f) {
        if (!self->state.failed) self->state.failed = f.reason;
        for (const auto& s : self->state.schedulers) self->send(s, f);
      },
      [self](SubmitRequest& s) -> caf::result<RequestDone> {
        auto& st = self->state;
        if (st.failed) return RequestDone{s.rid, {}, "engine unavailable: " + *st.failed, 503};
        if (st.schedulers.empty()) return RequestDone{s.rid, {}, "no scheduler to serve the request"};
        const size_t g = static_cast<size_t>(std::min_element(st.in_progress.begin(), st.in_progress.end()) - st.in_progress.begin());
        ++st.in_progress[g];
        st.group_of[s.rid] = g;
        auto promise = self->make_response_promise<RequestDone>();
        const uint64_t rid = s.rid;
        self->request(st.schedulers[g], caf::infinite, std::move(s))
            .then(
                [self, promise, g, rid](RequestDone& d) mutable {
                  --self->state.in_progress[g];
                  self->state.group_of.erase(rid);
                  promise.deliver(std::move(d));
                },
                [self, promise, g, rid](caf::error& e) mutable {
                  --self->state.in_progress[g];
                  self->state.group_of.erase(rid);
                  promise.deliver(RequestDone{rid, {}, "scheduler unreachable: " + self->system().render(e), 503});
                });
        return promise;
      },
      [self](GetLoad g) -> caf::result<LoadReport> {
        auto& st = self->state;
        auto promise = self->make_response_promise<LoadReport>();
        if (st.schedulers.empty()) return LoadReport{};
        // Ask every group; the last reply (or failure) delivers the sum.
        struct Gather {
          LoadReport sum;
          size_t pending;
        };
        auto gather = std::make_shared<Gather>(Gather{{}, st.schedulers.size()});
        for (const auto& s : st.schedulers)
          self->request(s, std::chrono::seconds(10), g)
              .then(
                  [gather, promise](LoadReport& r) mutable {
                    auto& t = gather->sum;
                    t.running += r.running, t.queued += r.queued, t.kv_used_tokens += r.kv_used_tokens;
                    t.kv_total_tokens += r.kv_total_tokens, t.spec_verify_ct += r.spec_verify_ct;
                    t.spec_accepted_tokens += r.spec_accepted_tokens;
                    t.forward_seconds += r.forward_seconds, t.forward_gap_seconds += r.forward_gap_seconds;
                    if (--gather->pending == 0) promise.deliver(t);
                  },
                  [gather, promise](caf::error&) mutable {
                    if (--gather->pending == 0) promise.deliver(gather->sum);
                  });
        return promise;
      },
      [self](AbortRequest& a) {
        auto it = self->state.group_of.find(a.rid);
        if (it != self->state.group_of.end()) self->send(self->state.schedulers[it->second], a);
      },
  };
}

}  // namespace aerie::actors
