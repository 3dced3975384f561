#include "actors/draft_worker_actor.hpp"

#include <thread>
#include <utility>

#include "actors/messages.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"

namespace aerie::actors {

DeviceRows DeviceRows::of(const TensorView& t) {
  if (!t.defined()) return {};
  AERIE_CHECK(t.ndim == 2, "device rows must be a matrix, got " << t.describe());
  return {.address = reinterpret_cast<uint64_t>(t.data), .rows = t.dim(0), .cols = t.dim(1), .dtype = static_cast<int32_t>(t.dtype),
          .device = static_cast<int32_t>(t.device)};
}

TensorView DeviceRows::view() const {
  if (address == 0) return {};
  return TensorView(reinterpret_cast<void*>(address), static_cast<DType>(dtype), {rows, cols}, static_cast<Device>(device));
}

TensorView DeviceRows::vector() const {
  if (address == 0) return {};
  return TensorView(reinterpret_cast<void*>(address), static_cast<DType>(dtype), {rows * cols}, static_cast<Device>(device));
}

namespace {

// One message off a blocking actor's mailbox: while `poll`, without sleeping (yielding the
// core when nothing is there: a CPU backend may need it), else waiting for it. Both sides
// of the DraftWorker's hand-off poll for a while after a message, since waking a blocked
// thread costs tens of microseconds a hop.
template <class Self, class... Handlers>
void receive_one(Self* self, bool poll, Handlers&&... handlers) {
  if (poll)
    self->receive(std::forward<Handlers>(handlers)..., caf::after(std::chrono::seconds(0)) >> [] { std::this_thread::yield(); });
  else
    self->receive(std::forward<Handlers>(handlers)...);
}

}  // namespace

void draft_worker_actor(caf::blocking_actor* self, std::shared_ptr<spec::DraftWorkerCore> core, int cuda_device) {
  // Its own thread: the current device is set once.
  if (cuda_device >= 0) cuda_runtime::set_device(cuda_device);
  // Behind the actor the core drafts the next chain itself once a verify's extend is
  // enqueued, without waiting for the target worker's propose_ahead (a hand-off a round).
  core->draft_ahead_behind_verified_chains(true);
  bool running = true;
  auto last = std::chrono::steady_clock::now();
  while (running) {
    bool handled = false;
    auto on_extend = [&](DraftExtend& m) -> DraftDone {
      handled = true;
      try {
        core->extend(m.seqs, m.hidden.view());
        return {.step_id = m.step_id, .error = ""};
      } catch (const std::exception& e) {
        return {.step_id = m.step_id, .error = ::aerie::client_message(e)};
      }
    };
    auto on_extend_verified = [&](DraftExtendVerified& m) -> DraftDone {
      handled = true;
      try {
        core->extend_verified_chains(m.seqs, m.argmax.vector(), m.hidden.view());
        return {.step_id = m.step_id, .error = ""};
      } catch (const std::exception& e) {
        return {.step_id = m.step_id, .error = ::aerie::client_message(e)};
      }
    };
    auto on_propose = [&](DraftPropose& m) -> DraftProposal {
      handled = true;
      try {
        return {.step_id = m.step_id, .trees = core->propose(m.seqs, m.steps, m.draft_tokens), .error = ""};
      } catch (const std::exception& e) {
        return {.step_id = m.step_id, .trees = {}, .error = ::aerie::client_message(e)};
      }
    };
    auto on_forget = [&](DraftForget& m) {
      handled = true;
      core->forget(m.rids);
    };
    auto on_chains = [&](DraftChainsOnDevice& m) -> DraftDeviceChains {
      handled = true;
      try {
        DraftDeviceChains r{.step_id = m.step_id, .found = false, .table = {}, .stride = 0, .rows = {}, .error = ""};
        if (auto d = core->chains_on_device(m.seqs, m.steps)) {
          r.found = true;
          r.table = DeviceRows::of_vector(d->table);
          r.stride = d->stride;
          r.rows = std::move(d->rows);
        }
        return r;
      } catch (const std::exception& e) {
        return {.step_id = m.step_id, .found = false, .table = {}, .stride = 0, .rows = {}, .error = ::aerie::client_message(e)};
      }
    };
    auto on_collect = [&](DraftCollectChains& m) -> DraftProposal {
      handled = true;
      try {
        return {.step_id = m.step_id, .trees = core->collect_chains(), .error = ""};
      } catch (const std::exception& e) {
        return {.step_id = m.step_id, .trees = {}, .error = ::aerie::client_message(e)};
      }
    };
    auto on_ahead = [&](DraftProposeAhead& m) -> DraftAheadQueued {
      handled = true;
      DraftAheadQueued q{.step_id = m.step_id, .queued = false, .table = {}, .stride = 0};
      try {
        core->propose_ahead(m.seqs, m.steps);
        if (const auto d = core->ahead_on_device()) {
          q.queued = true;
          q.table = DeviceRows::of_vector(d->table);
          q.stride = d->stride;
        }
      } catch (const std::exception& e) {  // not queued: the next proposal drafts afresh (and meets a device fault itself)
        AERIE_LOG_WARNING("draft ahead: " << e.what());
      }
      return q;
    };
    auto on_exit = [&](caf::exit_msg&) { running = false; };
    // Within kDraftWorkerSpin of its last message it polls: the next one (the round's
    // extend, then its proposal) starts without a thread wake-up.
    receive_one(self, std::chrono::steady_clock::now() - last < kDraftWorkerSpin, on_extend, on_extend_verified, on_propose, on_ahead, on_chains, on_collect, on_forget,
                on_exit);
    if (handled) last = std::chrono::steady_clock::now();
  }
}

DraftWorkerClient::DraftWorkerClient(caf::actor_system& system, caf::actor draft, spec::DraftInfo info)
    : system_(system), draft_(std::move(draft)), info_(std::move(info)) {}

DraftWorkerClient::~DraftWorkerClient() {
  try {
    flush();
  } catch (...) {  // a destructor does not throw; the batch that needed it has its error already
  }
  // The DraftWorker serves this client only, and a blocking actor never stops on its own.
  caf::anon_send_exit(draft_, caf::exit_reason::user_shutdown);
}

caf::scoped_actor& DraftWorkerClient::self() {
  if (!self_) {
    self_ = std::make_unique<caf::scoped_actor>(system_);
    (*self_)->monitor(draft_);  // a DraftWorker that goes down ends every wait with an error
  }
  return *self_;
}

void DraftWorkerClient::await(uint64_t step_id) {
  await_until([&] { return answered(step_id); });
}

template <class Done>
void DraftWorkerClient::await_until(Done done) {
  // Poll for a while before blocking: a reply usually comes within a draft forward or two
  // (H200 host: a round through the actor cost 1-3% over its parts with blocking waits).
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  while (!done() && down_.empty()) {
    auto on_done = [&](DraftDone& d) { replies_[d.step_id] = Reply{.error = std::move(d.error), .trees = {}, .chains = {}}; };
    auto on_proposal = [&](DraftProposal& p) { replies_[p.step_id] = Reply{.error = std::move(p.error), .trees = std::move(p.trees), .chains = {}}; };
    auto on_chains = [&](DraftDeviceChains& c) {
      Reply r{.error = std::move(c.error), .trees = {}, .chains = {}};
      if (c.found) {
        r.chains = spec::DeviceChains{.table = c.table.vector(), .stride = c.stride, .rows = std::move(c.rows)};
      }
      replies_[c.step_id] = std::move(r);
    };
    auto on_queued = [&](DraftAheadQueued& q) {
      if (q.step_id == ahead_.id) ahead_.queued = std::move(q);  // an older one's answer: no round reads it any more
    };
    auto on_down = [&](caf::down_msg& m) { down_ = "the DraftWorker went down: " + system_.render(m.reason); };
    receive_one(self().ptr(), std::chrono::steady_clock::now() < spin_until, on_done, on_proposal, on_chains, on_queued, on_down);
  }
}

bool DraftWorkerClient::answered(uint64_t step_id) const { return replies_.count(step_id) > 0 || !down_.empty(); }

DraftWorkerClient::Reply DraftWorkerClient::take(uint64_t step_id) {
  await(step_id);
  auto it = replies_.find(step_id);
  if (it == replies_.end()) return Reply{.error = down_, .trees = {}, .chains = {}};
  Reply r = std::move(it->second);
  replies_.erase(it);
  return r;
}

void DraftWorkerClient::drop_ahead_of(const std::vector<uint64_t>& rids) {
  for (uint64_t r : rids) ahead_.round.drop(r);  // as the DraftWorkerCore does when told
}

void DraftWorkerClient::extend(const std::vector<spec::DraftExtendSeq>& seqs, const TensorView& target_hidden) {
  flush();
  for (const auto& s : seqs) ahead_.round.drop(s.rid);
  pending_extend_ = ++step_;
  self()->send(draft_, DraftExtend{.step_id = pending_extend_, .seqs = seqs, .hidden = DeviceRows::of(target_hidden)});
}

void DraftWorkerClient::extend_verified_chains(const std::vector<spec::DraftExtendSeq>& seqs, const TensorView& verified_argmax,
                                               const TensorView& target_hidden) {
  flush();
  for (const auto& s : seqs) ahead_.round.drop(s.rid);
  pending_extend_ = ++step_;
  self()->send(draft_, DraftExtendVerified{.step_id = pending_extend_, .seqs = seqs,
                                           .argmax = DeviceRows::of_vector(verified_argmax),
                                           .hidden = DeviceRows::of(target_hidden)});
}

void DraftWorkerClient::flush() {
  if (pending_extend_ == 0) return;
  const uint64_t id = pending_extend_;
  pending_extend_ = 0;
  const Reply r = take(id);
  AERIE_CHECK(r.error.empty(), "draft extend: " << r.error);
}

std::vector<spec::DraftTree> DraftWorkerClient::propose(const std::vector<spec::DraftProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) {
  // Sent before the extend in flight is awaited: the actor's mailbox keeps the two in order,
  // so it runs the proposal right after the extend instead of going idle and being woken.
  const uint64_t id = ++step_;
  self()->send(draft_, DraftPropose{.step_id = id, .seqs = seqs, .steps = steps, .draft_tokens = draft_tokens});
  ahead_ = {};  // the proposal uses the draft ahead up, or drops it
  return take_behind_extend(id, "draft proposal").trees;
}

DraftWorkerClient::Reply DraftWorkerClient::take_behind_extend(uint64_t step_id, const char* what) {
  std::string extend_error;
  try {
    flush();
  } catch (const std::exception& e) {  // the request's reply is still taken below
    extend_error = ::aerie::client_message(e);
  }
  Reply r = take(step_id);
  AERIE_CHECK(extend_error.empty(), extend_error);
  AERIE_CHECK(r.error.empty(), what << ": " << r.error);
  return r;
}

void DraftWorkerClient::propose_ahead(const std::vector<spec::DraftProposeSeq>& seqs, int64_t steps) {
  // Behind the round's extend in the DraftWorker's mailbox; the next propose() comes after it.
  ahead_ = {.id = ++step_, .round = spec::DraftAheadRound::of(seqs, steps), .queued = std::nullopt, .given_id = 0, .given_rows = {}};
  self()->send(draft_, DraftProposeAhead{.step_id = ahead_.id, .seqs = seqs, .steps = steps});
}

std::optional<spec::DeviceChains> DraftWorkerClient::chains_on_device(const std::vector<spec::DraftProposeSeq>& seqs, int64_t steps) {
  // The extend in flight is enqueued before this verify (it reads the hidden states the verify
  // overwrites), and its error is this round's. Its answer is long in the mailbox, as is the
  // DraftWorker's answer to the draft ahead: no round trip.
  flush();
  if (ahead_.id == 0 || ahead_.given_id != 0) return std::nullopt;
  const auto rows = ahead_.round.rows_for(seqs, steps);
  if (!rows) return std::nullopt;  // propose() drafts afresh (and the DraftWorker counts the miss)
  await_until([&] { return ahead_.queued.has_value(); });
  AERIE_CHECK(down_.empty(), "draft chains on the device: " << down_);
  if (!ahead_.queued->queued) return std::nullopt;
  // The DraftWorker marks the same rows given (DraftWorkerCore::chains_on_device); its answer
  // is checked when the chains are collected.
  ahead_.given_id = ++step_;
  self()->send(draft_, DraftChainsOnDevice{.step_id = ahead_.given_id, .seqs = seqs, .steps = steps});
  spec::DeviceChains d{.table = ahead_.queued->table.vector(), .stride = ahead_.queued->stride, .rows = {}};
  for (size_t r : *rows) d.rows.push_back(static_cast<int32_t>(r));
  ahead_.given_rows = d.rows;
  return d;
}

std::vector<spec::DraftTree> DraftWorkerClient::collect_chains() {
  AERIE_CHECK(ahead_.given_id != 0, "collect_chains() without chains_on_device()");
  const uint64_t given = ahead_.given_id;
  const std::vector<int32_t> rows = ahead_.given_rows;
  ahead_ = {};
  const uint64_t id = ++step_;
  self()->send(draft_, DraftCollectChains{.step_id = id});
  const Reply g = take(given);
  Reply r = take(id);
  AERIE_CHECK(g.error.empty(), "draft chains on the device: " << g.error);
  AERIE_CHECK(g.chains && g.chains->rows == rows,
              "the DraftWorker's chains ahead are not the ones this client gave the verify (it had " << (g.chains ? "other rows" : "none") << ")");
  AERIE_CHECK(r.error.empty(), "draft chains: " << r.error);
  return std::move(r.trees);
}

void DraftWorkerClient::forget(const std::vector<uint64_t>& rids) {
  // From the same sender as the requests, so it arrives before the next one.
  drop_ahead_of(rids);
  if (!rids.empty()) self()->send(draft_, DraftForget{.rids = rids});
}

}  // namespace aerie::actors
