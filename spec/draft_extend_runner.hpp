#pragma once
// DraftExtendRunner: the draft extend after a chain or tree verify (sglang's draft extend at a
// fixed width) as one device-side sequence, on CUDA one graph per batch-size bucket. Every request
// brings exactly `width` tokens (steps + 1): its committed ones, then padding tokens at the
// positions after them, which write the draft's K/V into slots the verify reserved and the
// Scheduler gives back (nothing reads them before their next owner writes them). Attention is
// causal, so padding after a request's last committed token cannot reach it. The request's
// state, the argmax of the head at its last committed token (mapped to a target id) and, for
// an EAGLE head, the head's output there, goes to its rows of the state pools, as
// DraftWorkerCore's eager extend leaves it for the chain runner; for a tree draft (topk > 1)
// the head's k best tokens there (target ids) and their log-probabilities instead of the
// argmax, as the tree runner reads them. Padded requests (up to the bucket) read token 0 at
// slot 0 and write the pools' last row, which no request owns.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "model/eagle_head.hpp"
#include "model/forward_workspace.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"
#include "spec/bucket_graphs.hpp"
#include "spec/draft_net.hpp"
#include "spec/device_argmax.hpp"

namespace aerie::spec {

// One request of a fixed-width extend.
struct ExtendSeq {
  std::vector<int32_t> tokens;       // the committed tokens (1..width)
  int32_t first_position = 0;        // the first token's position
  std::vector<int32_t> slots;        // slots of positions [first_position, first_position + width)
  std::vector<int32_t> context;      // slots of positions [0, first_position): the prefix
  std::vector<int32_t> hidden_rows;  // EAGLE: each committed token's row in the target's hidden states
  int32_t state_row = 0;             // the request's row of the state pools
};

// Where a tree draft's extend leaves each request's first tokens (DraftTreeRunner's pools).
struct ExtendTopkPools {
  TensorView top_tokens;  // [rows, topk] i32: the k best tokens (target ids)
  TensorView top_logp;    // [rows, topk] f32: their draft log-probabilities
};

class DraftExtendRunner {
 public:
  // net: an EAGLE head or a STANDALONE model. state_pool: EAGLE's state hidden [rows, H]; next_pool:
  // each request's next token [rows] i32; both with one more row than requests (the last
  // row is the padding's). to_target: the head's draft -> target id map [draft vocab, 1] i32
  // (empty: the same ids). width: tokens per request (chain steps + 1); hidden_width: the
  // target hidden state's width an EAGLE head reads (3H for EAGLE3). topk_pools (a tree draft):
  // the k best tokens and log-probabilities go there instead of a next token (next_pool empty).
  // label: the runner's work in GraphTimes (a verify's extend, or one request's prompt).
  DraftExtendRunner(DraftNet net, const TensorView& state_pool, const TensorView& next_pool,
                    const TensorView& to_target, model::KvCache& kv, const model::LlamaModel& target, int64_t width, int64_t hidden_width,
                    int64_t max_bs, int64_t max_context, bool graphs, ExtendTopkPools topk_pools = {}, const std::string& label = "draft extend");
  DraftExtendRunner(const DraftExtendRunner&) = delete;
  DraftExtendRunner& operator=(const DraftExtendRunner&) = delete;

  int64_t width() const { return width_; }
  // Whether these requests fit (batch size, token counts, slots, context); else the caller
  // extends eagerly.
  bool can_run(const std::vector<ExtendSeq>& seqs) const;
  // Runs the extend (enqueued only; the caller's stream orders what follows).
  // target_hidden: the target's captured hidden states (EAGLE), or an empty view.
  // verified_argmax (a chain runner's extend right behind a greedy chain verify, before the
  // host has accepted): each request's tokens are then its verified chain, width of them
  // (root, then drafts), and verified_argmax ([>= requests * width] i32 on the device) the
  // verify's argmax of its rows; the committed tokens and the last committed row are taken
  // on the device (kernels::greedy_chain_accept) in stream order.
  void run(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden, const TensorView& verified_argmax = {});
  int64_t bucket_for(int64_t batch_size) const { return buckets_.bucket_for(batch_size); }
  bool graphs() const { return buckets_.graphs(); }

 private:
  void enqueue(int64_t bs);
  model::ForwardDims dims_for(int64_t bs) const;
  bool tree() const { return topk_pools_.top_tokens.defined(); }
  int64_t pool_rows() const { return tree() ? topk_pools_.top_tokens.dim(0) : next_pool_.dim(0); }

  DraftNet net_;
  TensorView state_pool_, next_pool_, to_target_;
  ExtendTopkPools topk_pools_;
  int64_t topk_ = 1;
  model::KvCache& kv_;
  const model::LlamaModel& target_;
  Stream stream_;
  DType act_;
  int64_t width_, hidden_width_, max_bs_, max_context_;
  BucketGraphs buckets_;
  std::unique_ptr<model::ForwardWorkspace> ws_;
  std::unique_ptr<DeviceArgmax> argmax_;
  Buffer tokens_;      // [max_bs, 1] i32: as target ids
  // The small per-run inputs, [max_bs] state rows, then [max_bs * width] target hidden rows,
  // then [max_bs * width] verified chains, uploaded in one copy from pinned staging: a copy
  // from pageable memory may wait for the stream, and the extend is enqueued behind a verify
  // still running.
  Buffer small_ints_;
  StagingRing small_staging_;
  TensorView rows_;    // [max_bs] i32 of small_ints_: each request's state row (the graphs read it)
  Buffer in_hidden_;   // [max_bs * width, hidden_width]: the gathered target hidden states
  Buffer picked_;      // [max_bs, H]: the head's output at each request's last committed token
  Buffer top_values_, top_ids_, top_tokens_;  // a tree draft: [max_bs, topk] log-probabilities, draft ids, target ids
  SideCopyStream side_;                       // the inputs' copies, beside the verify before the extend
};

}  // namespace aerie::spec
