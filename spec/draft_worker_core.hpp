#pragma once
// DraftWorkerCore: the CAF-free part of a DraftWorker. It owns the draft model (an EAGLE /
// EAGLE3 head over the target's hidden states, or a STANDALONE small Llama), the draft's
// KV cache (same slots as the target's positions) and each request's draft state: the
// token the draft proposes next and, for EAGLE, the head's hidden state that produced it.
//   extend(): after a target forward (prefill chunk or verify), runs the draft over the
//     tokens now committed, so its cache and state follow the target.
//   propose(): `steps` chain draft tokens per request (argmax), from the state on.
//   propose_tree(): with topk > 1, expands the topk best nodes by their topk tokens per
//     step and returns each request's verify tree (spec/draft_tree.hpp).
// Token ids in and out are target ids (an EAGLE3 head's reduced vocabulary is mapped).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "model/eagle_head.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "spec/draft_ahead_round.hpp"
#include "spec/draft_port.hpp"
#include "spec/draft_chain_runner.hpp"
#include "spec/draft_extend_runner.hpp"
#include "spec/draft_tree.hpp"
#include "spec/draft_tree_runner.hpp"

namespace aerie::spec {

class DraftWorkerCore : public DraftPort {
 public:
  // Exactly one of head / standalone is set, matching the algorithm.
  DraftWorkerCore(SpecAlgorithm algorithm, std::unique_ptr<model::EagleHead> head, std::unique_ptr<model::LlamaModel> standalone,
                  model::KvCache& draft_kv, const model::LlamaModel& target, int64_t max_requests, int64_t topk = 1);
  // Waits for a draft ahead still on the device (its tokens are copied into the runner's staging).
  ~DraftWorkerCore() override;
  SpecAlgorithm algorithm() const { return info_.algorithm; }
  int64_t topk() const { return info_.topk; }
  bool eagle() const { return info_.eagle(); }

  using ExtendSeq = DraftExtendSeq;
  using ProposeSeq = DraftProposeSeq;
  // target_hidden: the target's captured hidden states (EAGLE), or an empty view.
  void extend(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden) override;
  // Through the chain's extend runner when it takes the batch (the committed tokens and last
  // row found on the device), else the argmax read back and extend().
  void extend_verified_chains(const std::vector<ExtendSeq>& seqs, const TensorView& verified_argmax, const TensorView& target_hidden) override;

  // `steps` tokens per request: the state's token, then steps - 1 draft forwards.
  std::vector<std::vector<int32_t>> propose_chain(const std::vector<ProposeSeq>& seqs, int64_t steps);
  // Tree drafting (topk > 1): steps - 1 expansions of topk nodes per request, each query
  // seeing its request's context and its own path; the best draft_tokens - 1 candidates
  // by cumulative draft log-probability form the tree.
  std::vector<spec::DraftTree> propose_tree(const std::vector<ProposeSeq>& seqs, int64_t steps, int64_t draft_tokens);

  // DraftPort: propose_chain or propose_tree, as topk asks; forget each request.
  const DraftInfo& info() const override { return info_; }
  std::vector<spec::DraftTree> propose(const std::vector<ProposeSeq>& seqs, int64_t steps, int64_t draft_tokens) override;
  void forget(const std::vector<uint64_t>& rids) override;

  // Proposals of `steps` tokens run as one device-side sequence from now on: chains (topk 1)
  // through spec/draft_chain_runner.hpp, trees (topk > 1) through spec/draft_tree_runner.hpp;
  // each captured as a CUDA graph per batch-size bucket up to max_bs with graphs, else eager.
  // Proposals a runner cannot take draft step by step. The draft state (next tokens, a
  // tree's first tokens and their log-probabilities, hidden states) stays on the device.
  // fixed_width_extend (default: with graphs): a chain or tree verify's extend runs at width
  // steps + 1 (spec/draft_extend_runner.hpp), captured with graphs; without graphs it only
  // costs the padding tokens' compute, so the CPU keeps the variable-width extend (tests turn it on).
  // prompt_graph_max_tokens > 0 (with graphs): one request's prompt extend (its final chunk) of
  // up to that many tokens runs at the width of a token-count bucket (16, 32, 64, ...;
  // spec/cuda_graph_buckets.hpp), one graph each, its padding tokens on the dummy slot 0, as the
  // target's prefill graphs do (spec/prefill_graph_runner.hpp).
  void enable_draft_runners(int64_t steps, int64_t max_bs, int64_t max_context, bool graphs, std::optional<bool> fixed_width_extend = {},
                            int64_t prompt_graph_max_tokens = 0);
  // --speculative-chain-stop-probability: a chain proposal through the chain runner stops
  // once the requests' products of their draft tokens' probabilities are below `p` on average
  // (spec/chain_stop.hpp); the verify then takes the shorter chain. The runner looks at every
  // step's logits on the host, so this is for eager runners on the CPU (topk 1), after
  // enable_draft_runners without fixed-width or prompt extend runners. 0 turns it off.
  void set_chain_stop_probability(double p);
  // Drafting ahead (EAGLE chains through the chain runner; DraftPort::propose_ahead): the next
  // round's proposal is enqueued right after this round's extend, its draft K/V written to
  // scratch slots past the Scheduler's pool (draft_ahead_slots() of them from
  // first_scratch_slot on, one run per state row), since the next round's slots are not
  // planned yet. The draft's cache must hold them; call after enable_draft_runners.
  void enable_draft_ahead(int64_t first_scratch_slot);
  static int64_t draft_ahead_slots(int64_t max_requests, int64_t steps) { return (max_requests + 1) * steps; }
  // Drafting ahead behind a verify's extend (the DraftWorker actor turns it on): once
  // extend_verified_chains has enqueued the extend, the core reads the verify's argmax back
  // itself (a copy beside the extend; without the fixed-width extend runner it has read it
  // already), walks each chain as the target worker will, and enqueues the next round's chain
  // right behind the extend, instead of waiting for the target worker
  // to accept the round and ask (its later propose_ahead of the same requests finds the chain
  // queued and leaves it). The device then goes from the extend to the chain without the hand-off
  // between them. Needs enable_draft_ahead; AERIE_DRAFT_AHEAD_BEHIND_EXTEND=0 keeps it off
  // (for measuring).
  void draft_ahead_behind_verified_chains(bool on);
  // propose_ahead calls that found their chain already queued behind the extend.
  int64_t ahead_already_queued() const { return ahead_already_queued_; }
  void propose_ahead(const std::vector<ProposeSeq>& seqs, int64_t steps) override;
  std::optional<DeviceChains> chains_on_device(const std::vector<ProposeSeq>& seqs, int64_t steps) override;
  std::vector<spec::DraftTree> collect_chains() override;
  // The chain drafted ahead while still on the device: its token table and stride (rows
  // empty: chains_on_device() gives a round's), so the DraftWorker can tell its client.
  std::optional<DeviceChains> ahead_on_device() const;
  // Proposals taken from a draft ahead, and proposals asked for while one was out that it did not cover.
  int64_t ahead_hits() const { return ahead_hits_; }
  int64_t ahead_misses() const { return ahead_misses_; }
  const spec::DraftChainRunner* chain_runner() const { return chain_.get(); }
  const spec::DraftTreeRunner* tree_runner() const { return tree_.get(); }
  const spec::DraftExtendRunner* extend_runner() const { return extend_runner_.get(); }
  // The prompt extend runners' widths (empty: prompts extend eagerly).
  std::vector<int64_t> prompt_extend_widths() const;

  const model::EagleHead* head() const { return head_.get(); }
  bool has_state(uint64_t rid) const { return state_.count(rid) != 0; }
  void forget(uint64_t rid);
  size_t num_states() const { return state_.size(); }

 private:
  struct State {
    int32_t next_token = 0;
    bool on_device = false;          // with a runner: the host copies are stale; the pools' row hidden_row holds the state
    int64_t hidden_row = -1;         // the request's state row: in hidden_pool_ (EAGLE) and next_pool_
    std::vector<int32_t> top_tokens;  // topk > 1: the best next tokens (target ids)
    std::vector<float> top_logp;      // and their draft log-probabilities
    float next_probability = 1.0f;    // the draft's probability of next_token (under a chain stop)
  };
  struct TopRows {
    std::vector<int32_t> tokens;  // [rows * k] target ids, best first
    std::vector<float> logp;      // [rows * k]
  };
  // Runs one draft forward; returns the argmax (target ids) of its logit rows.
  std::vector<int32_t> run(const model::ForwardBatch& b, const TensorView& in_hidden);
  // Runs one draft forward; returns the k best tokens of each logit row.
  TopRows run_top(const model::ForwardBatch& b, const TensorView& in_hidden, int64_t k);
  TensorView forward(const model::ForwardBatch& b, const TensorView& in_hidden);
  // gathered_[i] = table[rows[i]]; returns the gathered view.
  TensorView gather(const TensorView& table, const std::vector<int32_t>& rows);
  int64_t row_for(uint64_t rid);
  // The draft ahead's tokens for exactly these requests (same positions, roots and context
  // slots), or nothing; either way the draft ahead is used up.
  std::optional<std::vector<std::vector<int32_t>>> take_ahead(const std::vector<ProposeSeq>& seqs, int64_t steps);
  // Its proposal collected (and dropped) if still on the device, so the chain runner is free.
  void settle_ahead();

  struct Ahead {
    DraftAheadRound round;         // its requests (a request extended or forgotten since is dropped)
    bool pending = false;          // enqueued on the chain runner, not collected
    std::vector<std::vector<int32_t>> tokens;  // once collected: each request's chain
    std::vector<size_t> given;     // chains_on_device: the rows it gave, in the verify's order
    std::vector<int32_t> roots;    // and their roots
  };
  Ahead ahead_;
  int64_t first_scratch_slot_ = -1;  // -1: no drafting ahead
  double chain_stop_probability_ = 0.0;  // 0: chains run every step
  int64_t ahead_hits_ = 0, ahead_misses_ = 0;
  // Drafting ahead behind the extend (null: off): the verify's argmax copied back beside it.
  std::unique_ptr<ReadBackBeside> behind_extend_;
  int64_t ahead_already_queued_ = 0;
  // Whether the chain runner drafts ahead these verified chains' next round (EAGLE, its steps).
  bool drafts_ahead_behind(const std::vector<ExtendSeq>& seqs) const;
  // What each verified chain commits, from the verify's argmax read back beside the extend.
  std::vector<std::vector<int32_t>> read_back_committed(const std::vector<ExtendSeq>& seqs, const TensorView& verified_argmax);
  // The next round's chain behind the extend of verified chains that committed these tokens.
  void propose_ahead_of_committed(const std::vector<ExtendSeq>& seqs, const std::vector<std::vector<int32_t>>& committed);
  // With a runner: the extend's next tokens (chains) or k best first tokens and their
  // log-probabilities (trees), and (EAGLE) hidden states go to the requests' state rows on the
  // device, with no host round trip; the runners read them there.
  void keep_state_on_device(const model::ForwardBatch& b, const TensorView& logits, const std::vector<uint64_t>& kept);
  // The host copies of these requests' state (next tokens, a tree's first tokens), for drafting step by step.
  void fetch_state(const std::vector<ProposeSeq>& seqs);
  // The tree runner's proposal, when it takes these requests.
  std::optional<std::vector<spec::DraftTree>> propose_tree_on_device(const std::vector<ProposeSeq>& seqs, int64_t steps, int64_t draft_tokens);
  // A chain verify's extend through the extend runner (fixed width, a graph per bucket on
  // CUDA); false when it does not fit (a prompt chunk's extend, no spare slots, ...).
  bool extend_at_fixed_width(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden);
  // Runs `fixed` (seqs' requests at the runner's width) when the runner takes it, giving each
  // request its state row then; false, with no state changed, when it does not fit.
  // verified_argmax: as DraftExtendRunner::run's.
  bool run_extend_runner(spec::DraftExtendRunner& runner, const std::vector<ExtendSeq>& seqs, std::vector<spec::ExtendSeq>& fixed,
                         const TensorView& target_hidden, const TensorView& verified_argmax);
  // One request's prompt extend through the prompt runner of the smallest width that holds
  // it; false when none takes it (several requests, a chunk that keeps no state, too long).
  bool extend_prompt_at_bucket_width(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden);
  // Whether `s` has what a fixed-width extend runner needs: it keeps its state, brings tokens
  // with one slot each (and, EAGLE, one hidden row each), and its context ends with them.
  bool fits_an_extend_runner(const ExtendSeq& s) const;

  DraftInfo info_;  // the algorithm, topk, and the aux layers an EAGLE3 head reads
  std::unique_ptr<model::EagleHead> head_;
  std::unique_ptr<model::LlamaModel> standalone_;
  model::KvCache& kv_;
  const model::LlamaModel& target_;
  Stream stream_;
  DType act_;
  int64_t hidden_size_;
  int64_t max_requests_;
  std::unordered_map<uint64_t, State> state_;
  std::vector<int64_t> free_rows_;
  Buffer hidden_pool_;  // [max_requests, H]: each request's state hidden
  Buffer gathered_;     // [rows, width]: a forward's input hidden states
  model::ArgmaxSampler argmax_;
  Buffer gather_ids_;              // [rows] i32 row ids for gather()
  Buffer top_values_, top_ids_;    // [rows, k] run_top's output
  std::unique_ptr<spec::DraftChainRunner> chain_;
  std::unique_ptr<spec::DraftExtendRunner> extend_runner_;  // with chain_: verify extends at width steps + 1
  std::map<int64_t, std::unique_ptr<spec::DraftExtendRunner>> prompt_runners_;  // width -> one request's prompt extend
  std::unique_ptr<spec::DraftTreeRunner> tree_;
  // Device-resident state (with a runner): each request's next token (chains) or k best first
  // tokens and their log-probabilities (trees) at its row, the draft -> target id map, and the
  // extend's scratch. Every pool has a row more than requests: padded requests read it.
  Buffer next_pool_;    // [max_requests + 1] i32
  Buffer top_tokens_pool_, top_logp_pool_;  // [max_requests + 1, topk] i32 / f32
  Buffer extend_top_values_, extend_top_ids_, extend_top_tokens_;  // [max_requests, topk]
  Buffer to_target_;    // [draft vocab, 1] i32 (empty: the ids are the target's)
  std::unique_ptr<spec::DeviceArgmax> extend_argmax_;
  Buffer extend_tokens_, extend_rows_, extend_logit_rows_, extend_hidden_;
};

}  // namespace aerie::spec
