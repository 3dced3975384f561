#include "actors/draft_worker_actor.hpp"

#include "actors/messages.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

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

caf::behavior draft_worker_actor(caf::event_based_actor*, std::shared_ptr<core::DraftWorkerCore> core, int cuda_device) {
  // The current device is per thread; a handler may run on any thread.
  auto on_device = [cuda_device] {
    if (cuda_device >= 0) cuda_runtime::set_device(cuda_device);
  };
  return {
      [core, on_device](DraftExtend& m) -> DraftDone {
        try {
          on_device();
          core->extend(m.seqs, m.hidden.view());
          return {.step_id = m.step_id, .error = ""};
        } catch (const std::exception& e) {
          return {.step_id = m.step_id, .error = e.what()};
        }
      },
      [core, on_device](DraftPropose& m) -> DraftProposal {
        try {
          on_device();
          return {.step_id = m.step_id, .trees = core->propose(m.seqs, m.steps, m.draft_tokens), .error = ""};
        } catch (const std::exception& e) {
          return {.step_id = m.step_id, .trees = {}, .error = e.what()};
        }
      },
      [core](DraftForget& m) { core->forget(m.rids); },
  };
}

DraftWorkerClient::DraftWorkerClient(caf::actor_system& system, caf::actor draft, core::DraftInfo info)
    : system_(system), draft_(std::move(draft)), info_(std::move(info)) {}

DraftWorkerClient::~DraftWorkerClient() {
  try {
    flush();
  } catch (...) {  // a destructor does not throw; the batch that needed it has its error already
  }
}

caf::scoped_actor& DraftWorkerClient::self() {
  if (!self_) self_ = std::make_unique<caf::scoped_actor>(system_);
  return *self_;
}

void DraftWorkerClient::extend(const std::vector<core::DraftExtendSeq>& seqs, const TensorView& target_hidden) {
  flush();
  pending_.emplace(self()->request(draft_, caf::infinite, DraftExtend{.step_id = ++step_, .seqs = seqs, .hidden = DeviceRows::of(target_hidden)}));
}

void DraftWorkerClient::flush() {
  if (!pending_) return;
  std::string error;
  auto handle = std::move(*pending_);
  pending_.reset();
  handle.receive([&](DraftDone& d) { error = d.error; }, [&](caf::error& e) { error = "the DraftWorker did not answer: " + system_.render(e); });
  AERIE_CHECK(error.empty(), "draft extend: " << error);
}

std::vector<spec::DraftTree> DraftWorkerClient::propose(const std::vector<core::DraftProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) {
  // Sent before the extend in flight is awaited: the actor's mailbox keeps the two in order,
  // so it runs the proposal right after the extend instead of going idle and being woken
  // (measured on the H200: the extra wake-ups cost a round ~2% over its parts).
  auto handle = self()->request(draft_, caf::infinite, DraftPropose{.step_id = ++step_, .seqs = seqs, .steps = steps, .draft_tokens = draft_tokens});
  std::string extend_error, error;
  try {
    flush();
  } catch (const std::exception& e) {  // the proposal's reply is still taken off the mailbox below
    extend_error = e.what();
  }
  std::vector<spec::DraftTree> trees;
  handle.receive(
      [&](DraftProposal& p) {
        error = p.error;
        trees = std::move(p.trees);
      },
      [&](caf::error& e) { error = "the DraftWorker did not answer: " + system_.render(e); });
  AERIE_CHECK(extend_error.empty(), extend_error);
  AERIE_CHECK(error.empty(), "draft proposal: " << error);
  return trees;
}

void DraftWorkerClient::forget(const std::vector<uint64_t>& rids) {
  // From the same sender as the requests, so it arrives before the next one.
  if (!rids.empty()) self()->send(draft_, DraftForget{.rids = rids});
}

}  // namespace aerie::actors
