#include "actors/core/spec_worker_core.hpp"

#include <algorithm>

#include "actors/core/forward_batch_of.hpp"
#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "spec/greedy_accept.hpp"
#include "spec/speculative_sampling.hpp"

namespace aerie::core {

namespace {

std::vector<int32_t> range_of(const std::vector<int32_t>& v, int64_t begin, int64_t end) {
  return {v.begin() + begin, v.begin() + end};
}

}  // namespace

SpecWorkerCore::SpecWorkerCore(model::LlamaModel& target, model::KvCache& kv, DraftWorkerCore& draft, int64_t max_batch)
    : target_(target), kv_(kv), draft_(draft), sampler_(target.stream().device(), max_batch) {
  if (draft_.eagle()) {
    model::HiddenCapture capture;
    if (draft_.algorithm() == SpecAlgorithm::kEagle) capture.final_normed = true;
    else capture.aux_layers = draft_.head()->config().aux_layers;
    target_.set_hidden_capture(capture);
  }
}


SpecWorkerCore::~SpecWorkerCore() { target_.set_hidden_capture({}); }

std::vector<int32_t> SpecWorkerCore::argmax_rows(const TensorView& logits) {
  const int64_t rows = logits.dim(0);
  if (!argmax_ || argmax_rows_ < rows) {
    argmax_rows_ = std::max<int64_t>(rows, 2 * argmax_rows_);
    argmax_ = std::make_unique<model::Sampler>(target_.stream().device(), argmax_rows_);
  }
  std::vector<model::SamplingRow> greedy(static_cast<size_t>(rows));
  return argmax_->sample(logits, greedy, target_.stream());
}

transport::BatchResult SpecWorkerCore::execute(const transport::BatchMessage& m) {
  for (uint64_t rid : m.finished_rids) draft_.forget(rid);
  const size_t seqs = m.qo_indptr.empty() ? 0 : m.qo_indptr.size() - 1;
  AERIE_CHECK(m.seq_rids.size() == seqs && m.extra_slots.size() == seqs, "speculative batch " << m.step_id << ": per-sequence fields disagree");
  if (m.mode == transport::ForwardMode::kVerify) return verify(m);
  AERIE_CHECK(m.mode == transport::ForwardMode::kExtend, "speculative batches are EXTEND or VERIFY");
  AERIE_CHECK(m.lookahead_ids.size() == seqs, "speculative batch " << m.step_id << ": lookahead ids disagree");
  return extend(m);
}

transport::BatchResult SpecWorkerCore::extend(const transport::BatchMessage& m) {
  transport::BatchResult r{.seq = 0, .step_id = m.step_id, .rids = m.rids, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""};
  const model::ForwardBatch b = forward_batch_of(m);
  const TensorView logits = target_.forward(b, kv_);
  std::vector<model::SamplingRow> rows;
  for (const auto& s : m.sampling)
    rows.push_back({.temperature = s.temperature, .top_p = s.top_p, .min_p = s.min_p, .top_k = s.top_k, .seed = s.seed, .step = s.step});
  r.next_tokens = sampler_.sample(logits, rows, target_.stream());
  const TensorView hidden = draft_.eagle() ? target_.captured_hidden() : TensorView();
  std::vector<DraftWorkerCore::ExtendSeq> ext;
  size_t sampled = 0;
  for (size_t s = 0; s + 1 < m.qo_indptr.size(); ++s) {
    const int64_t q0 = m.qo_indptr[s], q1 = m.qo_indptr[s + 1];
    const bool final = m.lookahead_ids[s] < 0;
    int32_t next = m.lookahead_ids[s];
    if (final) {
      AERIE_CHECK(sampled < r.next_tokens.size() && m.rids[sampled] == m.seq_rids[s], "speculative batch: sampling rows out of order");
      next = r.next_tokens[sampled++];
    }
    DraftWorkerCore::ExtendSeq e;
    e.rid = m.seq_rids[s];
    e.keep = final;
    e.first_position = m.positions[static_cast<size_t>(q0)];
    e.slots = range_of(m.out_cache_loc, q0, q1);
    e.context = range_of(m.kv_indices, m.kv_indptr[s], m.kv_indptr[s + 1]);
    if (draft_.eagle()) {
      // Position p pairs the token at p + 1 with the target's hidden state at p.
      e.tokens = range_of(m.input_ids, q0 + 1, q1);
      e.tokens.push_back(next);
      e.hidden_row = q0;
    } else {
      e.tokens = range_of(m.input_ids, q0, q1);
      if (final) {  // the sampled token too, at the position after the chunk
        AERIE_CHECK(m.extra_slots[s] >= 0, "speculative batch: no slot for the position after request " << e.rid << "'s prompt");
        e.tokens.push_back(next);
        e.slots.push_back(m.extra_slots[s]);
        e.context.push_back(m.extra_slots[s]);
      }
    }
    ext.push_back(std::move(e));
  }
  draft_.extend(ext, hidden);
  return r;
}

transport::BatchResult SpecWorkerCore::verify(const transport::BatchMessage& m) {
  const int64_t S = m.spec_steps, D = S + 1;
  const size_t B = m.seq_rids.size();
  AERIE_CHECK(m.sampling.size() == B && m.input_ids.size() == B * static_cast<size_t>(D),
              "verify batch " << m.step_id << ": expected " << D << " tokens and one sampling row per request");
  transport::BatchResult r{.seq = 0, .step_id = m.step_id, .rids = m.seq_rids, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""};
  // Each request's context: slots of positions [0, n + S], then the slot of n + S + 1.
  std::vector<std::vector<int32_t>> full(B);
  std::vector<int32_t> start(B);
  for (size_t s = 0; s < B; ++s) {
    AERIE_CHECK(m.qo_indptr[s + 1] - m.qo_indptr[s] == D, "verify batch: request " << m.seq_rids[s] << " has the wrong token count");
    start[s] = m.positions[static_cast<size_t>(m.qo_indptr[s])];
    full[s] = range_of(m.kv_indices, m.kv_indptr[s], m.kv_indptr[s + 1]);
    AERIE_CHECK(static_cast<int64_t>(full[s].size()) == start[s] + D, "verify batch: request " << m.seq_rids[s] << "'s context is "
                                                                                                << full[s].size() << " slots");
    AERIE_CHECK(m.extra_slots[s] >= 0, "verify batch: request " << m.seq_rids[s] << " has no slot after its verify tokens");
    full[s].push_back(m.extra_slots[s]);
  }
  // 1. Draft.
  std::vector<DraftWorkerCore::ProposeSeq> ps(B);
  for (size_t s = 0; s < B; ++s)
    ps[s] = {.rid = m.seq_rids[s], .first_position = start[s] + (draft_.eagle() ? 0 : 1), .context = full[s]};
  const auto drafts = draft_.propose(ps, S);
  // 2. Verify: the last committed token and the drafts, logits for every row.
  model::ForwardBatch b = forward_batch_of(m);
  b.logit_rows.clear();
  for (size_t s = 0; s < B; ++s)
    for (int64_t i = 0; i < D; ++i) {
      const size_t at = static_cast<size_t>(m.qo_indptr[s] + i);
      if (i > 0) b.input_ids[at] = drafts[s][static_cast<size_t>(i - 1)];
      b.logit_rows.push_back(static_cast<int32_t>(at));
    }
  const TensorView logits = target_.forward(b, kv_);
  // 3. Accept.
  const bool any_greedy = std::any_of(m.sampling.begin(), m.sampling.end(), [](const auto& x) { return x.temperature == 0.0f; });
  const bool any_sampled = std::any_of(m.sampling.begin(), m.sampling.end(), [](const auto& x) { return x.temperature != 0.0f; });
  std::vector<int32_t> argmax;
  if (any_greedy) argmax = argmax_rows(logits);
  std::vector<float> host;
  const int64_t V = logits.dim(1);
  if (any_sampled) {
    host.resize(static_cast<size_t>(logits.numel()));
    copy_async(host.data(), logits.data, host.size() * sizeof(float), target_.stream());
    synchronize(target_.stream());
  }
  std::vector<std::vector<int32_t>> committed(B);
  for (size_t s = 0; s < B; ++s) {
    const auto& sp = m.sampling[s];
    if (sp.temperature == 0.0f) {
      const auto acc = spec::greedy_accept_chain(drafts[s], std::span<const int32_t>(argmax).subspan(s * static_cast<size_t>(D), static_cast<size_t>(D)), 1, S);
      committed[s] = acc.committed;
    } else {
      const auto acc = spec::accept_chain_sampled(std::span<const float>(host).subspan(s * static_cast<size_t>(D * V), static_cast<size_t>(D * V)), V,
                                                  drafts[s], {.temperature = sp.temperature, .top_p = sp.top_p, .top_k = sp.top_k, .min_p = sp.min_p, .seed = sp.seed},
                                                  sp.step);
      committed[s].assign(drafts[s].begin(), drafts[s].begin() + acc.accepted);
      committed[s].push_back(acc.bonus);
    }
  }
  // 4. The draft follows the committed tokens.
  const TensorView hidden = draft_.eagle() ? target_.captured_hidden() : TensorView();
  std::vector<DraftWorkerCore::ExtendSeq> ext(B);
  for (size_t s = 0; s < B; ++s) {
    const int64_t a = static_cast<int64_t>(committed[s].size()) - 1, n = start[s];
    auto& e = ext[s];
    e.rid = m.seq_rids[s];
    e.keep = true;
    e.tokens = committed[s];
    if (draft_.eagle()) {  // positions n..n+a pair the committed tokens with the target's hidden states there
      e.first_position = static_cast<int32_t>(n);
      e.hidden_row = m.qo_indptr[s];
    } else {  // the committed tokens at their own positions n+1..n+a+1
      e.first_position = static_cast<int32_t>(n + 1);
    }
    e.slots = range_of(full[s], e.first_position, e.first_position + a + 1);
    e.context = range_of(full[s], 0, e.first_position + a + 1);
    r.next_tokens.insert(r.next_tokens.end(), committed[s].begin(), committed[s].end());
    r.token_counts.push_back(static_cast<int32_t>(a + 1));
  }
  draft_.extend(ext, hidden);
  return r;
}

}  // namespace aerie::core
