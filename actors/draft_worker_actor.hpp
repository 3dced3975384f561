#pragma once
// The DraftWorker actor: one per rank, next to the TargetWorker, sharing its GPU, stream
// and hidden states. It owns the rank's DraftWorkerCore and answers the speculative
// worker's requests: DraftExtend (follow the committed tokens) and DraftExtendVerified (the
// same right behind a greedy chain verify, the committed tokens found on the device) with
// DraftDone, DraftPropose (chain or tree drafts) with DraftProposal, DraftProposeAhead (the
// next round's chain, drafted while the result travels) with DraftAheadQueued,
// DraftChainsOnDevice (a chain drafted ahead, read on the device) with DraftDeviceChains and
// DraftCollectChains with DraftProposal, and takes DraftForget (requests that ended).
// A failed request is answered with its error; the actor keeps serving.
//
// DraftWorkerClient is the DraftPort the rank's SpecWorkerCore calls: each call is a
// message to the actor, whose answer comes back as a message (matched by step id), so one
// speculative iteration is draft -> verify -> accept -> draft extend as messages between
// the two. A proposal is awaited on the calling (TargetWorker) thread, polling its mailbox
// for a few milliseconds before blocking (a blocked thread's wake-up costs tens of
// microseconds a hop); an extend is not awaited: it runs on the GPU while the result goes
// back to the Scheduler and the next batch is planned, and the next call (or flush(),
// before the next target forward overwrites the hidden states it reads) awaits it and
// reports its error. The DraftWorker itself polls its mailbox for a while after each
// message, so the round's extend and proposal start without waking a thread. A chain drafted
// ahead is named for the next verify from the client's own copy of what it asked for and the
// DraftWorker's DraftAheadQueued, without a round trip (the DraftChainsOnDevice it sends is
// answered by the time the chains are collected, and checked then).
#include <caf/all.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spec/draft_ahead_round.hpp"
#include "spec/draft_port.hpp"
#include "spec/draft_worker_core.hpp"

namespace aerie::actors {

// Rows of this rank's device memory (the target's captured hidden states), by address:
// valid only inside the process, for the duration of the request that carries it.
struct DeviceRows {
  uint64_t address = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int32_t dtype = 0;
  int32_t device = 0;
  static DeviceRows of(const TensorView& t);
  TensorView view() const;
  // A vector ([n] ids: an argmax, a chain table) as rows of one column, and back.
  static DeviceRows of_vector(const TensorView& v) { return of(v.defined() ? v.reshape({v.numel(), 1}) : v); }
  TensorView vector() const;
};

struct DraftExtend {
  uint64_t step_id = 0;
  std::vector<spec::DraftExtendSeq> seqs;
  DeviceRows hidden;  // EAGLE: the target's hidden states; empty otherwise
};
// spec::DraftPort::extend_verified_chains through the actor: answered, as DraftExtend, with DraftDone.
struct DraftExtendVerified {
  uint64_t step_id = 0;
  std::vector<spec::DraftExtendSeq> seqs;
  DeviceRows argmax;  // [rows, 1] i32: the verify's argmax of every row
  DeviceRows hidden;  // EAGLE: the target's hidden states; empty otherwise
};
struct DraftPropose {
  uint64_t step_id = 0;
  std::vector<spec::DraftProposeSeq> seqs;
  int64_t steps = 0;
  int64_t draft_tokens = 0;
};
// The next round's chain, drafted ahead (spec::DraftPort::propose_ahead): answered with
// DraftAheadQueued once it is enqueued (or not), so the client knows where its tokens are.
struct DraftProposeAhead {
  uint64_t step_id = 0;
  std::vector<spec::DraftProposeSeq> seqs;
  int64_t steps = 0;
};
struct DraftAheadQueued {
  uint64_t step_id = 0;
  bool queued = false;  // false: nothing was drafted ahead (the next round drafts afresh)
  DeviceRows table;     // [slots, 1] i32: where the device writes the chain's tokens
  int64_t stride = 0;
};
struct DraftForget {
  std::vector<uint64_t> rids;
};
// spec::DraftPort::chains_on_device and collect_chains through the actor: answered with
// DraftDeviceChains, and with DraftProposal.
struct DraftChainsOnDevice {
  uint64_t step_id = 0;
  std::vector<spec::DraftProposeSeq> seqs;
  int64_t steps = 0;
};
struct DraftCollectChains {
  uint64_t step_id = 0;
};
struct DraftDeviceChains {
  uint64_t step_id = 0;
  bool found = false;
  DeviceRows table;  // [slots, 1] i32
  int64_t stride = 0;
  std::vector<int32_t> rows;
  std::string error;  // empty on success
};
struct DraftDone {
  uint64_t step_id = 0;
  std::string error;  // empty on success
};
struct DraftProposal {
  uint64_t step_id = 0;
  std::vector<spec::DraftTree> trees;
  std::string error;  // empty on success
};

// How long the DraftWorker polls its mailbox after a message before it blocks.
constexpr std::chrono::milliseconds kDraftWorkerSpin{10};
// cuda_device: the device the core's stream lives on (-1: CPU); set on the actor's thread.
// The core drafts ahead behind each verify's extend (DraftWorkerCore::draft_ahead_behind_verified_chains).
// A blocking actor on its own thread (spawning it detaches it); it runs until it gets an
// exit message (DraftWorkerClient sends one when it goes).
void draft_worker_actor(caf::blocking_actor* self, std::shared_ptr<spec::DraftWorkerCore> core, int cuda_device);

class DraftWorkerClient : public spec::DraftPort {
 public:
  DraftWorkerClient(caf::actor_system& system, caf::actor draft, spec::DraftInfo info);
  ~DraftWorkerClient() override;
  const spec::DraftInfo& info() const override { return info_; }
  void extend(const std::vector<spec::DraftExtendSeq>& seqs, const TensorView& target_hidden) override;
  void extend_verified_chains(const std::vector<spec::DraftExtendSeq>& seqs, const TensorView& verified_argmax,
                              const TensorView& target_hidden) override;
  std::vector<spec::DraftTree> propose(const std::vector<spec::DraftProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) override;
  void forget(const std::vector<uint64_t>& rids) override;
  void propose_ahead(const std::vector<spec::DraftProposeSeq>& seqs, int64_t steps) override;
  std::optional<spec::DeviceChains> chains_on_device(const std::vector<spec::DraftProposeSeq>& seqs, int64_t steps) override;
  std::vector<spec::DraftTree> collect_chains() override;
  void flush() override;

 private:
  // A reply of the DraftWorker: DraftDone (no trees) or DraftProposal.
  struct Reply {
    std::string error;
    std::vector<spec::DraftTree> trees;
    std::optional<spec::DeviceChains> chains;  // DraftDeviceChains that found one
  };
  // How long a wait polls the mailbox before it blocks.
  static constexpr std::chrono::microseconds kSpin{5000};
  // Made on first use, on the thread that calls (the TargetWorker's).
  caf::scoped_actor& self();
  // Takes replies off the mailbox until step_id's has come (or the DraftWorker went down).
  void await(uint64_t step_id);
  // The same until `done()` holds (or the DraftWorker went down).
  template <class Done>
  void await_until(Done done);
  bool answered(uint64_t step_id) const;
  // step_id's reply; a DraftWorker that went down answers with that as the error.
  Reply take(uint64_t step_id);
  // The reply of a request sent before the extend in flight was awaited (the mailbox keeps
  // the two in order): awaits the extend, then the reply; throws the extend's error, or the
  // reply's prefixed with `what`.
  Reply take_behind_extend(uint64_t step_id, const char* what);
  caf::actor_system& system_;
  caf::actor draft_;
  spec::DraftInfo info_;
  std::unique_ptr<caf::scoped_actor> self_;
  uint64_t step_ = 0;
  uint64_t pending_extend_ = 0;  // the extend in flight (0: none)
  // The chain drafted ahead as this client asked for it, mirrored so that chains_on_device()
  // answers without a round trip to the DraftWorker (which marks the same rows given when its
  // DraftChainsOnDevice arrives; collect_chains() checks that it did).
  struct Ahead {
    uint64_t id = 0;                         // its DraftProposeAhead (0: none)
    spec::DraftAheadRound round;
    std::optional<DraftAheadQueued> queued;  // the DraftWorker's answer, once taken off the mailbox
    uint64_t given_id = 0;                   // the DraftChainsOnDevice that gave it to a verify (0: not given)
    std::vector<int32_t> given_rows;
  };
  Ahead ahead_;
  void drop_ahead_of(const std::vector<uint64_t>& rids);
  std::map<uint64_t, Reply> replies_;  // replies taken off the mailbox, not yet asked for
  std::string down_;                   // why the DraftWorker went down, once it has
};

}  // namespace aerie::actors
