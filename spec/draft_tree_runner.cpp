#include "spec/draft_tree_runner.hpp"

#include <algorithm>

#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "kernels/sampling.hpp"
#include "kernels/topk.hpp"
#include "kernels/tree_draft.hpp"
#include "spec/draft_chain_runner.hpp"

namespace aerie::spec {

DraftTreeRunner::DraftTreeRunner(DraftNet net, TreeStatePools pools, const TensorView& to_target,
                                 model::KvCache& kv, const model::LlamaModel& target, int64_t steps, int64_t topk, int64_t max_bs,
                                 int64_t max_context, bool graphs)
    : net_(net),
      pools_(pools),
      to_target_(to_target),
      kv_(kv),
      target_(target),
      stream_(target.stream()),
      act_(target.act_dtype()),
      steps_(steps),
      k_(topk),
      max_bs_(max_bs),
      max_context_(max_context),
      cols_(kernels::tree_draft_candidates(steps, topk)),
      buckets_("draft tree", max_bs, graphs, [this](int64_t bs) { return dims_for(bs); }),
      padding_context_(static_cast<size_t>(1 + (steps - 1) * topk), 0) {
  net_.check("a tree runner");
  AERIE_CHECK(!net_.head || pools_.hidden.defined(), "an EAGLE tree runner reads the requests' state rows from a pool");
  AERIE_CHECK(pools_.top_tokens.defined() && pools_.top_tokens.dtype == DType::kI32 && pools_.top_logp.defined() &&
                  pools_.top_tokens.dim(1) == topk && pools_.top_logp.dim(1) == topk,
              "a tree runner reads each request's " << topk << " first tokens and their log-probabilities from pools");
  AERIE_CHECK(pools_.padding_row >= 0 && pools_.padding_row < pools_.top_tokens.dim(0), "the pools' padding row is outside them");
  AERIE_CHECK(topk >= 2 && topk <= kernels::kMaxTopK, "a tree runner needs topk in [2, " << kernels::kMaxTopK << "]");
  AERIE_CHECK(steps_ >= 2, "a tree runner needs at least one draft forward (steps >= 2)");
  AERIE_CHECK(max_bs_ >= 1 && max_context_ >= 1, "a tree runner needs a batch and a context");
  AERIE_CHECK(!graphs || stream_.device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  const Device dev = stream_.device();
  const int64_t top = buckets_.largest();
  const int64_t rows = top * k_;
  model::ForwardCapacity cap;
  cap.max_tokens = cap.max_seqs = cap.max_logit_rows = rows;
  // Every node reads its request's context: k times every real slot at most, plus the paths
  // and own slots (steps per node), and never more than max_context per node.
  cap.max_kv_indices = std::min(k_ * (kv.shape().num_slots() + top * steps_), rows * max_context_);
  cap.max_splits = buckets_.max_splits();
  for (int64_t j = 1; j < steps_; ++j) ws_.push_back(net_.make_workspace(cap));
  rows_ = Buffer(dev, DType::kI32, {top});
  rows_.zero();
  front_tokens_ = Buffer(dev, DType::kI32, {rows});
  front_scores_ = Buffer(dev, DType::kF32, {rows});
  front_nodes_ = Buffer(dev, DType::kI32, {rows});
  front_sources_ = Buffer(dev, DType::kI32, {rows});
  cand_tokens_ = Buffer(dev, DType::kI32, {top, cols_});
  cand_scores_ = Buffer(dev, DType::kF32, {top, cols_});
  cand_parents_ = Buffer(dev, DType::kI32, {top, cols_});
  top_values_ = Buffer(dev, DType::kF32, {rows, k_});
  top_ids_ = Buffer(dev, DType::kI32, {rows, k_});
  child_tokens_ = Buffer(dev, DType::kI32, {rows, k_});
  rows_host_ = HostStaging(dev, static_cast<size_t>(top) * 4);
  cand_host_ = HostStaging(dev, static_cast<size_t>(top * cols_) * 12);
  if (net_.head) {
    in_hidden_ = Buffer(dev, act_, {rows, target.config().hidden_size});
    in_hidden_.zero();
  }
  buckets_.capture(stream_, [&](int64_t bs) { upload({}, bs); }, [&](int64_t bs) { enqueue(bs); });
}

model::ForwardDims DraftTreeRunner::dims_for(int64_t bs) const {
  const model::LlamaModel& geometry = net_.geometry(target_);
  const int64_t rows = bs * k_;
  const int tpb = geometry.attention_tokens_per_block(model::pad_to_bucket(model::ForwardBatch{}, rows, 1));
  return {.tokens = rows, .seqs = rows, .logit_rows = rows, .custom_mask = false,
          .num_splits = geometry.attention_splits(rows / tpb, max_context_), .logits_all_rows = true, .attention_tokens_per_block = tpb};
}

bool DraftTreeRunner::can_run(const std::vector<TreeSeq>& seqs) const {
  const auto n = static_cast<int64_t>(seqs.size());
  const auto batch = buckets_.batch_for(n);
  if (!batch) return false;  // too many, or no exact bucket under --disable-cuda-graph-padding
  const int64_t bs = *batch;
  int64_t indices = 0;
  for (const auto& s : seqs) {
    const int64_t longest = s.first_position + steps_ - 1;  // the last forward's context per node
    if (!s.context || s.first_position < 0 || static_cast<int64_t>(s.context->size()) < s.first_position + (steps_ - 1) * k_ ||
        longest > max_context_ || s.state_row < 0 || s.state_row >= pools_.top_tokens.dim(0))
      return false;
    indices += k_ * longest;
  }
  return indices + (bs - n) * k_ * steps_ <= ws_.front()->capacity().max_kv_indices;
}

void DraftTreeRunner::upload(const std::vector<TreeSeq>& seqs, int64_t bs) {
  const auto n = static_cast<int64_t>(seqs.size());
  for (int64_t j = 1; j < steps_; ++j) {
    model::ForwardBatch b;
    for (int64_t i = 0; i < bs; ++i) {
      const bool real = i < n;
      const int32_t first = real ? seqs[static_cast<size_t>(i)].first_position : 1;
      const std::vector<int32_t>& context = real ? *seqs[static_cast<size_t>(i)].context : padding_context_;
      for (int64_t f = 0; f < k_; ++f) {
        const int32_t own = context[static_cast<size_t>(first + (j - 1) * k_ + f)];
        b.input_ids.push_back(0);  // the frontier's tokens, filled in on the device
        b.positions.push_back(first + static_cast<int32_t>(j - 1));
        b.out_cache_loc.push_back(own);
        b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
        b.kv_indices.insert(b.kv_indices.end(), context.begin(), context.begin() + first);
        b.kv_indices.insert(b.kv_indices.end(), static_cast<size_t>(j - 1), 0);  // the path, written on the device
        b.kv_indices.push_back(own);
        b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
        b.logit_rows.push_back(static_cast<int32_t>(b.input_ids.size()) - 1);
      }
    }
    ws_[static_cast<size_t>(j - 1)]->upload(b, stream_);
  }
  // The host staging is rewritten only after the previous proposal's candidates came back
  // (propose ends with a synchronisation), so its copy has run.
  int32_t* rows = rows_host_.as<int32_t>();
  for (int64_t i = 0; i < bs; ++i) rows[i] = i < n ? seqs[static_cast<size_t>(i)].state_row : pools_.padding_row;
  copy_async(rows_.data(), rows, static_cast<size_t>(bs) * 4, stream_);
}

void DraftTreeRunner::enqueue(int64_t bs) {
  const Device dev = stream_.device();
  const model::ForwardDims dims = buckets_.dims(bs);
  const int64_t h = target_.config().hidden_size, rows = bs * k_;
  const kernels::TreeFrontier frontier{.tokens = front_tokens_.view().slice_rows(0, rows), .scores = front_scores_.view().slice_rows(0, rows),
                                       .nodes = front_nodes_.view().slice_rows(0, rows), .sources = front_sources_.view().slice_rows(0, rows)};
  const kernels::TreeCandidates candidates{.tokens = TensorView(cand_tokens_.data(), DType::kI32, {bs, cols_}, dev),
                                           .scores = TensorView(cand_scores_.data(), DType::kF32, {bs, cols_}, dev),
                                           .parents = TensorView(cand_parents_.data(), DType::kI32, {bs, cols_}, dev)};
  AERIE_CHECK_STATUS(kernels::tree_draft_begin({.rows = rows_.view().slice_rows(0, bs), .top_tokens = pools_.top_tokens, .top_logp = pools_.top_logp,
                                                .frontier = frontier, .candidates = candidates}, stream_));
  const TensorView values(top_values_.data(), DType::kF32, {rows, k_}, dev);
  const TensorView ids(top_ids_.data(), DType::kI32, {rows, k_}, dev);
  const TensorView children(child_tokens_.data(), DType::kI32, {rows, k_}, dev);
  for (int64_t j = 1; j < steps_; ++j) {
    model::ForwardWorkspace& ws = *ws_[static_cast<size_t>(j - 1)];
    copy_async(ws.ids(rows).data, frontier.tokens.data, static_cast<size_t>(rows) * 4, stream_);
    TensorView in;
    if (net_.eagle()) {  // each node's input: its request's state row (first forward), else its parent's output row
      in = TensorView(in_hidden_.data(), act_, {rows, h}, dev);
      AERIE_CHECK_STATUS(kernels::embedding({.ids = frontier.sources, .table = j == 1 ? pools_.hidden : net_.head->out_hidden(), .out = in}, stream_));
    }
    const TensorView logits = net_.run(ws, in, kv_, dims);
    // The logits are this forward's scratch: log-probabilities in place, then the k best.
    AERIE_CHECK_STATUS(kernels::log_softmax({.logits = logits, .out = logits}, stream_));
    AERIE_CHECK_STATUS(kernels::topk({.x = logits, .values = values, .indices = ids}, stream_));
    draft_ids_to_target(ids.reshape({rows * k_}), to_target_, children.reshape({rows * k_, 1}), stream_);
    const bool last = j + 1 == steps_;
    const model::ForwardWorkspace* next = last ? nullptr : ws_[static_cast<size_t>(j)].get();
    AERIE_CHECK_STATUS(kernels::tree_draft_expand({.step = j, .child_tokens = children, .child_logp = values, .frontier = frontier,
                                                   .candidates = candidates, .kv_indptr = ws.kv_indptr(rows), .kv_indices = ws.kv_indices(),
                                                   .next_kv_indptr = next ? next->kv_indptr(rows) : TensorView(),
                                                   .next_kv_indices = next ? next->kv_indices() : TensorView()}, stream_));
  }
}

std::vector<std::vector<DraftCandidate>> DraftTreeRunner::propose(const std::vector<TreeSeq>& seqs) {
  AERIE_CHECK(can_run(seqs), "this proposal does not fit the tree runner");
  const auto n = static_cast<int64_t>(seqs.size());
  const int64_t bs = *buckets_.batch_for(n);
  upload(seqs, bs);
  buckets_.run(bs, stream_, [&](int64_t b) { enqueue(b); });
  // One copy each of the real requests' candidate rows (the padded ones come last).
  const size_t cells = static_cast<size_t>(n * cols_);
  auto* tokens = cand_host_.as<int32_t>();
  auto* scores = reinterpret_cast<float*>(tokens + cells);
  auto* parents = reinterpret_cast<int32_t*>(scores + cells);
  copy_async(tokens, cand_tokens_.data(), cells * 4, stream_);
  copy_async(scores, cand_scores_.data(), cells * 4, stream_);
  copy_async(parents, cand_parents_.data(), cells * 4, stream_);
  synchronize(stream_);
  std::vector<std::vector<DraftCandidate>> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols_; ++c) {
      const size_t at = static_cast<size_t>(i * cols_ + c);
      out[static_cast<size_t>(i)].push_back({.score = scores[at], .token = tokens[at], .parent = parents[at]});
    }
  return out;
}

}  // namespace aerie::spec
