#pragma once
// Deployment: what one process of an Aerie launch runs. Every rank loads its shard of the
// model and owns a TargetWorker over its KV cache; rank 0 also runs the actor system: a
// Router in front of one Scheduler per DP group, each driving its group's worker. DP group
// g is ranks [g * tp, (g + 1) * tp) (parallel/parallel_layout.hpp); with tp_size > 1 the
// group's worker sends each batch to all its ranks (local on rank 0, others through
// ZeroMQ), which run it in lock-step over their NCCL (GPU) or MPI (CPU) TP communicator.
// Rank 0 bootstraps the ZeroMQ endpoints and sends them to every rank over MPI; after that,
// control traffic is ZeroMQ only and tensor traffic the TP communicator. Rank 0 and every
// other rank exchange heartbeats (transport/heartbeat.hpp): rank 0 fails every request and
// ends the launch when a rank is lost; a rank that loses rank 0 ends the launch itself.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/core/generation_request.hpp"
#include "actors/core/spec_stage_times.hpp"
#include "model/config.hpp"
#include "parallel/process_group.hpp"

namespace aerie::launch {

struct DeploymentOptions {
  std::string model_path;
  std::string load_format = "auto";
  std::string model_shape = "tiny";
  uint64_t random_seed = 0;
  std::string device = "cpu";
  std::string dtype = "auto";
  int64_t context_length = 0;        // 0: the model's max_position_embeddings; else at most that
  int64_t max_total_tokens = 0;      // KV pool per replica, in tokens (0: from the memory budget below)
  double mem_fraction_static = 0.85;  // CUDA: share of the device's memory for weights + KV pool
  int64_t cpu_kv_budget_bytes = int64_t{256} << 20;  // CPU: KV pool budget when max_total_tokens is 0
  int64_t page_size = 1;
  int64_t max_running_requests = 256;
  int64_t chunked_prefill_size = 8192;
  int64_t cuda_graph_max_bs = 256;
  bool disable_cuda_graph = false;
  // One request's prefill (a prompt or a chunk) of up to this many new tokens replays a CUDA
  // graph captured at 16, 32, 64, ... tokens (spec/prefill_graph_runner.hpp); 0: every prefill
  // runs eagerly.
  int64_t prefill_cuda_graph_max_tokens = 256;
  std::vector<int64_t> cuda_graph_bs;      // sglang's --cuda-graph-bs: exactly these sizes (empty: the schedule)
  bool disable_cuda_graph_padding = false;  // replay only batches of exactly a captured size
  // Overlap scheduling (sglang's, on by default): each Scheduler plans the next batch while
  // the last one runs.
  bool disable_overlap_schedule = false;
  // ... and with speculative decoding, each verify planned before the last one's accept
  // lengths are known (sglang's spec v2, SGLANG_ENABLE_SPEC_V2; off by default, as there).
  bool enable_spec_overlap = false;
  // EAGLE chains: the next round's draft runs on the device right after a verify's extend,
  // while the result goes back and the next verify is planned
  // (spec::DraftWorkerCore::enable_draft_ahead; never under DP attention). "auto": on CUDA (on
  // the CPU the chain would run on the host before the result goes back, gaining nothing);
  // "on" also on the CPU (the tests), "off" never.
  std::string draft_ahead = "auto";
  int64_t tp_size = 1;
  int64_t dp_size = 1;
  // DP attention (sglang's): tp_size ranks in dp_size attention groups of tp_size / dp_size,
  // the MLP over all of them, every group's Scheduler in lock-step (actors/dp_coordinator_actor.hpp).
  bool enable_dp_attention = false;
  std::string log_level;  // "" : AERIE_LOG_LEVEL or warning (kernels/log.hpp)
  // Fault handling (docs/reliability.md): a step that has not finished within the watchdog, or
  // a rank silent for the heartbeat timeout (or whose connection closed), fails every request
  // with 503 and ends the launch with exit code 3.
  double watchdog_timeout_s = 300;
  double heartbeat_timeout_s = 10;
  bool disable_custom_all_reduce = false;  // CUDA TP: NCCL for every all-reduce (sglang's flag)
  // Speculative decoding (sglang's flags). Chain drafting: topk 1, num_draft_tokens = steps + 1.
  std::string speculative_algorithm;     // "" (off), EAGLE, EAGLE3, STANDALONE
  std::string speculative_draft_model_path;  // the head / draft folder (dummy: random, shaped for the target)
  std::string speculative_token_map;         // EAGLE: hot-token map file (model/token_map.hpp)
  int64_t speculative_num_steps = 3;
  int64_t speculative_eagle_topk = 1;
  int64_t speculative_num_draft_tokens = 0;  // 0: steps + 1
  int64_t speculative_disable_batch_size = 0;  // above this many running requests, verify without drafts (0: never)
  // Where the draft runs: "actor" (its own DraftWorker actor and thread, next to the
  // TargetWorker), "in-process" (on the TargetWorker's thread), or "auto": the actor with a GPU,
  // in-process on the CPU, where the actor's thread brought a second OpenMP pool beside the
  // target's and a 2-core machine's verifies took 1.5-1.9 plain steps instead of 1.1
  // (docs/cpu-backend.md).
  std::string draft_worker = "auto";
  // vLLM's draft_tensor_parallel_size: 0 or tp_size: the draft sharded like the target; 1: an
  // EAGLE head's layer and LM head whole on every rank (model/eagle_head.hpp).
  int64_t speculative_draft_tp_size = 0;
  // sglang's --speculative-draft-model-quantization: "" (as loaded) or "fp8" (FP8 copies of an
  // EAGLE head's weights with a scale per row, read by products of up to 16 rows).
  std::string speculative_draft_model_quantization;
  // A chain stops drafting once the requests' products of their draft tokens' probabilities are
  // below this on average (spec/chain_stop.hpp; CPU, topk 1); 0: every chain runs --speculative-num-steps.
  double speculative_chain_stop_probability = 0.0;
  // Batch-invariant kernels in every process of the launch (kernels/batch_invariant.hpp).
  bool enable_deterministic_inference = false;
};

struct RequestOutcome {
  core::GenerationResult result;
  std::string error;  // empty when the request ran
};

class Deployment {
 public:
  // Loads the model on this rank; rank 0 also starts the actor system and its actors.
  Deployment(DeploymentOptions options, parallel::ProcessGroup& world);
  // Rank 0 tells the other ranks to stop, if shutdown() was not called.
  ~Deployment();
  bool is_rank0() const;
  const model::LlamaConfig& config() const;
  // Usable KV slots of this rank's pool (a request needs prompt + max_new_tokens - 1).
  int64_t kv_capacity_tokens() const;

  // Rank 0: runs the requests to completion through the Router, results in request order
  // (rids 0..n-1 of this call). May be called again.
  std::vector<RequestOutcome> run(const std::vector<core::GenerationRequest>& requests);
  // Rank 0: the Router, where a frontend sends actors::SubmitRequest / AbortRequest.
  caf::actor router() const;
  caf::actor_system& system();
  // Rank 0: the worker's time in each speculative stage, summed over its verify rounds
  // (nothing without speculation); read between runs, while no batch runs.
  std::optional<core::SpecStageTimes> spec_stage_times() const;
  // Rank 0: why the engine is down (a rank lost, a step stuck), or nothing while it is healthy.
  std::optional<std::string> fault() const;
  // Rank 0: stops the other ranks and waits for them. Other ranks: serve batches (through
  // their TargetWorker actor) until rank 0 says stop. Every rank calls it once.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks the parallel layout against the world size; throws aerie::Error with the fix.
void check_parallel_layout(int64_t tp_size, int64_t dp_size, int world_size, bool dp_attention = false);
// Checks that the target (and the draft, when given) split over tp_size ranks (under DP
// attention: attention over tp_size / dp_size, the target's MLP over tp_size, the draft
// within the attention group); throws aerie::Error naming what does not divide.
void check_tensor_parallel(const model::LlamaConfig& target, const model::LlamaConfig* draft_layer, int64_t tp_size,
                           int64_t dp_attention_groups = 0);

}  // namespace aerie::launch
