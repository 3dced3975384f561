#pragma once
// Deployment: what one process of an Aerie launch runs. Every rank loads the model and owns
// a TargetWorker over its KV cache; rank 0 also runs the actor system: a Router in front of
// one Scheduler per DP group, each driving its group's worker (local on rank 0, on another
// rank through ZeroMQ). Rank 0 bootstraps the ZeroMQ endpoints and sends them to every
// rank over MPI; after that, control traffic is ZeroMQ only. With tp_size 1, DP group g is
// rank g.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/core/generation_request.hpp"
#include "parallel/process_group.hpp"

namespace aerie::launch {

struct DeploymentOptions {
  std::string model_path;
  std::string load_format = "auto";
  std::string model_shape = "tiny";
  uint64_t random_seed = 0;
  std::string device = "cpu";
  std::string dtype = "auto";
  int64_t max_total_tokens = 0;  // KV pool per replica, in tokens (0: sized by the caller's requests)
  int64_t page_size = 1;
  int64_t max_running_requests = 256;
  int64_t chunked_prefill_size = 8192;
  int64_t cuda_graph_max_bs = 256;
  bool disable_cuda_graph = false;
  int64_t tp_size = 1;
  int64_t dp_size = 1;
};

struct RequestOutcome {
  core::GenerationResult result;
  std::string error;  // empty when the request ran
};

class Deployment {
 public:
  Deployment(DeploymentOptions options, parallel::ProcessGroup& world);
  ~Deployment();
  bool is_rank0() const;
  // Rank 0: runs the requests to completion through the Router, results in request order,
  // then tells the other ranks to stop. Other ranks: serve batches until told to stop,
  // and return nothing.
  std::vector<RequestOutcome> run(const std::vector<core::GenerationRequest>& requests);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks the parallel layout against the world size; throws aerie::Error with the fix.
void check_parallel_layout(int64_t tp_size, int64_t dp_size, int world_size);

}  // namespace aerie::launch
