#pragma once
// DraftChainRunner: the draft forwards of a chain proposal (topk 1) as one device-side
// sequence, sglang's multi-step draft. Step j's input token is step j - 1's argmax, mapped
// to a target id on the device (an EAGLE3 head's reduced vocabulary, a hot-token map); an
// EAGLE head's input hidden state is the previous step's output. The first step reads each
// request's state on the device (its next token and hidden state, which the draft extend
// left at the request's row), so nothing of the state crosses to the host either. Every step's positions, slots and context
// are uploaded before the first, so nothing waits on the host between steps: one copy of
// the [steps, batch] tokens comes back at the end.
//
// With graphs (CUDA) the whole sequence is one CUDA graph per batch-size bucket, captured
// largest first over one set of max-size workspaces (one per step); a batch is padded to
// its bucket as the decode graphs pad (spec/decode_graph_runner.hpp: padded sequences read
// token 0, write the dummy KV slot 0 and attend to it; their state row is row 0; their
// tokens are sliced away). Without graphs (the CPU, --disable-cuda-graph) the same sequence
// runs eagerly over the same workspaces, and on the CPU propose_while may end it early
// (--speculative-chain-stop-probability, spec/chain_stop.hpp).
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "model/eagle_head.hpp"
#include "model/forward_workspace.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"
#include "spec/bucket_graphs.hpp"
#include "spec/chain_stop.hpp"
#include "spec/draft_net.hpp"
#include "spec/device_argmax.hpp"

namespace aerie::spec {

// One request of a chain proposal.
struct ChainSeq {
  int32_t first_position;  // where step 1's input token (the request's next token) sits
  const std::vector<int32_t>* context;  // slots of positions [0, first_position + steps - 1)
  int32_t state_row;       // the request's row of the state pools
};

// out[i] = the target id of draft id ids[i], through the head's map [draft vocab, 1] i32 (an
// undefined map: the ids are the target's). out: [n, 1] i32. Enqueued only (capturable).
void draft_ids_to_target(const TensorView& ids, const TensorView& to_target, const TensorView& out, const Stream& stream);

class DraftChainRunner {
 public:
  // net: an EAGLE head or a STANDALONE model. The requests' state, at fixed addresses for the
  // runner's life (graphs read them), one row per request: state_pool, EAGLE's hidden states
  // [rows, H]; next_pool, each request's next token (a target id) [rows] i32. to_target: the
  // head's draft -> target id map [draft vocab, 1] i32 (empty: the same ids). steps: the
  // proposal's length (the next token plus steps - 1 forwards); max_bs: the largest batch
  // (and bucket); max_context: the longest context a request may have (fixes the attention
  // splits per bucket). graphs: capture (CUDA only).
  DraftChainRunner(DraftNet net, const TensorView& state_pool, const TensorView& next_pool,
                   const TensorView& to_target, model::KvCache& kv, const model::LlamaModel& target, int64_t steps, int64_t max_bs,
                   int64_t max_context, bool graphs);
  DraftChainRunner(const DraftChainRunner&) = delete;
  DraftChainRunner& operator=(const DraftChainRunner&) = delete;

  int64_t steps() const { return steps_; }
  // Whether a proposal of these requests fits (batch size, context slots); else the caller
  // drafts step by step.
  bool can_run(const std::vector<ChainSeq>& seqs) const;
  // Each request's `steps` draft tokens (target ids), its next token first.
  std::vector<std::vector<int32_t>> propose(const std::vector<ChainSeq>& seqs) {
    enqueue_proposal(seqs);
    return collect_proposal();
  }
  // propose() cut short by `stop` (without graphs: the host looks at every step's logits
  // before the next runs): each request's draft tokens, its next token first, as many as
  // stop.tokens() when it stopped drafting (the same for every request).
  std::vector<std::vector<int32_t>> propose_while(const std::vector<ChainSeq>& seqs, ChainStop& stop);
  // propose() in two halves: enqueue_proposal() uploads the inputs and enqueues the chain and
  // the copy of its tokens back; collect_proposal() waits for them. Between the two the host is
  // free (a draft ahead runs on the device while the Scheduler plans the next round). One
  // proposal at a time: a second enqueue needs the first collected.
  void enqueue_proposal(const std::vector<ChainSeq>& seqs);
  std::vector<std::vector<int32_t>> collect_proposal();
  // While a proposal is enqueued: its tokens where the device writes them, [steps * bucket]
  // i32, request i's step j at j * pending_bucket() + i (a verify may read them there).
  TensorView pending_tokens() const;
  int64_t pending_bucket() const { return pending_bs_; }
  // The bucket a batch of this many requests replays (-1: none captured).
  int64_t bucket_for(int64_t batch_size) const { return buckets_.bucket_for(batch_size); }
  bool graphs() const { return buckets_.graphs(); }

 private:
  // Enqueues the whole chain for a batch padded to `bs` whose inputs are uploaded.
  void enqueue(int64_t bs);
  model::ForwardDims dims_for(int64_t bs) const;

  DraftNet net_;
  TensorView state_pool_, next_pool_, to_target_;
  model::KvCache& kv_;
  const model::LlamaModel& target_;
  Stream stream_;
  DType act_;
  int64_t steps_, max_bs_, max_context_;
  BucketGraphs buckets_;
  std::vector<std::unique_ptr<model::ForwardWorkspace>> ws_;  // one per draft forward
  std::unique_ptr<DeviceArgmax> argmax_;
  Buffer tokens_;      // [steps, max_bs] i32: the next tokens, then every step's token (target ids)
  Buffer rows_;        // [max_bs] i32: each request's state row
  Buffer in_hidden_;   // [max_bs, H]: an EAGLE step's input hidden state
  HostStaging rows_host_, tokens_host_;
  // Marks the tokens' copy back: collect_proposal waits for it, not for the stream, where a
  // verify reading the chain on the device may already be enqueued behind it.
  StreamEvent tokens_copied_{Device::kCpu};
  // The steps' inputs copied in, and the tokens copied out, beside the work around the chain.
  SideCopyStream side_;
  int64_t pending_n_ = -1, pending_bs_ = 0;  // the enqueued proposal's requests and bucket (-1: none)
  ChainStop* stop_ = nullptr;  // propose_while's, while it runs
  int64_t stop_rows_ = 0;      // its requests (the logits' first rows)
  int64_t kept_steps_ = 0;     // the tokens a request's proposal keeps (steps_ unless stop_ cut it)
};

}  // namespace aerie::spec
