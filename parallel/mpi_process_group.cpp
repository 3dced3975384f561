// MPI-backed ProcessGroup (bootstrap and CPU collectives under mpirun).
#include <mpi.h>

#include <cstdint>
#include <string>

#include "kernels/error.hpp"
#include "parallel/process_group.hpp"

#include <cstdlib>

#define AERIE_MPI_CHECK(expr)                                                    \
  do {                                                                           \
    int aerie_mpi_rc_ = (expr);                                                  \
    if (aerie_mpi_rc_ != MPI_SUCCESS) {                                          \
      char aerie_mpi_msg_[MPI_MAX_ERROR_STRING];                                 \
      int aerie_mpi_len_ = 0;                                                    \
      MPI_Error_string(aerie_mpi_rc_, aerie_mpi_msg_, &aerie_mpi_len_);          \
      AERIE_FAIL(#expr << ": " << std::string(aerie_mpi_msg_, static_cast<size_t>(aerie_mpi_len_))); \
    }                                                                            \
  } while (0)

namespace aerie::parallel {

namespace {

class MpiProcessGroup final : public ProcessGroup {
 public:
  // The world: initializes MPI unless the program did.
  MpiProcessGroup(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      AERIE_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
      owns_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    AERIE_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    AERIE_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  }
  // A subgroup over a communicator this object then owns.
  explicit MpiProcessGroup(MPI_Comm comm) : comm_(comm), owns_comm_(true) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    AERIE_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    AERIE_MPI_CHECK(MPI_Comm_size(comm_, &size_));
  }
  ~MpiProcessGroup() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_comm_ && !finalized) MPI_Comm_free(&comm_);
    if (owns_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(std::span<float> data) override {
    AERIE_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, comm_));
  }
  std::vector<int64_t> all_gather(int64_t value) override {
    std::vector<int64_t> out(static_cast<size_t>(size_));
    AERIE_MPI_CHECK(MPI_Allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, comm_));
    return out;
  }
  void all_gather_bytes(std::span<const uint8_t> mine, std::span<uint8_t> all) override {
    AERIE_CHECK(all.size() == mine.size() * static_cast<size_t>(size_),
                "all_gather_bytes: " << all.size() << " bytes for " << size_ << " ranks of " << mine.size());
    AERIE_CHECK(mine.size() <= static_cast<size_t>(INT32_MAX), "all_gather_bytes: " << mine.size() << " bytes exceed MPI's count");
    AERIE_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(), static_cast<int>(mine.size()), MPI_BYTE,
                                  comm_));
  }
  void broadcast(std::span<uint8_t> bytes, int root) override {
    AERIE_CHECK(root >= 0 && root < size_, "broadcast root " << root << " outside " << size_ << " ranks");
    AERIE_MPI_CHECK(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, comm_));
  }
  void barrier() override { AERIE_MPI_CHECK(MPI_Barrier(comm_)); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for the type system
  }
  std::unique_ptr<ProcessGroup> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    AERIE_MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
    return std::make_unique<MpiProcessGroup>(sub);
  }

 private:
  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0, size_ = 1;
  bool owns_ = false;       // MPI itself
  bool owns_comm_ = false;  // comm_ (a subgroup)
};

}  // namespace

std::unique_ptr<ProcessGroup> make_process_group(int* argc, char*** argv) {
  if (!launched_by_mpirun()) return make_single_process_group();
  return std::make_unique<MpiProcessGroup>(argc, argv);
}

}  // namespace aerie::parallel
