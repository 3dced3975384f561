// Built only without MPI: an mpirun launch is refused with a clear message.
#include "kernels/error.hpp"
#include "parallel/process_group.hpp"

namespace aerie::parallel {

std::unique_ptr<ProcessGroup> make_process_group(int*, char***) {
  AERIE_CHECK(!launched_by_mpirun(), "started by mpirun, but this build of Aerie has no MPI support");
  return make_single_process_group();
}

}  // namespace aerie::parallel
