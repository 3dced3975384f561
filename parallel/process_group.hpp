#pragma once
// ProcessGroup: the collectives Aerie's control and CPU paths need, behind one interface.
// make_process_group() returns an MPI-backed group when the process runs under mpirun
// (and Aerie was built with MPI), else the group of this process alone. GPU tensor
// collectives go through NCCL (the CUDA backend); this interface carries host data.
#include <cstdint>
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
  // Rank `root`'s bytes to every rank; `bytes` must have the same size everywhere.
  virtual void broadcast(std::span<uint8_t> bytes, int root) = 0;
  virtual void barrier() = 0;
};

// The world of this launch: MPI_COMM_WORLD under mpirun, else a group of one.
std::unique_ptr<ProcessGroup> make_process_group(int* argc, char*** argv);
// A group of one process (no communication at all).
std::unique_ptr<ProcessGroup> make_single_process_group();
// True when the environment says this process was started by mpirun.
bool launched_by_mpirun();

}  // namespace aerie::parallel
