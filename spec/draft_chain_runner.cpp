#include "spec/draft_chain_runner.hpp"

#include <algorithm>

#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"

namespace aerie::spec {

DraftChainRunner::DraftChainRunner(DraftNet net, const TensorView& state_pool,
                                   const TensorView& next_pool, const TensorView& to_target, model::KvCache& kv, const model::LlamaModel& target,
                                   int64_t steps, int64_t max_bs, int64_t max_context, bool graphs)
    : net_(net),
      state_pool_(state_pool),
      next_pool_(next_pool),
      to_target_(to_target),
      kv_(kv),
      target_(target),
      stream_(target.stream()),
      act_(target.act_dtype()),
      steps_(steps),
      max_bs_(max_bs),
      max_context_(max_context),
      buckets_("draft chain", max_bs, graphs, [this](int64_t bs) { return dims_for(bs); }),
      side_(target.stream()) {
  net_.check("a chain runner");
  AERIE_CHECK(!net_.head || state_pool_.defined(), "an EAGLE chain runner reads the requests' state rows from a pool");
  AERIE_CHECK(next_pool_.defined() && next_pool_.dtype == DType::kI32, "a chain runner reads the requests' next tokens from a pool");
  AERIE_CHECK(steps_ >= 2, "a chain runner needs at least one draft forward (steps >= 2)");
  AERIE_CHECK(max_bs_ >= 1 && max_context_ >= 1, "a chain runner needs a batch and a context");
  AERIE_CHECK(!graphs || stream_.device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  const Device dev = stream_.device();
  const int64_t top = buckets_.largest();
  model::ForwardCapacity cap;
  cap.max_tokens = cap.max_seqs = cap.max_logit_rows = top;
  // Every request's context (at most every real slot once; can_run keeps each within
  // max_context), plus one per padded sequence: as the extend runner sizes it.
  cap.max_kv_indices = std::min(kv.shape().num_slots(), top * max_context_) + top;
  cap.max_splits = buckets_.max_splits();
  for (int64_t j = 1; j < steps_; ++j) ws_.push_back(net_.make_workspace(cap));
  argmax_ = std::make_unique<DeviceArgmax>(dev, top);
  tokens_ = Buffer(dev, DType::kI32, {steps_ * top});
  rows_ = Buffer(dev, DType::kI32, {top});
  rows_.zero();
  rows_host_ = HostStaging(dev, static_cast<size_t>(top) * 4);
  tokens_host_ = HostStaging(dev, static_cast<size_t>(steps_ * top) * 4);
  tokens_copied_ = StreamEvent(dev);
  if (net_.head) {
    in_hidden_ = Buffer(dev, act_, {top, target.config().hidden_size});
    in_hidden_.zero();
  }
  buckets_.capture(
      stream_, [&](int64_t bs) { for (auto& w : ws_) w->upload(model::pad_to_bucket(model::ForwardBatch{}, bs, 1), stream_); },
      [&](int64_t bs) { enqueue(bs); });
}

void draft_ids_to_target(const TensorView& ids, const TensorView& to_target, const TensorView& out, const Stream& stream) {
  if (to_target.defined()) {
    AERIE_CHECK_STATUS(kernels::embedding({.ids = ids, .table = to_target, .out = out}, stream));
  } else {
    copy_async(out.data, ids.data, static_cast<size_t>(ids.dim(0)) * 4, stream);
  }
}

model::ForwardDims DraftChainRunner::dims_for(int64_t bs) const {
  const model::LlamaModel& geometry = net_.geometry(target_);
  const int tpb = geometry.attention_tokens_per_block(model::pad_to_bucket(model::ForwardBatch{}, bs, 1));
  return {.tokens = bs, .seqs = bs, .logit_rows = bs, .custom_mask = false,
          .num_splits = geometry.attention_splits(bs / tpb, max_context_), .logits_all_rows = true, .attention_tokens_per_block = tpb};
}

bool DraftChainRunner::can_run(const std::vector<ChainSeq>& seqs) const {
  const auto n = static_cast<int64_t>(seqs.size());
  if (!buckets_.batch_for(n)) return false;  // too many, or no exact bucket under --disable-cuda-graph-padding
  int64_t indices = 0;
  for (const auto& s : seqs) {
    const int64_t longest = s.first_position + steps_ - 1;  // the last step's context
    if (!s.context || static_cast<int64_t>(s.context->size()) < longest || longest > max_context_) return false;
    indices += longest;
  }
  return indices + n <= ws_.front()->capacity().max_kv_indices;
}

void DraftChainRunner::enqueue(int64_t bs) {
  const Device dev = stream_.device();
  const model::ForwardDims dims = buckets_.dims(bs);
  const int64_t h = target_.config().hidden_size;
  const TensorView rows = rows_.view().slice_rows(0, bs);
  // Row 0 of the tokens: each request's next token, which is also step 1's input.
  const TensorView next_tokens(tokens_.data(), DType::kI32, {bs, 1}, dev);
  AERIE_CHECK_STATUS(kernels::embedding({.ids = rows, .table = TensorView(next_pool_.data, DType::kI32, {next_pool_.dim(0), 1}, dev),
                                         .out = next_tokens}, stream_));
  copy_async(ws_.front()->ids(bs).data, next_tokens.data, static_cast<size_t>(bs) * 4, stream_);
  if (stop_ && !stop_->goes_on()) {  // the next tokens alone
    kept_steps_ = 1;
    return;
  }
  for (int64_t j = 1; j < steps_; ++j) {
    model::ForwardWorkspace& ws = *ws_[static_cast<size_t>(j - 1)];
    TensorView in;
    if (net_.eagle()) {
      if (j == 1) {  // each request's state row
        in = TensorView(in_hidden_.data(), act_, {bs, h}, dev);
        AERIE_CHECK_STATUS(kernels::embedding({.ids = rows, .table = state_pool_, .out = in}, stream_));
      } else {
        // The previous step's output, read in place in its own workspace (each step has one).
        in = net_.head->out_hidden();
      }
    }
    const TensorView logits = net_.run(ws, in, kv_, dims);
    // The step's tokens as target ids, written by the argmax itself (through the draft
    // vocabulary's map) both to the proposal and as the next forward's input tokens.
    const TensorView step_tokens(static_cast<int32_t*>(tokens_.data()) + j * bs, DType::kI32, {bs, 1}, dev);
    argmax_->run(logits, step_tokens, stream_, to_target_, j + 1 < steps_ ? ws_[static_cast<size_t>(j)]->ids(bs) : TensorView());
    if (stop_) {  // eager, on the host's memory: the step has run
      AERIE_CHECK(logits.dtype == DType::kF32, "a chain stop reads f32 draft logits");
      stop_->add_step(top_token_probabilities(logits.ptr<float>(), stop_rows_, logits.dim(1)));
      if (!stop_->goes_on()) {
        kept_steps_ = j + 1;
        return;
      }
    }
  }
}

std::vector<std::vector<int32_t>> DraftChainRunner::propose_while(const std::vector<ChainSeq>& seqs, ChainStop& stop) {
  AERIE_CHECK(!buckets_.graphs() && stream_.device() == Device::kCpu, "a chain cut short by its draft's probabilities runs eagerly on the CPU");
  stop_ = &stop;
  try {
    enqueue_proposal(seqs);
  } catch (...) {
    stop_ = nullptr;
    throw;
  }
  stop_ = nullptr;
  return collect_proposal();
}

void DraftChainRunner::enqueue_proposal(const std::vector<ChainSeq>& seqs) {
  AERIE_CHECK(pending_n_ < 0, "a chain proposal is enqueued and not collected");
  AERIE_CHECK(can_run(seqs), "this proposal does not fit the chain runner");
  const auto n = static_cast<int64_t>(seqs.size());
  const int64_t bs = *buckets_.batch_for(n);
  stop_rows_ = n;  // the rows a stop looks at (the rest pad the bucket)
  kept_steps_ = steps_;
  // Every step's batch: request i's token at first_position + j - 1, writing that position's
  // slot, over its context up to it. The tokens themselves are filled in on the device.
  const Stream& copies = side_.begin();
  for (int64_t j = 1; j < steps_; ++j) {
    model::ForwardBatch b;
    for (int64_t i = 0; i < n; ++i) {
      const auto& s = seqs[static_cast<size_t>(i)];
      const int32_t pos = s.first_position + static_cast<int32_t>(j - 1);
      b.input_ids.push_back(0);  // replaced on the device: the next token (step 1), the previous step's token
      b.positions.push_back(pos);
      b.out_cache_loc.push_back((*s.context)[static_cast<size_t>(pos)]);
      b.qo_indptr.push_back(static_cast<int32_t>(i + 1));
      b.kv_indices.insert(b.kv_indices.end(), s.context->begin(), s.context->begin() + pos + 1);
      b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
      b.logit_rows.push_back(static_cast<int32_t>(i));
    }
    ws_[static_cast<size_t>(j - 1)]->copy_in(bs > n ? model::pad_to_bucket(b, bs, 1) : b, copies);
  }
  {
    // The host staging is rewritten only after the previous proposal's tokens came back
    // (collect_proposal waits for their copy, which follows this one), so its copy has run.
    int32_t* rows = rows_host_.as<int32_t>();
    for (int64_t i = 0; i < bs; ++i) rows[i] = i < n ? seqs[static_cast<size_t>(i)].state_row : 0;
    copy_async(rows_.data(), rows, static_cast<size_t>(bs) * 4, copies);
  }
  side_.end();
  buckets_.run(bs, stream_, [&](int64_t b) { enqueue(b); });
  side_.mark();
  // The tokens back to the host once the chain has run, while the work after it (the verify
  // that reads them on the device) goes on; the next chain waits for this copy (end()).
  const size_t bytes = static_cast<size_t>(steps_ * bs) * 4;
  const Stream& out = side_.begin();
  copy_async(tokens_host_.data(), tokens_.data(), bytes, out);
  tokens_copied_.record(out);
  pending_n_ = n;
  pending_bs_ = bs;
}

TensorView DraftChainRunner::pending_tokens() const {
  AERIE_CHECK(pending_n_ >= 0, "no chain proposal is enqueued");
  return TensorView(tokens_.data(), DType::kI32, {steps_ * pending_bs_}, stream_.device());
}

std::vector<std::vector<int32_t>> DraftChainRunner::collect_proposal() {
  AERIE_CHECK(pending_n_ >= 0, "no chain proposal is enqueued");
  const int64_t n = pending_n_, bs = pending_bs_;
  pending_n_ = -1;
  tokens_copied_.wait();  // the chain's work ends with this copy (a CPU stream has run it already)
  const int32_t* t = tokens_host_.as<int32_t>();
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < kept_steps_; ++j) out[static_cast<size_t>(i)].push_back(t[j * bs + i]);
  return out;
}

}  // namespace aerie::spec
