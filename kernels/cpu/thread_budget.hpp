#pragma once
#include <cstdint>

namespace aerie::kernels::cpu {

/// Threads one process's CPU ops may use: the machine's cores shared among the ranks that
/// mpirun started on this node (OMPI_COMM_WORLD_LOCAL_SIZE), at least one. Oversubscribed
/// ranks of a multi-process test would otherwise fight for the same cores.
int64_t thread_budget();

}  // namespace aerie::kernels::cpu
