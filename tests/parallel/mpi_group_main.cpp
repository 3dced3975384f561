// Run under `mpirun -np N`: checks the MPI process group's collectives across real
// processes (exit code 0 only when every rank agrees).
#include <cstdio>
#include <vector>

#include "kernels/error.hpp"
#include "parallel/dp_padding.hpp"
#include "parallel/process_group.hpp"
#include "spec/cuda_graph_buckets.hpp"

int main(int argc, char** argv) {
  using namespace aerie;
  try {
    auto g = parallel::make_process_group(&argc, &argv);
    const int r = g->rank(), n = g->size();
    AERIE_CHECK(n >= 2, "run under mpirun -np 2 or more (got " << n << " ranks)");
    std::vector<float> v = {static_cast<float>(r), 1.0f};
    g->all_reduce_sum(v);
    AERIE_CHECK(v[0] == static_cast<float>(n * (n - 1) / 2) && v[1] == static_cast<float>(n), "all_reduce_sum wrong on rank " << r);
    // Each rank reports a different token count; all must plan the same padding.
    auto counts = g->all_gather(3 + 4 * r);
    for (int i = 0; i < n; ++i) AERIE_CHECK(counts[static_cast<size_t>(i)] == 3 + 4 * i, "all_gather wrong on rank " << r);
    auto plan = parallel::plan_dp_padding(counts, false, spec::cuda_graph_bucket_sizes(256));
    std::vector<uint8_t> root_plan = {static_cast<uint8_t>(plan.mode), static_cast<uint8_t>(plan.bucket.value_or(0))};
    std::vector<uint8_t> mine = root_plan;
    g->broadcast(root_plan, 0);
    AERIE_CHECK(root_plan == mine, "rank " << r << " planned a different DP padding than rank 0");
    g->barrier();
    std::printf("rank %d/%d ok\n", r, n);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_group_test: %s\n", e.what());
    return 1;
  }
}
