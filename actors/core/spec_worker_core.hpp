#pragma once
// SpecWorkerCore: one speculative iteration on a rank, target and draft together
// (sglang's EAGLE worker, chain or tree drafting). For an EXTEND batch it runs the target over the
// prompt chunks (capturing hidden states), samples where a chunk ends the prompt, and runs
// the draft over the same positions. For a VERIFY batch (spec_steps = S) it proposes S
// draft tokens per request (a chain, or with topk > 1 a tree of spec_draft_tokens nodes),
// verifies them in one target forward (a tree under its attention mask), accepts greedily
// (temperature 0) or by target-only rejection sampling (exact in distribution), moves a
// tree's accepted KV rows to their positions and runs the draft over the committed tokens. The result lists each request's committed
// tokens (accepted drafts + one bonus); rejected positions are left for the Scheduler to free.
#include <chrono>
#include <memory>
#include <optional>
#include <set>

#include "spec/draft_port.hpp"
#include "actors/core/logprob_reader.hpp"
#include "actors/core/spec_stage_times.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "kernels/staging.hpp"
#include "spec/decode_graph_runner.hpp"
#include "spec/prefill_graph_runner.hpp"
#include "spec/device_argmax.hpp"
#include "spec/tree_acceptor.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

// CUDA graphs for verifies: every request verifies tokens_per_request tokens (a chain:
// speculative_num_steps + 1; a tree: speculative_num_draft_tokens nodes under its mask),
// captured for batches of up to max_bs requests; 0 (or a CPU target) runs every verify eagerly.
struct VerifyGraphOptions {
  int64_t max_bs = 0;
  int64_t tokens_per_request = 0;
  int64_t max_context = 0;  // the longest context a request may have
  bool tree = false;        // tree drafting: the graphs take the verify's tree mask
  // > 0 on CUDA: one request's prefill of up to this many tokens replays a graph
  // (spec::PrefillGraphRunner, writing the hidden states the draft extend reads).
  int64_t prefill_max_tokens = 0;
};

class SpecWorkerCore {
 public:
  // draft: the rank's DraftWorkerCore, or a client of its DraftWorker actor.
  SpecWorkerCore(model::LlamaModel& target, model::KvCache& kv, spec::DraftPort& draft, int64_t max_batch, VerifyGraphOptions graphs = {});
  // The target stops capturing hidden states (a CUDA-graph capture must not allocate them).
  ~SpecWorkerCore();
  SpecWorkerCore(const SpecWorkerCore&) = delete;
  SpecWorkerCore& operator=(const SpecWorkerCore&) = delete;
  // Throws aerie::Error on a malformed batch (the TargetWorkerCore turns it into a result error).
  transport::BatchResult execute(const transport::BatchMessage& m);
  void forget(const std::vector<uint64_t>& rids);
  // The target forward of a verify batch: a captured graph when one fits, else eager.
  // Returns the logits of every row; valid until the next forward.
  TensorView verify_forward(const model::ForwardBatch& b);
  const SpecStageTimes& stage_times() const { return times_; }
  void reset_stage_times() { times_ = {}; }

 private:
  transport::BatchResult extend(const transport::BatchMessage& m);
  transport::BatchResult verify(const transport::BatchMessage& m);
  // After a batch of prompts that all ended (a token sampled for each): their first chain,
  // drafted ahead as a verify's next one is, when the next verify is theirs alone (the
  // requests decoding are these).
  void propose_ahead_after_prompts(const transport::BatchMessage& m, const std::vector<spec::DraftExtendSeq>& ext);
  // logits[rows[i]] for every i, as one [rows, vocab] block.
  TensorView gather_logit_rows(const TensorView& logits, const std::vector<int32_t>& rows);
  // The argmax of every verify row on the device, in stream order: the verify graph's own, or
  // taken from the eager verify's logits.
  TensorView verify_argmax_on_device(const TensorView& logits);
  // Moves the target's KV rows src[i] -> dst[i] in every layer (tree compaction).
  void move_kv(const std::vector<int32_t>& src, const std::vector<int32_t>& dst);

  model::LlamaModel& target_;
  model::KvCache& kv_;
  spec::DraftPort& draft_;
  const spec::DraftInfo info_;
  model::Sampler sampler_;
  model::ArgmaxSampler argmax_;
  spec::TreeAcceptor acceptor_;
  Buffer move_slots_;  // [2 * moves] i32: sources, then destinations
  LogprobReader logprobs_;
  Buffer logit_rows_, committed_logits_;  // verify: the committed tokens' logit rows, gathered
  std::unique_ptr<spec::DecodeGraphRunner> verify_graphs_;
  std::unique_ptr<spec::PrefillGraphRunner> prefill_graphs_;
  bool last_verify_replayed_ = false;  // the last verify_forward ran a graph (its argmax is ready)
  // A greedy chain verify whose draft extend goes right behind it: the eager verify's argmax,
  // and the argmax's copy to the host with the mark the host waits for (not the extend's).
  std::unique_ptr<spec::DeviceArgmax> eager_argmax_;
  Buffer eager_argmax_out_;  // its output, as many rows as it takes
  ReadBackBeside argmax_back_;  // the argmax's copy back, beside the extend behind the verify
  SpecStageTimes times_;
  // When the last batch was a verify: the time it returned (SpecStageTimes::turnaround_ms).
  std::optional<std::chrono::steady_clock::time_point> last_verify_returned_;
  int64_t chain_steps_ = 0;             // the last chain verify's draft steps (0: none yet)
  std::set<uint64_t> decoding_;         // requests whose prompt ended, until they are forgotten
};

}  // namespace aerie::core
