#pragma once
// What a single-model tool (aerie-bench one-batch, aerie-dump-logits) needs to run one
// model tensor-parallel over every rank of an mpirun launch: the world, this rank's GPU,
// the TP communicator over the world, and this rank's shard. Without mpirun: one rank, the
// whole model. The serving path builds its groups in Deployment instead.
#include <memory>

#include "kernels/tensor.hpp"
#include "model/tp_shard.hpp"
#include "parallel/communicator.hpp"
#include "parallel/process_group.hpp"

namespace aerie::launch {

// One rank per GPU: under mpirun, local rank i of a node takes that node's GPU i. Throws
// when the node has fewer GPUs than ranks.
void bind_local_gpu();

struct TpContext {
  std::unique_ptr<parallel::ProcessGroup> world;
  std::shared_ptr<parallel::Communicator> tp;
  model::TpShard shard;
  bool rank0() const { return world->rank() == 0; }
};

// tp_size must equal the launch's rank count (checked on every rank, with the fix); 0: the
// launch's rank count, whatever it is.
TpContext make_tp_context(int* argc, char*** argv, Device device, int64_t tp_size, const parallel::CommunicatorOptions& options = {});

}  // namespace aerie::launch
