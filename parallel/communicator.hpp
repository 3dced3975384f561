#pragma once
// Communicator: collectives over tensors, in the order of the op's stream, for one group of
// ranks (a TP group, the world, an attention-TP group). The model's forward calls them
// (row-parallel layers, vocab-parallel embedding and LM head), so this sits below model/.
// Implementations:
//  - NCCL for CUDA tensors: stream-ordered, capturable in a CUDA graph; made non-blocking
//    so a stuck or lost peer is noticed within a deadline and the communicator aborted.
//  - a ProcessGroup (MPI under mpirun) for CPU tensors, so every parallel path runs in CI.
//    Sums are formed from every rank's data in rank order on each rank: every rank gets the
//    same bits, as NCCL gives, so greedy tokens agree across ranks.
//  - a group of one: every collective is the identity (or a copy).
// Every rank of the group calls the same collectives in the same order with the same shapes.
#include <chrono>
#include <memory>

#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"
#include "parallel/process_group.hpp"

namespace aerie::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // x += x of every other rank, in place. [any shape] float
  virtual void all_reduce_sum(const TensorView& x, const Stream& stream) = 0;
  // out = every rank's `in` concatenated in rank order. in [n...], out [size * n...] (same dtype)
  virtual void all_gather(const TensorView& in, const TensorView& out, const Stream& stream) = 0;
  // out = this rank's block of the sum over ranks of `in`. in [size * n...], out [n...] float
  virtual void reduce_scatter_sum(const TensorView& in, const TensorView& out, const Stream& stream) = 0;
  // x = rank root's x on every rank, in place. [any shape]
  virtual void broadcast(const TensorView& x, int root, const Stream& stream) = 0;
  // What follows a row-parallel layer: x = sum of x over ranks; residual += x;
  // y = rmsnorm(residual) * weight (kernels/rms_norm.hpp's numbers). x, residual, y
  // [rows, hidden], weight [hidden]. By default all_reduce_sum then the rms_norm op; the IPC
  // communicator fuses them into one kernel.
  virtual void all_reduce_residual_rms_norm(const TensorView& x, const TensorView& residual, const TensorView& weight, const TensorView& y,
                                            float eps, const Stream& stream);
  // Gives up on the group after a fault: pending and later collectives fail instead of
  // waiting for a lost peer (NCCL: ncclCommAbort). Idempotent.
  virtual void abort() {}

 protected:
  // The shapes every implementation takes (throw aerie::Error naming the mismatch).
  void check_all_gather(const TensorView& in, const TensorView& out) const;
  void check_reduce_scatter(const TensorView& in, const TensorView& out) const;
};

// A group of one, on any device.
std::unique_ptr<Communicator> make_single_communicator();
// CPU tensors over `group` (which must outlive the communicator).
std::unique_ptr<Communicator> make_host_communicator(ProcessGroup& group);
// NCCL over the ranks of `group`: its rank 0 makes the unique id and broadcasts it over the
// group; every rank must already have its GPU current. Creation is non-blocking and gives up
// after `timeout` (the communicator is aborted, an aerie::Error thrown). Throws when this
// build has no NCCL.
std::unique_ptr<Communicator> make_nccl_communicator(ProcessGroup& group, std::chrono::milliseconds timeout);
bool nccl_available();
// `nccl` with bf16 / f16 all-reduces up to 2 MB (every decode step's) done by one-shot
// kernels over CUDA IPC and NVLink (TensorRT-LLM's Lamport all-reduce, sglang's custom
// all-reduce), the residual add and RMSNorm after a row-parallel layer fused in: when every
// rank of `group` is on this node and reaches every other's GPU, else `nccl` itself.
// Collective over `group`.
std::unique_ptr<Communicator> make_ipc_communicator(ProcessGroup& group, std::unique_ptr<Communicator> nccl);

struct CommunicatorOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // NCCL creation deadline
  bool custom_all_reduce = true;  // CUDA: the IPC one-shot all-reduce for decode-size messages
};
// The communicator for tensors of `device` over `group`: single for a group of one, NCCL
// (with the IPC all-reduce unless disabled) for CUDA, host (MPI) for CPU.
std::unique_ptr<Communicator> make_communicator(ProcessGroup& group, Device device, const CommunicatorOptions& options = {});

}  // namespace aerie::parallel
