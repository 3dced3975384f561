#include "actors/core/generation_engine.hpp"

#include <deque>

#include "kernels/error.hpp"

namespace aerie::core {

SchedulerOptions scheduler_options_for(const model::LlamaConfig& c, int64_t max_running_requests, int64_t chunked_prefill_size, bool overlap) {
  return {.max_running_requests = max_running_requests, .chunked_prefill_size = chunked_prefill_size, .eos_token_ids = c.eos_token_ids,
          .vocab_size = c.vocab_size, .context_length = c.max_position_embeddings, .overlap = overlap};
}

GenerationEngine::GenerationEngine(model::LlamaModel& model, model::KvCache& kv, EngineOptions options)
    : model_(model),
      kv_(kv),
      options_(options),
      worker_(model, kv,
              {.max_batch = options.max_running_requests, .cuda_graph_max_bs = options.cuda_graph_max_bs,
               .prefill_graph_max_tokens = options.prefill_graph_max_tokens}) {}

std::vector<GenerationResult> GenerationEngine::generate(const std::vector<GenerationRequest>& requests) {
  SchedulerCore scheduler(kv_.shape(),
                          scheduler_options_for(model_.config(), options_.max_running_requests, options_.max_prefill_tokens, options_.overlap));
  for (size_t i = 0; i < requests.size(); ++i) scheduler.submit(i, requests[i]);  // throws before anything runs
  std::vector<GenerationResult> results(requests.size());
  std::deque<transport::BatchMessage> planned;  // sent to the worker, oldest first
  while (scheduler.has_work()) {
    while (auto next = scheduler.plan_next()) planned.push_back(std::move(*next));
    AERIE_CHECK(!planned.empty(), "the engine could not make progress");
    const transport::BatchResult r = worker_.execute(planned.front());
    planned.pop_front();
    AERIE_CHECK(r.error.empty(), "batch " << r.step_id << " failed: " << r.error);
    for (auto& u : scheduler.on_result(r))
      if (u.finished) results[u.rid] = std::move(u.result);
  }
  const auto& s = scheduler.stats();
  stats_ = {.forward_steps = s.iterations, .preemptions = s.preemptions, .max_batch = s.max_batch,
            .graph_replays = worker_.stats().graph_replays, .prefill_graph_replays = worker_.stats().prefill_graph_replays,
            .prefill_chunks = s.prefill_chunks};
  return results;
}

}  // namespace aerie::core
