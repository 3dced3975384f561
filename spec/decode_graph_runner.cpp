#include "spec/decode_graph_runner.hpp"

#include <algorithm>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"

namespace aerie::spec {

DecodeGraphRunner::DecodeGraphRunner(model::LlamaModel& model, model::KvCache& kv, int64_t max_bs, int64_t max_context)
    : model_(model), kv_(kv), schedule_(max_bs) {
  AERIE_CHECK(model.stream().device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  AERIE_CHECK(max_context > 0, "max context must be positive");
  const int64_t top = schedule_.sizes().back();
  model::ForwardCapacity cap;
  cap.max_tokens = cap.max_seqs = cap.max_logit_rows = top;
  cap.max_kv_indices = kv.shape().num_slots() + top;  // every real slot once, plus one per padded row
  for (int64_t bs : schedule_.sizes()) {
    splits_[bs] = model.attention_splits(bs, max_context);
    cap.max_splits = std::max(cap.max_splits, splits_[bs]);
  }
  ws_ = std::make_unique<model::ForwardWorkspace>(model.config(), cap, Device::kCuda, model.act_dtype());
  const Stream& stream = model.stream();
  // Largest first, as sglang does: later (smaller) captures reuse the memory pool.
  for (auto it = schedule_.sizes().rbegin(); it != schedule_.sizes().rend(); ++it) {
    const int64_t bs = *it;
    ws_->upload(padded(model::ForwardBatch{}, bs), stream);
    const model::ForwardDims dims{.tokens = bs, .seqs = bs, .logit_rows = bs, .custom_mask = false, .num_splits = splits_[bs],
                                  .logits_all_rows = true};
    model.run(*ws_, kv, dims);  // warm-up outside the capture (cuBLAS picks its kernels)
    synchronize(stream);
    cuda_runtime::begin_capture(stream.handle());
    try {
      model.run(*ws_, kv, dims);
    } catch (...) {
      cuda_runtime::end_capture(stream.handle());
      throw;
    }
    graphs_[bs] = cuda_runtime::end_capture(stream.handle());
  }
  synchronize(stream);
}

DecodeGraphRunner::~DecodeGraphRunner() {
  for (auto& [bs, g] : graphs_) cuda_runtime::destroy_graph(g);
}

int64_t DecodeGraphRunner::bucket_for(int64_t batch_size) const {
  auto b = schedule_.bucket_for(batch_size);
  return b ? *b : -1;
}

bool DecodeGraphRunner::can_run(const model::ForwardBatch& b) const {
  if (b.batch_size() < 1 || b.num_tokens() != b.batch_size() || !b.custom_mask.empty()) return false;
  if (!schedule_.bucket_for(b.batch_size())) return false;
  for (int64_t i = 0; i < b.batch_size(); ++i) {
    if (b.qo_indptr[static_cast<size_t>(i + 1)] - b.qo_indptr[static_cast<size_t>(i)] != 1) return false;
    if (b.logit_rows.size() != static_cast<size_t>(b.batch_size()) || b.logit_rows[static_cast<size_t>(i)] != i) return false;
  }
  return static_cast<int64_t>(b.kv_indices.size()) + schedule_.sizes().back() <= ws_->capacity().max_kv_indices;
}

model::ForwardBatch DecodeGraphRunner::padded(const model::ForwardBatch& batch, int64_t bucket) const {
  model::ForwardBatch p = batch;
  if (p.qo_indptr.empty()) p.qo_indptr = {0};
  if (p.kv_indptr.empty()) p.kv_indptr = {0};
  for (int64_t i = p.batch_size(); i < bucket; ++i) {
    p.input_ids.push_back(0);
    p.positions.push_back(0);
    p.out_cache_loc.push_back(0);  // the reserved dummy slot
    p.kv_indices.push_back(0);
    p.qo_indptr.push_back(p.qo_indptr.back() + 1);
    p.kv_indptr.push_back(p.kv_indptr.back() + 1);
    p.logit_rows.push_back(static_cast<int32_t>(i));
  }
  return p;
}

TensorView DecodeGraphRunner::replay(const model::ForwardBatch& batch) {
  AERIE_CHECK(can_run(batch), "batch cannot replay a captured decode graph");
  const int64_t bs = *schedule_.bucket_for(batch.batch_size());
  ws_->upload(padded(batch, bs), model_.stream());
  cuda_runtime::launch_graph(graphs_.at(bs), model_.stream().handle());
  return ws_->logits.view().slice_rows(0, batch.batch_size());
}

}  // namespace aerie::spec
