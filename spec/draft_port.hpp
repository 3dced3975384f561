#pragma once
// DraftPort: what a rank's speculative worker (SpecWorkerCore) asks of its draft model,
// whether the draft runs in the same call stack (DraftWorkerCore) or behind the rank's
// DraftWorker actor (actors/draft_worker_actor.hpp). The arguments are plain data; the
// target's hidden states travel as a view of this rank's device memory.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/tensor.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::spec {

enum class SpecAlgorithm { kNone, kEagle, kEagle3, kStandalone };
// "EAGLE" | "EAGLE3" | "STANDALONE" (sglang's names); throws aerie::Error otherwise.
SpecAlgorithm parse_spec_algorithm(const std::string& name);

// What the target must know of its draft: which hidden states to capture, how to draft.
struct DraftInfo {
  SpecAlgorithm algorithm = SpecAlgorithm::kNone;
  int64_t topk = 1;                 // > 1: tree drafting
  std::vector<int64_t> aux_layers;  // EAGLE3: the target layers whose input hidden states it reads
  bool eagle() const { return algorithm == SpecAlgorithm::kEagle || algorithm == SpecAlgorithm::kEagle3; }
};

// One sequence of a draft extend: the draft runs over tokens the target has committed (or
// over a prompt chunk), so its KV cache and state follow the target.
struct DraftExtendSeq {
  uint64_t rid = 0;
  std::vector<int32_t> tokens;       // draft input tokens, one per position
  int32_t first_position = 0;
  std::vector<int32_t> slots;        // the KV slot of each token
  std::vector<int32_t> context;      // slots of positions [0, first_position + tokens.size())
  std::vector<int32_t> hidden_rows;  // EAGLE: each token's row in the target's hidden states
  bool keep = false;                 // the last token's proposal becomes the request's state
  // After a chain verify: slots of the positions after the tokens that the verify reserved,
  // so the extend may run at its fixed width of steps + 1 (spec/draft_extend_runner.hpp).
  std::vector<int32_t> spare_slots;
};

// A chain proposal still on the device (DraftPort::chains_on_device): request i's draft j
// (j = 0 .. steps - 1) is table[j * stride + rows[i]].
struct DeviceChains {
  TensorView table;  // [slots] i32
  int64_t stride = 0;
  std::vector<int32_t> rows;
};

// One request of a draft proposal.
struct DraftProposeSeq {
  uint64_t rid = 0;
  int32_t first_position = 0;    // position of the first draft forward's input
  // Slots of positions [0, first_position + steps - 1) for a chain; a tree writes its
  // (steps - 1) * topk scratch rows to the slots from first_position on.
  std::vector<int32_t> context;
  int32_t root_token = 0;        // the request's last committed token (the tree's root)
};

class DraftPort {
 public:
  virtual ~DraftPort() = default;
  virtual const DraftInfo& info() const = 0;
  // target_hidden: the target's captured hidden states (EAGLE), or an empty view. May
  // return before the draft has run (behind an actor): flush() waits for it.
  virtual void extend(const std::vector<DraftExtendSeq>& seqs, const TensorView& target_hidden) = 0;
  // The extend right behind a greedy chain verify, before the host has accepted: each
  // request's tokens are its verified chain (root, then drafts: steps + 1 of them), slots the
  // verified positions' from first_position on, context the slots of [0, first_position),
  // hidden_rows (EAGLE) its verified rows' in target_hidden; verified_argmax ([>= requests *
  // (steps + 1)] i32 on the device, valid in stream order) the verify's argmax of every row.
  // The draft extends over what the verify commits (the drafts that equal the argmax of the
  // row before them, up to the first that does not, then the bonus), found on the device
  // where it can (no host round trip between the verify and the extend), else by reading the
  // argmax back. As extend(): may return before the draft has run; flush() waits for it.
  virtual void extend_verified_chains(const std::vector<DraftExtendSeq>& seqs, const TensorView& verified_argmax,
                                      const TensorView& target_hidden) = 0;
  // Waits for an extend still running and throws its error. Call before anything that
  // overwrites the target's hidden states (the next target forward); propose() flushes.
  virtual void flush() {}
  // Each request's verify tree: a chain of `steps` drafts (topk 1), or draft_tokens nodes.
  virtual std::vector<spec::DraftTree> propose(const std::vector<DraftProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) = 0;
  // Drops the state of requests that ended.
  virtual void forget(const std::vector<uint64_t>& rids) = 0;
  // The next round's chain proposal, asked for right after this round's extend (each request's
  // context: the slots of positions [0, first_position)); a draft that drafts ahead enqueues it
  // on the device and hands it out when propose() asks for the same requests, positions, roots
  // and slots, so the chain runs while the result goes to the Scheduler and the next verify is
  // planned. Others ignore it (the default).
  virtual void propose_ahead(const std::vector<DraftProposeSeq>& seqs, int64_t steps) {
    (void)seqs;
    (void)steps;
  }
  // A chain proposal for these requests that the draft has ahead and still on the device, so
  // that a verify may read its tokens there (as future-token ids into the table) instead of
  // waiting for them on the host; nothing otherwise (then propose()). After a proposal is
  // given, collect_chains() must follow (once the verify is enqueued): the same chains on the
  // host, a tree each.
  virtual std::optional<DeviceChains> chains_on_device(const std::vector<DraftProposeSeq>& seqs, int64_t steps) {
    (void)seqs;
    (void)steps;
    return std::nullopt;
  }
  virtual std::vector<spec::DraftTree> collect_chains() { return {}; }
};

}  // namespace aerie::spec
