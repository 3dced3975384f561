#include "actors/router_actor.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "kernels/log.hpp"

namespace aerie::actors {

namespace {

size_t least_busy(const RouterState& st) {
  return static_cast<size_t>(std::min_element(st.in_progress.begin(), st.in_progress.end()) - st.in_progress.begin());
}

// Sends one request to Scheduler g; `reply` gets its RequestDone, or why it could not be served.
template <class Reply>
void forward(caf::stateful_actor<RouterState>* self, size_t g, SubmitRequest s, Reply reply) {
  auto& st = self->state;
  ++st.in_progress[g];
  st.group_of[s.rid] = g;
  const uint64_t rid = s.rid;
  auto ended = [self, g, rid] {
    --self->state.in_progress[g];
    self->state.group_of.erase(rid);
  };
  self->request(st.schedulers[g], caf::infinite, std::move(s))
      .then(
          [ended, reply](RequestDone& d) mutable {
            ended();
            reply(std::move(d));
          },
          [self, ended, reply, rid](caf::error& e) mutable {
            ended();
            reply(RequestDone{rid, {}, "scheduler unreachable: " + self->system().render(e), 503});
          });
}

// Why no Scheduler can take a request now, if none can.
std::optional<RequestDone> refusal(const RouterState& st, uint64_t rid) {
  if (st.failed) return RequestDone{rid, {}, "engine unavailable: " + *st.failed, 503};
  if (st.schedulers.empty()) return RequestDone{rid, {}, "no scheduler to serve the request"};
  return std::nullopt;
}

}  // namespace

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
        if (auto no = refusal(self->state, s.rid)) return std::move(*no);
        auto promise = self->make_response_promise<RequestDone>();
        forward(self, least_busy(self->state), std::move(s), [promise](RequestDone d) mutable { promise.deliver(std::move(d)); });
        return promise;
      },
      [self](SubmitGroup& group) {
        // One Scheduler for all, in order, every member but the last marked as followed: the
        // Scheduler admits them together (CAF keeps one sender's messages in order). A member
        // without a `stream_to` has nobody to answer: it is dropped.
        std::erase_if(group.members, [](const SubmitRequest& s) {
          if (!s.stream_to) AERIE_LOG_ERROR("request " << s.rid << " of a SubmitGroup has no stream_to to answer: dropped");
          return !s.stream_to;
        });
        const size_t g = least_busy(self->state);
        for (size_t i = 0; i < group.members.size(); ++i) {
          SubmitRequest& s = group.members[i];
          auto reply = [self, to = s.stream_to](RequestDone d) { self->send(to, std::move(d)); };
          if (auto no = refusal(self->state, s.rid)) {
            reply(std::move(*no));
            continue;
          }
          s.group_follows = i + 1 < group.members.size();
          forward(self, g, std::move(s), reply);
        }
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
          // No timeout: a Scheduler answers at once or is gone (an error), and in CAF 0.17 an
          // actor's request timeout stays scheduled after the answer and holds the actor
          // system's shutdown until it would have fired (every aerie-generate run, and
          // aerie-serve after a /metrics scrape, ended 10 s late).
          self->request(s, caf::infinite, g)
              .then(
                  [gather, promise](LoadReport& r) mutable {
                    auto& t = gather->sum;
                    t.running += r.running, t.queued += r.queued, t.kv_used_tokens += r.kv_used_tokens;
                    t.kv_total_tokens += r.kv_total_tokens, t.spec_verify_ct += r.spec_verify_ct;
                    t.spec_accepted_tokens += r.spec_accepted_tokens;
                    t.forward_seconds += r.forward_seconds, t.forward_gap_seconds += r.forward_gap_seconds;
                    t.forward_batches += r.forward_batches;
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
