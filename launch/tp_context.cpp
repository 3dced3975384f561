#include "launch/tp_context.hpp"

#include <cstdlib>

#include "kernels/buffer.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

namespace aerie::launch {

void bind_local_gpu() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  if (!local) return;
  const int count = cuda_runtime::device_count();
  const int rank = std::atoi(local);
  AERIE_CHECK(rank < count, "local rank " << rank << " has no GPU of its own (" << count << " on this node): start at most " << count
                                          << " ranks per node, one per GPU");
  cuda_runtime::set_device(rank);
}

TpContext make_tp_context(int* argc, char*** argv, Device device, int64_t tp_size, const parallel::CommunicatorOptions& options) {
  TpContext c;
  c.world = parallel::make_process_group(argc, argv);
  if (tp_size == 0) tp_size = c.world->size();
  parallel::check_on_every_rank(*c.world, [&] {
    AERIE_CHECK(tp_size == c.world->size(), "--tp-size " << tp_size << " needs " << tp_size << " ranks, this launch has " << c.world->size()
                                                         << " (start with mpirun -np " << tp_size << ")");
    AERIE_CHECK(device == Device::kCpu || cuda_available(), "--device cuda: no usable CUDA device on rank " << c.world->rank());
    if (device == Device::kCuda) bind_local_gpu();
  });
  c.tp = parallel::make_communicator(*c.world, device, options);
  c.shard = {.rank = c.world->rank(), .size = c.world->size()};
  return c;
}

}  // namespace aerie::launch
