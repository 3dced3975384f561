#include "actors/core/generation_engine.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::core {

GenerationEngine::GenerationEngine(model::LlamaModel& model, model::KvCache& kv, EngineOptions options)
    : model_(model),
      kv_(kv),
      options_(options),
      sampler_(model.stream().device(), options.max_running_requests),
      allocator_(kv.shape().num_pages),
      pages_(allocator_, kv.shape().page_size) {
  AERIE_CHECK(options_.max_running_requests > 0, "max running requests must be positive");
  AERIE_CHECK(options_.max_prefill_tokens > 0, "max prefill tokens must be positive");
  if (options_.cuda_graph_max_bs > 0 && model.stream().device() == Device::kCuda) {
    const int64_t max_bs = std::min(options_.cuda_graph_max_bs, options_.max_running_requests);
    graphs_ = std::make_unique<spec::DecodeGraphRunner>(model, kv, max_bs,
                                                        std::min(model.config().max_position_embeddings, kv.shape().usable_tokens()));
  }
}

void GenerationEngine::check_fits(const GenerationRequest& r) const {
  const auto& c = model_.config();
  AERIE_CHECK(!r.prompt.empty(), "prompt is empty");
  AERIE_CHECK(r.max_new_tokens > 0, "max_new_tokens must be positive, got " << r.max_new_tokens);
  r.sampling.validate();
  for (int32_t id : r.prompt)
    AERIE_CHECK(id >= 0 && id < c.vocab_size, "token id " << id << " is outside the vocabulary [0, " << c.vocab_size << ")");
  const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
  AERIE_CHECK(total <= c.max_position_embeddings,
              "prompt (" << r.prompt.size() << " tokens) + max_new_tokens (" << r.max_new_tokens
                         << ") exceeds the context length " << c.max_position_embeddings);
  // The last sampled token is never fed back, so a request needs total - 1 slots.
  AERIE_CHECK(total - 1 <= kv_.shape().usable_tokens(),
              "prompt (" << r.prompt.size() << " tokens) + max_new_tokens (" << r.max_new_tokens
                         << ") can never fit in the KV cache of " << kv_.shape().usable_tokens()
                         << " tokens; raise --max-total-tokens or the memory budget");
}

std::vector<GenerationResult> GenerationEngine::generate(const std::vector<GenerationRequest>& requests) {
  for (const auto& r : requests) check_fits(r);
  std::vector<GenerationResult> results(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    results[i].prompt_tokens = static_cast<int64_t>(requests[i].prompt.size());
    waiting_.push_back({i, requests[i].prompt, 0});
  }
  while (!waiting_.empty() || !running_.empty()) {
    AERIE_CHECK(step(requests, results), "the engine could not make progress (KV pool too small for any request)");
  }
  return results;
}

bool GenerationEngine::step(const std::vector<GenerationRequest>& requests, std::vector<GenerationResult>& results) {
  // 1. Every running request needs a slot for its one new token. When the pool is short,
  //    preempt the newest running request (recompute later) until the rest fit.
  for (;;) {
    int64_t need = 0;
    for (const auto& r : running_) need += pages_.pages_needed(r.index, r.computed + 1);
    if (need <= allocator_.free_pages() || running_.empty()) break;
    Running victim = std::move(running_.back());
    running_.pop_back();
    pages_.release(victim.index);
    victim.computed = 0;
    waiting_.push_front(std::move(victim));
    ++stats_.preemptions;
  }
  for (const auto& r : running_) AERIE_CHECK(pages_.reserve(r.index, r.computed + 1), "KV reservation failed after preemption");

  // 2. Admit waiting requests in order while pages, the running cap and the prefill budget allow.
  int64_t prefill_tokens = 0;
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_running_requests) {
    Running& w = waiting_.front();
    const int64_t len = static_cast<int64_t>(w.tokens.size());
    if (prefill_tokens > 0 && prefill_tokens + len > options_.max_prefill_tokens) break;
    if (!pages_.reserve(w.index, len)) break;
    prefill_tokens += len;
    running_.push_back(std::move(w));
    waiting_.pop_front();
  }
  if (running_.empty()) return false;

  // 3. One mixed forward: decoders feed their last token, new requests their whole context.
  model::ForwardBatch batch;
  for (auto& r : running_) {
    const int64_t begin = r.computed, end = static_cast<int64_t>(r.tokens.size());
    for (int64_t p = begin; p < end; ++p) {
      batch.input_ids.push_back(r.tokens[static_cast<size_t>(p)]);
      batch.positions.push_back(static_cast<int32_t>(p));
    }
    pages_.append_slots(r.index, begin, end, batch.out_cache_loc);
    pages_.append_slots(r.index, 0, end, batch.kv_indices);
    batch.qo_indptr.push_back(static_cast<int32_t>(batch.input_ids.size()));
    batch.kv_indptr.push_back(static_cast<int32_t>(batch.kv_indices.size()));
    batch.logit_rows.push_back(static_cast<int32_t>(batch.input_ids.size()) - 1);
  }
  const bool replay = graphs_ && graphs_->can_run(batch);
  bool all_greedy = true;
  for (const auto& r : running_) all_greedy = all_greedy && requests[r.index].sampling.temperature == 0.0f;
  stats_.graph_replays += replay ? 1 : 0;
  ++stats_.forward_steps;
  stats_.max_batch = std::max<int64_t>(stats_.max_batch, static_cast<int64_t>(running_.size()));

  // 4. One token per request: the graph's own argmax for an all-greedy decode, else the
  //    sampler (seeded by request seed and output position).
  std::vector<int32_t> next;
  if (replay && all_greedy) {
    next = graphs_->replay_greedy(batch);
  } else {
    const TensorView logits = replay ? graphs_->replay(batch) : model_.forward(batch, kv_);
    std::vector<model::SamplingRow> rows;
    for (const auto& r : running_) {
      const auto& s = requests[r.index].sampling;
      rows.push_back({.temperature = s.temperature, .top_p = s.top_p, .min_p = s.min_p, .top_k = s.top_k, .seed = s.seed,
                      .step = static_cast<int64_t>(results[r.index].output_ids.size())});
    }
    next = sampler_.sample(logits, rows, model_.stream());
  }

  // 5. Commit, and retire finished requests (their pages go back to the pool).
  const auto& eos = model_.config().eos_token_ids;
  std::vector<Running> still;
  for (size_t i = 0; i < running_.size(); ++i) {
    Running& r = running_[i];
    const auto& req = requests[r.index];
    auto& res = results[r.index];
    const int32_t tok = next[i];
    r.computed = static_cast<int64_t>(r.tokens.size());
    r.tokens.push_back(tok);
    res.output_ids.push_back(tok);
    const bool is_stop = std::find(req.stop_token_ids.begin(), req.stop_token_ids.end(), tok) != req.stop_token_ids.end() ||
                         (!req.ignore_eos && std::find(eos.begin(), eos.end(), tok) != eos.end());
    if (is_stop) res.finish_reason = "stop";
    else if (static_cast<int64_t>(res.output_ids.size()) >= req.max_new_tokens) res.finish_reason = "length";
    if (!res.finish_reason.empty()) pages_.release(r.index);
    else still.push_back(std::move(r));
  }
  running_ = std::move(still);
  return true;
}

}  // namespace aerie::core
