#include "spec/draft_extend_runner.hpp"

#include <algorithm>

#include "kernels/chain_accept.hpp"
#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/sampling.hpp"
#include "kernels/topk.hpp"
#include "kernels/staging.hpp"
#include "spec/draft_chain_runner.hpp"

namespace aerie::spec {

namespace {

// The extend's forward batch: every request `width` tokens (its committed ones, then padding
// tokens 0 at the next positions) over its prefix and those positions, logits at its last
// committed token; then padded requests up to `bs` on the dummy slot 0, logits at their last.
model::ForwardBatch fixed_width_batch(const std::vector<ExtendSeq>& seqs, int64_t width, int64_t bs) {
  model::ForwardBatch b;
  b.qo_indptr = {0};
  b.kv_indptr = {0};
  const auto W = static_cast<int32_t>(width);
  for (const auto& s : seqs) {
    const int32_t base = static_cast<int32_t>(b.input_ids.size());
    for (int32_t j = 0; j < W; ++j) {
      b.input_ids.push_back(j < static_cast<int32_t>(s.tokens.size()) ? s.tokens[static_cast<size_t>(j)] : 0);
      b.positions.push_back(s.first_position + j);
      b.out_cache_loc.push_back(s.slots[static_cast<size_t>(j)]);
    }
    b.kv_indices.insert(b.kv_indices.end(), s.context.begin(), s.context.end());
    b.kv_indices.insert(b.kv_indices.end(), s.slots.begin(), s.slots.end());
    b.qo_indptr.push_back(base + W);
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
    b.logit_rows.push_back(base + static_cast<int32_t>(s.tokens.size()) - 1);
  }
  for (int64_t i = static_cast<int64_t>(seqs.size()); i < bs; ++i) {
    const int32_t base = static_cast<int32_t>(b.input_ids.size());
    for (int32_t j = 0; j < W; ++j) {
      b.input_ids.push_back(0);
      b.positions.push_back(j);
      b.out_cache_loc.push_back(0);
      b.kv_indices.push_back(0);
    }
    b.qo_indptr.push_back(base + W);
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
    b.logit_rows.push_back(base + W - 1);
  }
  return b;
}

}  // namespace

DraftExtendRunner::DraftExtendRunner(DraftNet net, const TensorView& state_pool,
                                     const TensorView& next_pool, const TensorView& to_target, model::KvCache& kv, const model::LlamaModel& target,
                                     int64_t width, int64_t hidden_width, int64_t max_bs, int64_t max_context, bool graphs,
                                     ExtendTopkPools topk_pools, const std::string& label)
    : net_(net),
      state_pool_(state_pool),
      next_pool_(next_pool),
      to_target_(to_target),
      topk_pools_(topk_pools),
      kv_(kv),
      target_(target),
      stream_(target.stream()),
      act_(target.act_dtype()),
      width_(width),
      hidden_width_(hidden_width),
      max_bs_(max_bs),
      max_context_(max_context),
      buckets_(label, max_bs, graphs, [this](int64_t bs) { return dims_for(bs); }),
      side_(target.stream()) {
  net_.check("an extend runner");
  AERIE_CHECK(!net_.head || (state_pool_.defined() && hidden_width_ > 0), "an EAGLE extend runner writes state rows and reads hidden states");
  if (tree()) {
    const TensorView& t = topk_pools_.top_tokens;
    const TensorView& l = topk_pools_.top_logp;
    AERIE_CHECK(t.dtype == DType::kI32 && l.defined() && l.dtype == DType::kF32 && t.ndim == 2 && l.ndim == 2 && t.dim(0) == l.dim(0) &&
                    t.dim(1) == l.dim(1) && t.dim(1) > 1,
                "a tree extend runner writes each request's k best tokens [rows, k] i32 and log-probabilities [rows, k] f32");
    topk_ = t.dim(1);
  } else {
    AERIE_CHECK(next_pool_.defined() && next_pool_.dtype == DType::kI32, "an extend runner writes the requests' next tokens to a pool");
  }
  AERIE_CHECK(width_ >= 1 && max_bs_ >= 1 && max_context_ >= width_, "an extend runner needs a width, a batch and a context");
  AERIE_CHECK(!graphs || stream_.device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  const Device dev = stream_.device();
  const int64_t top = buckets_.largest();
  model::ForwardCapacity cap;
  cap.max_tokens = top * width_;
  cap.max_seqs = cap.max_logit_rows = top;
  // Every request's context (at most every real slot once), plus width per padded sequence.
  cap.max_kv_indices = std::min(kv.shape().num_slots(), top * max_context_) + top * width_;
  cap.max_splits = buckets_.max_splits();
  ws_ = net_.make_workspace(cap);
  if (tree()) {
    top_values_ = Buffer(dev, DType::kF32, {top, topk_});
    top_ids_ = Buffer(dev, DType::kI32, {top, topk_});
    top_tokens_ = Buffer(dev, DType::kI32, {top, topk_});
  } else {
    argmax_ = std::make_unique<DeviceArgmax>(dev, top);
    tokens_ = Buffer(dev, DType::kI32, {top, 1});
  }
  small_ints_ = Buffer(dev, DType::kI32, {top + 2 * top * width_});
  small_ints_.zero();
  small_staging_ = StagingRing(dev, static_cast<size_t>(small_ints_.view().numel()) * sizeof(int32_t));
  rows_ = small_ints_.view().slice_rows(0, top);
  if (net_.head) {
    in_hidden_ = Buffer(dev, act_, {top * width_, hidden_width_});
    in_hidden_.zero();
    picked_ = Buffer(dev, act_, {top, target.config().hidden_size});
  }
  buckets_.capture(stream_, [&](int64_t bs) { ws_->upload(fixed_width_batch({}, width_, bs), stream_); }, [&](int64_t bs) { enqueue(bs); });
}

model::ForwardDims DraftExtendRunner::dims_for(int64_t bs) const {
  const model::LlamaModel& geometry = net_.geometry(target_);
  const std::vector<ExtendSeq> none;
  const int tpb = geometry.attention_tokens_per_block(fixed_width_batch(none, width_, bs));
  return {.tokens = bs * width_, .seqs = bs, .logit_rows = bs, .custom_mask = false,
          .num_splits = geometry.attention_splits(bs * width_ / tpb, max_context_), .logits_all_rows = false,
          .attention_tokens_per_block = tpb};
}

bool DraftExtendRunner::can_run(const std::vector<ExtendSeq>& seqs) const {
  const auto n = static_cast<int64_t>(seqs.size());
  const int64_t top = buckets_.largest();
  if (!buckets_.batch_for(n)) return false;  // too many, or no exact bucket under --disable-cuda-graph-padding
  int64_t indices = 0;
  for (const auto& s : seqs) {
    const auto committed = static_cast<int64_t>(s.tokens.size());
    if (committed < 1 || committed > width_ || static_cast<int64_t>(s.slots.size()) != width_) return false;
    if (static_cast<int64_t>(s.context.size()) != s.first_position || s.first_position + width_ > max_context_) return false;
    if (net_.head && static_cast<int64_t>(s.hidden_rows.size()) != committed) return false;
    if (s.state_row < 0 || s.state_row >= pool_rows() - 1) return false;
    indices += s.first_position + width_;
  }
  return indices + top * width_ <= ws_->capacity().max_kv_indices;
}

void DraftExtendRunner::enqueue(int64_t bs) {
  const Device dev = stream_.device();
  const model::ForwardDims dims = buckets_.dims(bs);
  const TensorView in = net_.eagle() ? TensorView(in_hidden_.data(), act_, {bs * width_, hidden_width_}, dev) : TensorView();
  const TensorView logits = net_.run(*ws_, in, kv_, dims);
  const TensorView rows = rows_.slice_rows(0, bs);
  if (tree()) {  // the k best first tokens and their log-probabilities, as DraftWorkerCore's eager extend leaves them
    const TensorView values(top_values_.data(), DType::kF32, {bs, topk_}, dev), ids(top_ids_.data(), DType::kI32, {bs, topk_}, dev);
    const TensorView tokens(top_tokens_.data(), DType::kI32, {bs, topk_}, dev);
    AERIE_CHECK_STATUS(kernels::log_softmax({.logits = logits, .out = logits}, stream_));  // the forward's scratch
    AERIE_CHECK_STATUS(kernels::topk({.x = logits, .values = values, .indices = ids}, stream_));
    draft_ids_to_target(ids.reshape({bs * topk_}), to_target_, tokens.reshape({bs * topk_, 1}), stream_);
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = tokens, .rows = rows, .out = topk_pools_.top_tokens}, stream_));
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = values, .rows = rows, .out = topk_pools_.top_logp}, stream_));
  } else {
    const TensorView tokens(tokens_.data(), DType::kI32, {bs, 1}, dev);
    argmax_->run(logits, tokens, stream_, to_target_);  // target ids, through the draft vocabulary's map
    AERIE_CHECK_STATUS(kernels::scatter_rows(
        {.src = tokens, .rows = rows, .out = TensorView(next_pool_.data, DType::kI32, {next_pool_.dim(0), 1}, dev)}, stream_));
  }
  if (net_.head) {  // the head's output at each request's last committed token, to its state row
    const TensorView picked(picked_.data(), act_, {bs, target_.config().hidden_size}, dev);
    AERIE_CHECK_STATUS(kernels::embedding({.ids = ws_->logit_rows(bs), .table = net_.head->out_hidden(), .out = picked}, stream_));
    AERIE_CHECK_STATUS(kernels::scatter_rows({.src = picked, .rows = rows, .out = state_pool_}, stream_));
  }
}

void DraftExtendRunner::run(const std::vector<ExtendSeq>& seqs, const TensorView& target_hidden, const TensorView& verified_argmax) {
  AERIE_CHECK(can_run(seqs), "this extend does not fit the extend runner");
  const auto n = static_cast<int64_t>(seqs.size());
  const int64_t bs = *buckets_.batch_for(n), top = buckets_.largest();
  const Stream& copies = side_.begin();
  ws_->copy_in(fixed_width_batch(seqs, width_, bs), copies);
  // State rows, hidden rows and verified chains in one pinned arena, laid out as small_ints_.
  int32_t* host = small_staging_.acquire_as<int32_t>();
  int32_t* rows = host;
  int32_t* hidden = host + top;
  int32_t* chains = hidden + top * width_;
  // Padded requests write the pools' last row, which no request owns.
  for (int64_t i = 0; i < bs; ++i) rows[i] = i < n ? seqs[static_cast<size_t>(i)].state_row : static_cast<int32_t>(pool_rows() - 1);
  if (net_.head) {
    AERIE_CHECK(target_hidden.defined() && target_hidden.dim(1) == hidden_width_,
                "the EAGLE extend runner reads target hidden states of width " << hidden_width_);
    // Each token's target hidden row; padding tokens repeat their request's last one, padded
    // requests read row 0. Gathered eagerly into the graph's input.
    for (int64_t i = 0; i < bs; ++i)
      for (int64_t j = 0; j < width_; ++j) {
        int32_t r = 0;
        if (i < n) {
          const auto& h = seqs[static_cast<size_t>(i)].hidden_rows;
          r = h[static_cast<size_t>(std::min<int64_t>(j, static_cast<int64_t>(h.size()) - 1))];
        }
        AERIE_CHECK(r >= 0 && r < target_hidden.dim(0), "target hidden row " << r << " is outside " << target_hidden.describe());
        hidden[i * width_ + j] = r;
      }
  }
  if (verified_argmax.defined()) {
    AERIE_CHECK(!tree(), "a tree draft's extend follows the host's acceptance");
    for (int64_t i = 0; i < n; ++i) {
      const auto& t = seqs[static_cast<size_t>(i)].tokens;
      AERIE_CHECK(static_cast<int64_t>(t.size()) == width_, "a verified chain has " << width_ << " tokens, got " << t.size());
      std::copy(t.begin(), t.end(), chains + i * width_);
    }
  }
  const int64_t used = verified_argmax.defined() ? top + top * width_ + n * width_ : net_.head ? top + bs * width_ : bs;
  copy_async(small_ints_.data(), host, static_cast<size_t>(used) * sizeof(int32_t), copies);
  small_staging_.release(copies);
  side_.end();
  const TensorView all = small_ints_.view();
  if (net_.head)
    AERIE_CHECK_STATUS(kernels::embedding({.ids = all.slice_rows(top, top + bs * width_), .table = target_hidden,
                                           .out = TensorView(in_hidden_.data(), act_, {bs * width_, hidden_width_}, stream_.device())},
                                          stream_));
  if (verified_argmax.defined())  // the verify's argmax, not the host's acceptance, gives the committed tokens and the last row
    AERIE_CHECK_STATUS(kernels::greedy_chain_accept({.drafts = all.slice_rows(top + top * width_, top + top * width_ + n * width_),
                                                     .argmax = verified_argmax, .tokens_per_request = width_,
                                                     .last_rows = ws_->logit_rows(bs), .tokens = ws_->ids(bs * width_)},
                                                    stream_));
  buckets_.run(bs, stream_, [&](int64_t b) { enqueue(b); });
  side_.mark();
}

}  // namespace aerie::spec
