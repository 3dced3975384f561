#pragma once
// The TargetWorker actor: answers each BatchMessage with the BatchResult of running it.
// Spawn it detached (it owns a thread), so the forward never blocks the actor scheduler.
// It enqueues each batch as it arrives (core::TargetWorkerCore::launch) and answers once the
// batch's work has run, which a core::CompletionWaiter thread tells it: under overlap
// scheduling batch N + 1 is enqueued on the device while N still runs, and answers keep the
// order of the batches. Whoever owns the core's model sends WorkerStop (actors/messages.hpp)
// before the model goes: it ends the waiter thread, which must never be the one to let the
// actor (and the core) go.
// A remote worker is the same behavior with a ZeroMQ hop: remote_worker_actor forwards the
// batch to another rank (where a bridge hands it to that rank's TargetWorker actor) and
// answers with what comes back. It forwards each batch as soon as it arrives, so that under
// overlap scheduling the rank holds its next batch while it runs the last one; the answers
// come back in order, each awaited after the batches that arrived before it were forwarded.
#include <caf/all.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "actors/core/target_worker_core.hpp"
#include "actors/messages.hpp"
#include "transport/zmq_channel.hpp"

namespace aerie::actors {

caf::behavior target_worker_actor(caf::event_based_actor* self, std::shared_ptr<core::TargetWorkerCore> core);

struct RemoteWorkerLink {
  std::unique_ptr<transport::ZmqSender> to_worker;
  std::unique_ptr<transport::ZmqReceiver> from_worker;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};
caf::behavior remote_worker_actor(caf::event_based_actor* self, std::shared_ptr<RemoteWorkerLink> link);

// A TP group's worker: every batch goes to each rank's worker (`ranks`, TP rank order: this
// process's TargetWorker or a remote one), which run it in lock-step through their
// collectives; the answer is the group's one result once all have answered
// (core::TpResults: they must agree).
caf::behavior tp_group_worker_actor(caf::event_based_actor* self, std::vector<caf::actor> ranks);

}  // namespace aerie::actors
