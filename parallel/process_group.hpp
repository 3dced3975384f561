#pragma once
// ProcessGroup: the host collectives Aerie's bootstrap, control and CPU paths need, behind
// one interface. make_process_group() returns an MPI-backed group when the process runs
// under mpirun (and Aerie was built with MPI), else the group of this process alone.
// Tensor collectives on a stream go through parallel/communicator.hpp (NCCL on the GPU, a
// ProcessGroup for CPU tensors).
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace aerie::parallel {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Element-wise sum over ranks, in place.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  // Every rank's value, in rank order (global_num_tokens exchange).
  virtual std::vector<int64_t> all_gather(int64_t value) = 0;
  // Every rank's `mine` (the same size everywhere) side by side in rank order: `all` holds
  // size() * mine.size() bytes.
  virtual void all_gather_bytes(std::span<const uint8_t> mine, std::span<uint8_t> all) = 0;
  // Rank `root`'s bytes to every rank; `bytes` must have the same size everywhere.
  virtual void broadcast(std::span<uint8_t> bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ends the whole launch now with this exit code (MPI_Abort: mpirun kills every rank and
  // exits non-zero); a group of one ends its process. Never returns; safe from any thread.
  [[noreturn]] virtual void abort(int code) = 0;
  // A subgroup (MPI_Comm_split): the ranks that pass the same `color`, ordered by `key`.
  // Every rank of this group must call it, in the same order as the others.
  virtual std::unique_ptr<ProcessGroup> split(int color, int key) = 0;
};

// The world of this launch: MPI_COMM_WORLD under mpirun, else a group of one.
std::unique_ptr<ProcessGroup> make_process_group(int* argc, char*** argv);
// A group of one process (no communication at all).
std::unique_ptr<ProcessGroup> make_single_process_group();
// True when the environment says this process was started by mpirun.
bool launched_by_mpirun();

}  // namespace aerie::parallel

namespace aerie::parallel {

// Runs `check` on every rank of `group` and lets all of them know how it went: if it threw
// on any rank, every rank throws aerie::Error with the first failing rank's message (so no
// rank goes on into a collective that the failed one will never join).
void check_on_every_rank(ProcessGroup& group, const std::function<void()>& check);

}  // namespace aerie::parallel
