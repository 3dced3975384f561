#pragma once
// TargetWorkerCore: the CAF-free part of a TargetWorker. It runs one BatchMessage on its
// rank's model and KV cache (a captured CUDA graph when the batch is a decode that fits a
// bucket or one request's short prefill, eagerly otherwise), samples the requested rows and reports the tokens. Errors
// become a BatchResult with `error` set; the worker stays usable.
//
// Overlap scheduling: a batch's decodes may name tokens of the batch before it by future
// slots. A plain batch's tokens are recorded into a device table (DeviceFutureTokens) and the
// next batch resolves them on the device, so launch() enqueues a batch and returns without
// waiting for it whenever no host work needs its tokens (no logprobs, no logit adjustments):
// the next batch is enqueued behind it while it runs, and collect() hands the results over in
// launch order once their work has run. Speculative batches keep the host-side map
// (FutureTokenMap: a verify's layout shifts by what the last one committed) and run to the end
// in launch().
#include <deque>
#include <memory>

#include "actors/core/device_future_tokens.hpp"
#include "actors/core/forward_timeline.hpp"
#include "actors/core/future_tokens.hpp"
#include "actors/core/logit_adjustments.hpp"
#include "actors/core/logprob_reader.hpp"
#include "actors/core/spec_worker_core.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "spec/decode_graph_runner.hpp"
#include "spec/prefill_graph_runner.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

struct WorkerOptions {
  int64_t max_batch = 256;          // sequences per batch at most (sampler capacity)
  int64_t cuda_graph_max_bs = 0;    // > 0 on CUDA: capture decode graphs up to this batch size
  int64_t prefill_graph_max_tokens = 0;  // > 0 on CUDA: one request's prefill of up to this many tokens replays a graph
};

struct WorkerStats {
  int64_t batches = 0;
  int64_t graph_replays = 0;          // decode graphs
  int64_t prefill_graph_replays = 0;  // one request's prefill (spec::PrefillGraphRunner), plain batches
  int64_t errors = 0;
};

class TargetWorkerCore {
 public:
  TargetWorkerCore(model::LlamaModel& model, model::KvCache& kv, WorkerOptions options);
  // Runs a batch to the end: launch() and collect().
  transport::BatchResult execute(const transport::BatchMessage& batch);
  // Enqueues a batch's work (runs it to the end where host work needs its results); never throws.
  void launch(const transport::BatchMessage& batch);
  // Batches launched and not collected.
  size_t in_flight() const { return pending_.size(); }
  // Whether the oldest launched batch's work has run (collect() will not wait).
  bool oldest_done() const;
  // Marks when the newest launched batch's work has run: another thread may wait on it.
  std::shared_ptr<const StreamEvent> newest_done_event() const;
  // The oldest launched batch's result, once its work has run (waits for it).
  transport::BatchResult collect();
  // Every batch but IDLE goes to `spec` from now on (a speculative engine plans EXTEND and VERIFY).
  void enable_speculation(std::unique_ptr<SpecWorkerCore> spec) { spec_ = std::move(spec); }
  // The speculative core (null without a draft); read its stage times only while no batch runs.
  const SpecWorkerCore* speculative() const { return spec_.get(); }
  const WorkerStats& stats() const { return stats_; }

 private:
  struct Pending {
    transport::BatchResult result;
    std::vector<int32_t> future_slots;    // forgotten if the batch fails after all
    std::shared_ptr<StreamEvent> done;    // recorded after the batch's work (and its tokens' copy)
    std::unique_ptr<HostStaging> tokens;  // the tokens' copy, when they are still on the way
    size_t token_count = 0;
    bool timed = false;                   // the timeline has its begin and end
    // The result is whole on the host (a speculative round: its accept ran there), so it is
    // answered without waiting for the device work enqueued behind it (the draft's extend and
    // next chain): the Scheduler plans the next verify while they run.
    bool on_host = false;
  };
  // Runs a plain batch (future ids resolved on the device); throws on what it refuses. Leaves
  // the sampled ids on the device (returned) and, where host work needed them, in r.
  TensorView run(const transport::BatchMessage& m, transport::BatchResult& r, bool& tokens_on_host);
  // A speculative batch (future ids resolved on the host), run to the end.
  void run_speculative(const transport::BatchMessage& batch, transport::BatchResult& r);
  // Checks common to every batch; false for IDLE (handled here).
  bool prepare(const transport::BatchMessage& m);
  std::unique_ptr<HostStaging> take_token_buffer();
  model::LlamaModel& model_;
  model::KvCache& kv_;
  WorkerOptions options_;
  model::Sampler sampler_;
  LogprobReader logprobs_;
  LogitAdjuster adjuster_;
  std::unique_ptr<spec::DecodeGraphRunner> graphs_;
  std::unique_ptr<spec::PrefillGraphRunner> prefill_graphs_;
  std::unique_ptr<SpecWorkerCore> spec_;
  FutureTokenMap futures_;        // speculative batches
  DeviceFutureTokens device_futures_;  // plain batches
  std::deque<Pending> pending_;
  // Timeline batches of results answered from the host whose times were not collected yet.
  size_t untimed_on_host_ = 0;
  std::vector<std::unique_ptr<HostStaging>> spare_token_buffers_;
  ForwardTimeline timeline_;
  WorkerStats stats_;
  int cuda_device_ = -1;  // the GPU this worker's model lives on (set on whatever thread runs it)
};

}  // namespace aerie::core
