// Built without NCCL (no CUDA toolkit or no libnccl): GPU tensor parallelism is refused.
#include "kernels/error.hpp"
#include "parallel/communicator.hpp"

namespace aerie::parallel {

bool nccl_available() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(ProcessGroup& group, std::chrono::milliseconds) {
  AERIE_FAIL("CUDA tensors across " << group.size() << " ranks need NCCL, and this build of Aerie has none");
}

std::unique_ptr<Communicator> make_ipc_communicator(ProcessGroup&, std::unique_ptr<Communicator> nccl) { return nccl; }

}  // namespace aerie::parallel
